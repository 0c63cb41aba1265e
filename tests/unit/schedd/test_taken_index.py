"""The index of taken procs always equals what the reserved set and the by-job dict hold."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gridbus.agents.schedd.taken import TakenDict, TakenIndex, TakenSet

jobs = st.tuples(st.integers(1, 3), st.integers(0, 5))
ops = st.lists(st.tuples(st.sampled_from(["add", "discard", "update", "set", "del", "pop", "pop_default",
                                          "clear_set", "clear_dict", "setdefault"]), jobs), max_size=60)


def _expected(reserved: set, by_job: dict) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for c, p in [*reserved, *by_job]:
        out.setdefault(c, {})
        out[c][p] = out[c].get(p, 0) + 1
    return out


@given(ops)
def test_the_index_follows_every_change(steps):
    index = TakenIndex()
    reserved, by_job = TakenSet(index), TakenDict(index)
    for op, job in steps:
        if op == "add":
            reserved.add(job)
        elif op == "discard":
            reserved.discard(job)
        elif op == "update":
            reserved.update([job, (job[0], job[1] + 1)])
        elif op == "set":
            by_job[job] = "claim"
        elif op == "del" and job in by_job:
            del by_job[job]
        elif op == "pop" and job in by_job:
            by_job.pop(job)
        elif op == "pop_default":
            by_job.pop(job, None)
        elif op == "clear_set":
            reserved.clear()
        elif op == "clear_dict":
            by_job.clear()
        elif op == "setdefault":
            by_job.setdefault(job, "other")
        assert index.by_cluster == _expected(set(reserved), dict(by_job))
    for c in range(1, 4):
        assert set(index.procs(c)) == {p for cc, p in [*reserved, *by_job] if cc == c}
