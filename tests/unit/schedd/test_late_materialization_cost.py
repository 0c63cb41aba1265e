"""Late materialization costs the same per job whatever the size of the factory: making a proc
writes the proc and the factory's two counters, never the factory's item list again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.store import Batch

RUNNING = 2


def _bytes(batch: Batch) -> int:
    """What a batch writes, roughly: every blob and value in it."""
    def size(v: Any) -> int:
        if isinstance(v, (bytes, str)):
            return len(v)
        if isinstance(v, (tuple, list)):
            return sum(size(x) for x in v)
        if isinstance(v, dict):
            return sum(size(k) + size(x) for k, x in v.items())
        return 8

    return sum(size(getattr(batch, name)) for name in batch.__dataclass_fields__)


def _cost_of_one_materialization(path: Path, items: int) -> int:
    q = JobQueue(path, "t")
    written: list[int] = []
    write = q.store.write
    q.store.write = lambda batch: (written.append(_bytes(batch)), write(batch))[1]  # type: ignore[method-assign]
    diffs = [{"Args": f"item-{i:06d} " + "x" * 40} for i in range(items)]
    c = q.add_cluster(1, "alice", {"Owner": "alice", "Cmd": "/bin/true"}, diffs, items, max_idle=1)
    q.flush()
    q.set_status(c.procs[0], RUNNING)  # the idle proc starts: the factory makes the next
    assert 1 in c.procs
    written.clear()
    q.flush()
    q.store.close()
    return written[0]


def test_bytes_written_per_materialized_job_do_not_grow_with_the_factory(tmp_path: Path):
    small = _cost_of_one_materialization(tmp_path / "small.sqlite3", 10)
    large = _cost_of_one_materialization(tmp_path / "large.sqlite3", 20_000)
    assert large <= small + 16, (small, large)


def test_the_factory_resumes_where_it_was_after_a_restart(tmp_path: Path):
    path = tmp_path / "q.sqlite3"
    q = JobQueue(path, "t")
    c = q.add_cluster(1, "alice", {"Owner": "alice"}, [{"Args": str(i)} for i in range(5)], 5, max_idle=1)
    q.set_status(c.procs[0], RUNNING)
    q.set_status(c.procs[1], RUNNING)
    q.flush()
    q.store.close()
    again = JobQueue(path, "t")
    c = again.clusters[1]
    assert sorted(c.procs) == [0, 1, 2] and c.factory["Next"] == 3 and c.pending() == 2
    assert again.ad(c.procs[2])["Args"] == "2"
    again.store.close()
