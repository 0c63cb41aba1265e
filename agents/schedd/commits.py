"""When the job queue is written: now (awaited by whoever must answer after it) or soon (the
write-behind that batches the shadows' updates), always off the event loop.

A commit takes the in-memory changes (`JobQueue.take_batch`, on the loop: cheap) and writes them
in one SQLite transaction in a worker thread, so a FULL-sync commit never stalls other calls.
Commits run one at a time, in order; a change made while one is being written goes into the next.
Whoever must not answer before its change is on disk (Submit, an action, a JobReports exit)
awaits `now()`; many such callers at one moment share one transaction (group commit).

A write in its thread is never abandoned: should the awaiting task be cancelled (the schedd
stops), the write still ends and its outcome is still applied (a failed batch goes back to be
written by the next commit), and the next commit waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.store import Batch

log = logging.getLogger("gridbus.schedd.commits")


class QueueClosed(RuntimeError):
    """A commit asked for after the schedd closed its job queue."""


class Commits:
    def __init__(self, queue: JobQueue, write_behind: float):
        self.queue = queue
        self.write_behind = write_behind
        # Called on the loop just before a batch is taken: other parts put their changes in
        # (the shadows' claim rows, the submit events of late-materialized procs).
        self.before: list[Callable[[], None]] = []
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._writing: asyncio.Future[Any] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.closed = False

    # ------------------------------------------------------------------ asking for a commit
    def soon(self) -> None:
        """One commit a few milliseconds after the first change of a moment (write-behind)."""
        if self._timer is None and not self.closed:
            self._timer = asyncio.get_running_loop().call_later(self.write_behind, self._fire)

    def _fire(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(self._background_commit())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _background_commit(self) -> None:
        try:
            await self.now()
        except QueueClosed:
            pass
        except Exception:
            log.exception("committing the job queue failed; retrying")
            self.soon()

    async def now(self) -> None:
        """Write every change made so far; returns once it is on disk (raises if it could not be)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:
            await self._wait_for_write()
            if self.closed:
                raise QueueClosed(f"the job queue {self.queue.store.path} is closed (the schedd has stopped)")
            for hook in self.before:
                hook()
            batch = self.queue.take_batch()
            if not batch:
                self.queue.written(batch)  # everything taken before is on disk (waited for above)
                return
            future = asyncio.get_running_loop().run_in_executor(None, self.queue.store.write, batch)
            self._writing = future
            future.add_done_callback(lambda f: self._written(batch, f))
            await asyncio.shield(future)

    def _written(self, batch: Batch, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            # Memory stays the truth until it is written: the next commit takes these rows again.
            self.queue.give_back(batch)
            return
        self.queue.written(batch)

    async def _wait_for_write(self) -> None:
        writing = self._writing
        if writing is not None and not writing.done():
            try:
                await asyncio.shield(writing)
            except Exception:
                pass  # given back by _written; this commit writes it again

    async def exclusive(self, work: Callable[[], Any]) -> Any:
        """Run ``work`` (another write to the file: the history pruning) in a worker thread,
        between two commits."""
        async with self._lock:
            await self._wait_for_write()
            if self.closed:
                raise QueueClosed(f"the job queue {self.queue.store.path} is closed (the schedd has stopped)")
            return await asyncio.get_running_loop().run_in_executor(None, work)

    # ------------------------------------------------------------------ the end
    async def close(self) -> None:
        """The last commit, then the file is closed; later commits are refused (QueueClosed)."""
        if self.closed:
            return
        try:
            await self.now()
        except Exception:
            log.exception("the last commit of the job queue failed")
        finally:
            async with self._lock:
                await self._wait_for_write()
                self.closed = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                self.queue.store.close()

    @property
    def writing(self) -> bool:
        """A batch is in its worker thread: taken from the queue, not on disk yet."""
        return self._writing is not None and not self._writing.done()

    @property
    def pending(self) -> bool:
        """A write-behind commit is scheduled."""
        return self._timer is not None
