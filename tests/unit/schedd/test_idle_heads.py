"""A cluster's ordered idle heads (claim reuse's first free proc) agree with the plain answer,
the lowest idle ProcId no claim holds, through any sequence of procs taken, given back, started,
held and released."""

from __future__ import annotations

import os
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridbus.agents.schedd.jobqueue import Cluster, JobQueue
from gridbus.agents.schedd.taken import TakenDict, TakenIndex, TakenSet
from tests.hypothesis_profiles import examples

PROCS = 6
ops = st.lists(st.tuples(st.sampled_from(["reserve", "unreserve", "run", "end", "idle", "leave"]),
                         st.integers(0, PROCS - 1)), max_size=120)


@settings(max_examples=examples(300), deadline=None, derandomize=not os.environ.get("GRIDBUS_EXPLORE"))
@given(ops)
def test_first_free_is_the_lowest_idle_proc_not_taken(steps):
    c = Cluster(7, "alice", {}, None)
    queue = SimpleNamespace(clusters={7: c})
    index = TakenIndex(on_free=lambda job: JobQueue.untaken(queue, job))  # type: ignore[arg-type]
    reserved, by_job = TakenSet(index), TakenDict(index)
    for pid in range(PROCS):
        c.became_idle(pid)
    for op, pid in steps:
        job = (7, pid)
        if op == "reserve" and pid in c.idle:
            reserved.add(job)
        elif op == "unreserve":
            reserved.discard(job)
        elif op == "run" and job in reserved:  # started on its claim: it leaves Idle
            by_job[job] = "claim"
            reserved.discard(job)
            c.idle.discard(pid)
        elif op == "end":
            by_job.pop(job, None)
        elif op == "idle" and pid not in c.idle and job not in by_job:
            c.became_idle(pid)  # released, or evicted back to Idle
        elif op == "leave":
            c.idle.discard(pid)  # held or removed while idle
        free = c.idle.difference(index.procs(7))
        assert c.first_free(index.procs(7)) == (min(free) if free else None), (op, pid)


def test_heads_full_of_stale_entries_are_made_again():
    c = Cluster(1, "alice", {}, None)
    for pid in range(10):
        c.became_idle(pid)
    for _ in range(100):  # one proc held and released over and over, deep in the queue
        c.idle.discard(5)
        c.became_idle(5)
    assert len(c.idle_heads) <= 2 * len(c.idle) + 65
    assert c.first_free({0: 1, 1: 1}) == 2
