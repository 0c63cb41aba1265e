"""The job queue's commits run in a worker thread: a slow (FULL-sync) write leaves the event loop
free for other calls, and a commit whose caller is cancelled meanwhile still lands, with what
changed during it written by the next."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.store import Batch, Store
from tests.unit.schedd.inproc import call, make_schedd, submit


def test_a_slow_commit_does_not_block_other_calls(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        submit(schedd, count=3)
        release = threading.Event()
        write = schedd.queue.store.write

        def slow_write(batch: object) -> None:
            release.wait(10)  # a disk that takes its time to sync
            write(batch)

        schedd.queue.store.write = slow_write  # type: ignore[method-assign]
        commit = asyncio.ensure_future(schedd.commits.now())
        await asyncio.sleep(0.05)
        assert not commit.done()
        parts = [p async for p in schedd.queries.Query(call("Query"), Constraint="true", Projection=["ProcId"],
                                                       Limit=-1, Opts=0, Compact=False)]
        assert len(parts[0]["Jobs"]) == 3 and not commit.done()  # answered while the write waits
        release.set()
        await commit
        await schedd.commits.close()

    asyncio.run(main())


def test_a_cancelled_commit_still_lands_and_the_next_writes_the_rest(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        first = submit(schedd)
        release = threading.Event()
        write = schedd.queue.store.write

        def slow_write(batch: object) -> None:
            release.wait(10)
            write(batch)

        schedd.queue.store.write = slow_write  # type: ignore[method-assign]
        commit = asyncio.ensure_future(schedd.commits.now())
        await asyncio.sleep(0.05)
        commit.cancel()  # the schedd stops while the write is in its thread
        second = submit(schedd)
        release.set()
        await schedd.commits.close()  # waits for the first write, then writes the second cluster
        q = JobQueue(tmp_path / "job_queue.sqlite3", "t")
        try:
            assert {first, second} <= set(q.clusters)
        finally:
            q.store.close()

    asyncio.run(main())


def test_history_waits_for_a_commit_under_way(tmp_path: Path, monkeypatch):
    """A job that completed just before a History is in its answer, even while the write-behind
    that carries it is still in its thread (the queue holds no unwritten change by then)."""
    async def main() -> list[dict]:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        cid = submit(schedd)
        await schedd.commits.now()
        p = schedd.queue.proc(cid, 0)
        assert p is not None
        schedd.queue.retire(p)  # it left for the history
        release = threading.Event()
        write = schedd.queue.store.write

        def slow_write(batch: object) -> None:
            release.wait(10)  # a disk that takes its time to sync
            write(batch)

        monkeypatch.setattr(schedd.queue.store, "write", slow_write)
        commit = asyncio.ensure_future(schedd.commits.now())  # as the write-behind's timer does
        await asyncio.sleep(0.05)
        assert not schedd.queue.dirty and not commit.done()
        asyncio.get_running_loop().call_later(0.05, release.set)
        parts = [p async for p in schedd.queries.History(call("History"), Constraint="true", Projection=["ProcId"],
                                                         Limit=-1, Since="")]
        await commit
        await schedd.commits.close()
        return [j for part in parts for j in part["Jobs"]]

    jobs = asyncio.run(main())
    assert len(jobs) == 1


def test_closing_the_store_waits_for_a_write_under_way(tmp_path: Path):
    # A write runs in a worker thread; closing its connection under it crashed the process (a
    # test closed the store while a commit it had started was still writing).
    store = Store(tmp_path / "q.sqlite3")
    writing, release = threading.Event(), threading.Event()

    def slow(value: str) -> str:  # the write's SQL waits here until released
        writing.set()
        release.wait(10)
        return value

    store.db.create_function("gridbus_test_slow", 1, slow)
    batch = Batch(writes=[("INSERT OR REPLACE INTO meta (key, value) VALUES (gridbus_test_slow(?), ?)", [("k", "v")])])
    writer = threading.Thread(target=store.write, args=(batch,))
    writer.start()
    assert writing.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "the store was closed under a write"
    release.set()
    writer.join(10)
    closer.join(10)
    assert not writer.is_alive() and not closer.is_alive() and store.writes == 1
    reopened = Store(tmp_path / "q.sqlite3")
    assert reopened.meta("k") == "v"
    reopened.close()
