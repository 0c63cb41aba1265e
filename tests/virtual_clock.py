"""An asyncio event loop on a virtual clock: timing logic tested without real sleeps.

The loop's `time()` is virtual, starting at 0. Whenever the loop would wait for its next timer
with nothing ready to run, the clock moves to that timer at once instead: ``asyncio.sleep(1.5)``
takes no real time, and everything scheduled before it has run first, in order. Only for code
whose waits are all timers (a wait on real I/O, a subprocess or a socket, would see the clock
jump past it); code that reads ``time.monotonic()`` itself is pointed at `VirtualClockLoop.time`
by the test.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector:
    """The loop's selector: a wait with a timeout moves the clock by that timeout instead."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.loop: VirtualClockLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self.selector.select(0)
        if ready or timeout == 0 or self.loop is None:
            return ready
        if timeout is None:  # no timer at all: only another thread can wake the loop
            return self.selector.select(None)
        self.loop.now += timeout
        return []

    def __getattr__(self, name: str) -> Any:  # register, unregister, modify, get_key, get_map, close
        return getattr(self.selector, name)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 0.0
        selector = _JumpingSelector()
        super().__init__(selector)  # (a selector by its interface: asyncio calls no more of it)
        selector.loop = self

    def time(self) -> float:
        return self.now


def run(main: Coroutine[Any, Any, T]) -> T:
    """``main`` run to its end on a new `VirtualClockLoop`, as asyncio.run would on a real one."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
