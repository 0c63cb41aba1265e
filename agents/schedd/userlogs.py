"""The user-log writer: job events' text appended to the jobs' user logs by the owners' shadows
(owner_shadow.py), so a log is written as its owner, never as the schedd, and never on the
schedd's event loop.

Each owner's text goes out in order through a queue and a task of its own, and what queued
behind one append for the same log goes in the next as one text (under load a job's events and
its neighbours' share one round trip to the shadow and one write). An owner whose log
hangs (a hung NFS mount, a FIFO nobody reads) delays only that owner's later log text, never
another owner's, nor any call the schedd answers. A log the owner cannot write (refused by its
shadow) calls ``on_error(owner, path, sentence)``: the schedd holds the jobs that log there.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable

from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowRefused
from gridbus.eventlog import writer

log = logging.getLogger("gridbus.schedd.userlogs")

# HTCondor's HoldReasonCode UnableToInitUserLog: the user log cannot be opened or written.
HOLD_USER_LOG = 22


class UserLogs:
    def __init__(self, shadows: OwnerShadows, on_error: Callable[[str, str, str], None]):
        self.shadows = shadows
        self.on_error = on_error
        self._pending: dict[str, deque[tuple[str, str]]] = {}  # owner -> (path, text) in order
        self._writers: dict[str, asyncio.Task[None]] = {}
        self.errors = 0
        # Logs the schedd writes itself (a spooled job's, in its spool: spooling.Spooling.owns_log).
        self.schedd_owned: Callable[[str], bool] = lambda path: False

    def write(self, texts: Iterable[tuple[str, str, str]]) -> None:
        """Queue (owner, path, text) appends; each owner's are written in this order."""
        for owner, path, text in texts:
            self._pending.setdefault(owner, deque()).append((path, text))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a commit outside the event loop (a tool): the next write takes it
            return
        for owner in self._pending:
            task = self._writers.get(owner)
            if task is None or task.done():
                self._writers[owner] = loop.create_task(self._run(owner), name=f"user logs of {owner}")

    async def _run(self, owner: str) -> None:
        pending = self._pending.get(owner)
        while pending:
            path, text = pending.popleft()
            if pending and pending[0][0] == path:
                parts = [text]
                while pending and pending[0][0] == path:
                    parts.append(pending.popleft()[1])
                text = "".join(parts)
            try:
                if self.schedd_owned(path):
                    await asyncio.get_running_loop().run_in_executor(None, writer.append, path, text)
                else:
                    await self.shadows.append(owner, path, text)
            except OSError as exc:  # (a spooled job's log, written by the schedd)
                self.errors += 1
                self.on_error(owner, path, f"{path}: {exc.strerror}")
            except ShadowRefused as exc:
                self.errors += 1
                log.warning("user log %s: %s", path, exc.sentence)
                try:
                    self.on_error(owner, path, exc.sentence)
                except Exception:
                    log.exception("holding the jobs of user log %s failed", path)
            except Exception:
                self.errors += 1
                log.exception("writing user log %s as %s failed", path, owner)
        if not pending:
            self._pending.pop(owner, None)

    async def written(self, owners: Iterable[str] | None = None, timeout: float | None = None) -> bool:
        """Wait until the text queued so far for ``owners`` (all: None) is written; False if that
        took longer than ``timeout``."""
        wanted = set(self._pending) if owners is None else set(owners)
        tasks = [t for o, t in self._writers.items() if o in wanted and not t.done()]
        if not tasks:
            return True
        done, _ = await asyncio.wait([asyncio.shield(t) for t in tasks], timeout=timeout)
        return len(done) == len(tasks)

    async def close(self, timeout: float = 5.0) -> None:
        """At the stop: what is still queued is written (for a bounded time), then the shadows stop."""
        try:
            if not await self.written(timeout=timeout):
                log.warning("user-log text of %s not written at the stop", ", ".join(sorted(self._pending)))
        finally:
            for task in self._writers.values():
                task.cancel()
            await asyncio.gather(*self._writers.values(), return_exceptions=True)
            await self.shadows.stop_all()
