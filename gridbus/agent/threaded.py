"""Run an agent on its own event loop in a background thread.

For tests and benchmarks that drive agents from synchronous code (the console is synchronous), and
for in-process pools. Daemons in production run as processes (`gridbus.agent.runner`).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from gridbus.agent.core import Agent


class AgentThread:
    def __init__(self, agent: Agent):
        self.agent = agent
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=agent.address, daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._run())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._started.set()
        finally:
            self.loop.close()

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        await self.agent.start()
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await self.agent.stop()

    def start(self, timeout: float = 15) -> AgentThread:
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError(f"{self.agent.address} did not start within {timeout} s")
        if self._error:
            raise RuntimeError(f"{self.agent.address} failed to start: {self._error!r}") from self._error
        return self

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the agent's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, timeout: float = 15) -> None:
        if self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def __enter__(self) -> AgentThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
