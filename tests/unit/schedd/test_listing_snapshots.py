"""Query and History stream one moment of the queue: jobs that finish, and clusters that leave
the queue, while the chunks go out change nothing in the listing and never fail it half way."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gridbus.agents.schedd.queries import QUERY_CHUNK
from tests.unit.schedd.inproc import call, make_schedd, submit


async def _listing(schedd, method: str, change, **args) -> list:
    """The parts of a listing, calling ``change()`` once the first part is out."""
    parts = []
    async for part in getattr(schedd.queries, method)(call(method), **args):
        parts.append(part)
        if len(parts) == 1:
            await change()
    return parts


def test_a_cluster_that_leaves_during_a_query_changes_nothing_in_it(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        first = submit(schedd, count=QUERY_CHUNK + 200)
        last = submit(schedd, count=300)

        async def finish_last_cluster() -> None:
            for p in list(schedd.queue.clusters[last].procs.values()):
                schedd.queue.retire(p)
            schedd.queue.update(schedd.queue.proc(first, QUERY_CHUNK + 1), {"Marker": 1})
            assert last not in schedd.queue.clusters

        for compact in (False, True):
            if compact:
                last = submit(schedd, count=300)
            parts = await _listing(schedd, "Query", finish_last_cluster, Constraint="true", Projection=[],
                                   Limit=-1, Opts=0, Compact=compact)
            jobs = [j for part in parts for j in part["Jobs"]]
            assert len(jobs) == QUERY_CHUNK + 500
            if not compact:
                assert sum(1 for j in jobs if j["ClusterId"] == last) == 300
                assert not any("Marker" in j for j in jobs)  # changed after the listing began
        schedd.queue.store.close()

    asyncio.run(main())


def test_history_is_read_from_one_moment_off_the_event_loop(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        done = submit(schedd, count=QUERY_CHUNK + 100)
        for p in list(schedd.queue.clusters[done].procs.values()):
            schedd.queue.retire(p)
        await schedd.commits.now()
        later = submit(schedd, count=50)

        async def more_finish_and_the_history_is_pruned() -> None:
            for p in list(schedd.queue.clusters[later].procs.values()):
                schedd.queue.retire(p)
            await schedd.commits.now()
            await schedd.commits.exclusive(lambda: schedd.queue.store.prune_history(0, 10))

        parts = await _listing(schedd, "History", more_finish_and_the_history_is_pruned, Constraint="true",
                               Projection=["ClusterId"], Limit=-1, Since="")
        jobs = [j for part in parts for j in part["Jobs"]]
        assert len(jobs) == QUERY_CHUNK + 100 and {j["ClusterId"] for j in jobs} == {done}
        await schedd.commits.close()

    asyncio.run(main())
