"""The job queue in memory and in SQLite, without a broker."""

from __future__ import annotations

import sqlite3

from gridbus.agents.schedd.jobattrs import JobStatus
from gridbus.agents.schedd.jobqueue import JobQueue

BASE = {"Cmd": "/bin/true", "Owner": "alice", "JobPrio": 0, "QDate": 1000, "Iwd": "/tmp", "ClusterId": 0}


def cluster_ad(cid: int, **extra) -> dict:
    return {**BASE, "ClusterId": cid, **extra}


def test_procs_inherit_the_cluster_ad_and_store_only_differences(tmp_path):
    q = JobQueue(tmp_path / "q.db", "s1")
    cid = q.new_cluster_id()
    q.add_cluster(cid, "alice", cluster_ad(cid), [{}, {"Args": "x"}], 2)
    q.flush()
    ad = q.get(cid, 1)
    assert ad["Cmd"] == "/bin/true" and ad["Args"] == "x" and ad["ProcId"] == 1 and ad["JobStatus"] == 1
    assert ad["GlobalJobId"] == f"s1#{cid}.1#1000"
    assert "Args" not in q.get(cid, 0)
    rows = sqlite3.connect(tmp_path / "q.db").execute("SELECT proc_id, attrs FROM procs ORDER BY proc_id").fetchall()
    assert rows[0] == (0, None) and rows[1][1] is not None  # proc 0 differs in nothing


def test_restart_reloads_every_job_with_its_status_and_changes(tmp_path):
    q = JobQueue(tmp_path / "q.db", "s1")
    c1 = q.new_cluster_id()
    q.add_cluster(c1, "alice", cluster_ad(c1), None, 3)
    c2 = q.new_cluster_id()
    q.add_cluster(c2, "bob", cluster_ad(c2, Owner="bob"), None, 1)
    q.set_status(q.proc(c1, 1), JobStatus.HELD, {"HoldReason": "why"})
    q.retire(q.proc(c1, 2))
    q.flush()
    q.store.close()
    q2 = JobQueue(tmp_path / "q.db", "s1")
    assert sorted(p.key for p in q2.procs()) == [(c1, 0), (c1, 1), (c2, 0)]
    assert q2.get(c1, 1)["JobStatus"] == 5 and q2.get(c1, 1)["HoldReason"] == "why"
    assert q2.totals("alice")[1] == 1 and q2.totals("alice")[5] == 1 and q2.totals("bob")[1] == 1
    assert q2.new_cluster_id() == c2 + 1
    assert q2.store.history_ad(c1, 2)["ProcId"] == 2


def test_idle_jobs_in_priority_qdate_cluster_proc_order(tmp_path):
    q = JobQueue(tmp_path / "q.db", "s1")
    a = q.new_cluster_id()
    q.add_cluster(a, "alice", cluster_ad(a, QDate=10), None, 3)
    b = q.new_cluster_id()
    q.add_cluster(b, "alice", cluster_ad(b, QDate=20, JobPrio=5), None, 2)
    q.update(q.proc(a, 2), {"JobPrio": 10})
    q.set_status(q.proc(b, 0), JobStatus.RUNNING)
    order = [(j["ClusterId"], j["ProcId"]) for j in q.idle_jobs("alice")]
    assert order == [(a, 2), (b, 1), (a, 0), (a, 1)]
    assert list(q.idle_jobs("nobody")) == []


def test_late_materialization_keeps_max_idle_procs(tmp_path):
    q = JobQueue(tmp_path / "q.db", "s1")
    made: list[int] = []
    q.on_materialized.append(lambda c, procs: made.extend(p.id for p in procs))
    cid = q.new_cluster_id()
    c = q.add_cluster(cid, "alice", cluster_ad(cid), None, 1_000_000, max_idle=3)
    q.flush()
    assert len(c.procs) == 3 and c.pending() == 999_997
    assert made == [0, 1, 2]
    q.set_status(q.proc(cid, 0), JobStatus.RUNNING)
    assert sorted(c.idle) == [1, 2, 3]
    q.retire(q.proc(cid, 1))
    q.flush()
    q.store.close()
    q2 = JobQueue(tmp_path / "q.db", "s1")
    c2 = q2.clusters[cid]
    assert sorted(c2.procs) == [0, 2, 3, 4] and c2.factory["Next"] == 5


def test_deleting_a_cluster_attribute_for_one_proc(tmp_path):
    q = JobQueue(tmp_path / "q.db", "s1")
    cid = q.new_cluster_id()
    q.add_cluster(cid, "alice", cluster_ad(cid, HoldReason="submitted on hold"), None, 2, status=5)
    q.set_status(q.proc(cid, 0), JobStatus.IDLE, {"HoldReason": None})
    assert "HoldReason" not in q.get(cid, 0) and q.get(cid, 1)["HoldReason"] == "submitted on hold"
    q.update(q.proc(cid, 1), {"holdreason": "other"})  # names are case-insensitive
    assert q.get(cid, 1)["HoldReason"] == "other"


def test_an_attribute_keeps_the_first_spelling_it_was_given(tmp_path):
    """ClassAd names have no case: a job's own attribute set again in another case (or twice in
    one update) stays one attribute, spelled as first given; a cluster attribute keeps the cluster's."""
    q = JobQueue(tmp_path / "q.db", "s1")
    cid = q.new_cluster_id()
    q.add_cluster(cid, "alice", cluster_ad(cid), None, 1)
    p = q.proc(cid, 0)
    q.update(p, {"LastHoldReason": "a", "ExitCode": 1})
    q.update(p, {"lastholdreason": "b", "EXITCODE": 2, "NewOne": 1, "newone": 2, "cmd": "/bin/false"})
    assert p.attrs == {"LastHoldReason": "b", "ExitCode": 2, "NewOne": 2, "Cmd": "/bin/false"}
    q.update(p, {"exitcode": None, "EXITCODE": 3})  # deleted, then set again: the new spelling
    assert p.attrs == {"LastHoldReason": "b", "EXITCODE": 3, "NewOne": 2, "Cmd": "/bin/false"}
    q.update(p, {"procid": 7, "JOBSTATUS": 2})  # computed from the record, never stored
    assert "procid" not in p.attrs and "JOBSTATUS" not in p.attrs
