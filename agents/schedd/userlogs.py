"""The user-log writer: job events' text appended to the jobs' user logs by the owners' shadows
(owner_shadow.py), so a log is written as its owner, never as the schedd, and never on the
schedd's event loop.

Each owner's text goes out in order through a queue and a task of its own, and what queued
behind one append for the same log goes in the next as one text (under load a job's events and
its neighbours' share one round trip to the shadow and one write). An owner whose log
hangs (a hung NFS mount, a FIFO nobody reads) delays only that owner's later log text, never
another owner's, nor any call the schedd answers. A log the owner cannot write (refused by its
shadow) calls ``on_error(owner, path, sentence)``: the schedd holds the jobs that log there.

Each append names the outbox rows it carries (outbox.py); ``on_delivered(rows)`` is told once the
shadow has written them, or refused them for good (the jobs are held: that is their record). An
append the shadow died on (killed, twice in one request) is not refused: it waits RETRY_SECONDS
and goes again, ahead of the owner's later text, so a log's events keep their order.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable

from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowDied, ShadowRefused

log = logging.getLogger("gridbus.schedd.userlogs")

# HTCondor's HoldReasonCode UnableToInitUserLog: the user log cannot be opened or written.
HOLD_USER_LOG = 22
RETRY_SECONDS = 0.5  # before an append the shadow died on goes again

Delivered = Callable[[list[int]], None]


class UserLogs:
    def __init__(self, shadows: OwnerShadows, on_error: Callable[[str, str, str], None],
                 on_delivered: Delivered | None = None):
        self.shadows = shadows
        self.on_error = on_error
        self.on_delivered = on_delivered
        # owner -> (path, text, outbox rows) in order
        self._pending: dict[str, deque[tuple[str, str, tuple[int, ...]]]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}
        self.errors = 0
        self.retries = 0  # appends written again (their shadow died)

    def write(self, texts: Iterable[tuple[int, str, str, str]]) -> None:
        """Queue (row, owner, path, text) appends (row: the outbox row, 0 for none); each owner's
        are written in this order."""
        for row, owner, path, text in texts:
            self._pending.setdefault(owner, deque()).append((path, text, (row,) if row else ()))
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
            path, text, rows = pending.popleft()
            if pending and pending[0][0] == path:
                parts, all_rows = [text], list(rows)
                while pending and pending[0][0] == path:
                    _p, more, more_rows = pending.popleft()
                    parts.append(more)
                    all_rows.extend(more_rows)
                text, rows = "".join(parts), tuple(all_rows)
            try:
                await self.shadows.append(owner, path, text)
            except ShadowDied as exc:
                self._again(pending, path, text, rows, exc.sentence)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            except ShadowRefused as exc:
                self.errors += 1
                log.warning("user log %s: %s", path, exc.sentence)
                try:
                    self.on_error(owner, path, exc.sentence)
                except Exception:
                    log.exception("holding the jobs of user log %s failed", path)
            except Exception as exc:  # not the owner's refusal: the text goes again, as above
                log.exception("writing user log %s as %s failed", path, owner)
                self._again(pending, path, text, rows, str(exc))
                await asyncio.sleep(RETRY_SECONDS)
                continue
            if rows and self.on_delivered is not None:
                self.on_delivered(list(rows))
        if not pending:
            self._pending.pop(owner, None)

    def _again(self, pending: deque[tuple[str, str, tuple[int, ...]]], path: str, text: str,
               rows: tuple[int, ...], why: str) -> None:
        """``text`` goes again, ahead of the owner's later text (the log keeps its order)."""
        self.errors += 1
        self.retries += 1
        log.warning("user log %s: %s; writing it again in %.1f s", path, why, RETRY_SECONDS)
        pending.appendleft((path, text, rows))

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
