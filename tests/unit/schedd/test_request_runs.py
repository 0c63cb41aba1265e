"""GetResourceRequests groups a cluster's procs as one run (one signature from one ad) only when
nothing that decides their autocluster differs between them: its answer is the one grouping every
idle job's full ad on its own would give, and a cluster of alike procs costs one full ad."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gridbus.agents.schedd.jobattrs import runs_on_submit_host
from gridbus.autocluster import AutoClusters
from gridbus.classad import ExprTree
from tests.unit.schedd.inproc import call, make_schedd, submit

NEGOTIATOR = call("GetResourceRequests", user="negotiator")


def requests(schedd: Any, whole: bool = False, attrs: list[str] | None = None) -> list[dict[str, Any]]:
    out = asyncio.run(schedd.negotiation.GetResourceRequests(
        NEGOTIATOR, Owner="alice", Limit=1000, After=-1, AutoClusterAttrs=attrs or [], WholeAds=whole))
    return out["Requests"]


def one_by_one(schedd: Any, whole: bool = False, attrs: list[str] | None = None) -> list[tuple[dict, list]]:
    """The grouping of each idle job's full ad on its own (the plain way)."""
    ac = AutoClusters()
    ac.set_pool_attrs(None if whole else attrs or [])
    jobs = [j for j in schedd.queue.idle_jobs("alice") if not runs_on_submit_host(j)]
    groups = ac.group(jobs, owner="alice")
    return [({k: v for k, v in ad.items() if k != "AutoClusterId"}, ids) for _acid, ad, ids in groups]


def shapes(schedd: Any, reqs: list[dict[str, Any]]) -> list[tuple[dict, list]]:
    snap = schedd.negotiation._ac_snapshot["alice"]
    return [({k: v for k, v in r["Ad"].items() if k != "AutoClusterId"}, list(snap[r["AutoClusterId"]])) for r in reqs]


@pytest.mark.parametrize("whole", [False, True])
def test_runs_group_as_each_job_would(tmp_path: Path, whole: bool):
    schedd = make_schedd(tmp_path)
    asyncio.run(schedd.setup())
    submit(schedd, count=50, RequestMemory=100)
    # A cluster whose procs differ: one in RequestMemory (it decides the autocluster), one in an
    # attribute no match reads (a requeued job's LastJobStatus).
    cid = schedd.queue.new_cluster_id()
    ad = {"Owner": "alice", "ClusterId": cid, "Cmd": "/bin/true", "Requirements": True, "JobUniverse": 5,
          "QDate": 1, "RequestMemory": 200}
    schedd.queue.add_cluster(cid, "alice", ad, [{}, {"RequestMemory": 300}, {"LastJobStatus": 2}, {}], 4)
    # A cluster whose Requirements reads ProcId: every proc its own autocluster.
    submit(schedd, count=3, Requirements=ExprTree("TARGET.Memory > ProcId"))
    # Scheduler universe: never offered.
    submit(schedd, count=2, JobUniverse=7)
    reqs = requests(schedd, whole)
    assert shapes(schedd, reqs) == one_by_one(schedd, whole)
    counts = [r["Count"] for r in reqs]
    assert sum(counts) == 50 + 4 + 3
    if not whole:
        assert counts == [3, 1, 50, 1, 1, 1]  # the cluster of QDate 1 first
    asyncio.run(schedd.commits.close())


def test_a_slot_attribute_the_procs_differ_in_splits_the_run(tmp_path: Path):
    """The pool's slots read the job's LastJobStatus (AutoClusterAttrs): now it decides."""
    schedd = make_schedd(tmp_path)
    asyncio.run(schedd.setup())
    cid = schedd.queue.new_cluster_id()
    ad = {"Owner": "alice", "ClusterId": cid, "Cmd": "/bin/true", "Requirements": True, "JobUniverse": 5, "QDate": 1}
    schedd.queue.add_cluster(cid, "alice", ad, [{}, {"LastJobStatus": 2}, {}], 3)
    reqs = requests(schedd, attrs=["LastJobStatus"])
    assert shapes(schedd, reqs) == one_by_one(schedd, attrs=["LastJobStatus"])
    assert [r["Count"] for r in reqs] == [2, 1]
    asyncio.run(schedd.commits.close())


def test_a_cluster_of_alike_procs_costs_one_full_ad(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    schedd = make_schedd(tmp_path)
    asyncio.run(schedd.setup())
    for _ in range(5):
        submit(schedd, count=1000)
    built = []
    real = schedd.queue.ad
    monkeypatch.setattr(schedd.queue, "ad", lambda p: built.append(p) or real(p))
    reqs = requests(schedd)
    assert [r["Count"] for r in reqs] == [5000]
    assert len(built) == 5
    asyncio.run(schedd.commits.close())


def test_matched_jobs_leave_the_next_grouping(tmp_path: Path):
    schedd = make_schedd(tmp_path)
    asyncio.run(schedd.setup())
    submit(schedd, count=10)
    acid = requests(schedd)[0]["AutoClusterId"]
    schedd.claims.reserved.update({(1, 0), (1, 5)})
    reqs = requests(schedd)
    assert [(r["AutoClusterId"], r["Count"]) for r in reqs] == [(acid, 8)]
    assert (1, 0) not in schedd.negotiation._ac_snapshot["alice"][acid]
    asyncio.run(schedd.commits.close())
