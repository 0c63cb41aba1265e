"""A job queue written by the previous release is read by this one: the store is migrated at the
start (a copy taken first) with every job's attributes intact; a store of a newer version is
refused with a sentence. (No broker: here beside the schedd's other tests of its store on disk,
for the previous release's installation, which takes half a minute.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.store import STORE_VERSION, Store, StoreTooNew
from tests.previous_release import Release

# Run by the previous release: a queue of three clusters (one with per-proc differences, one
# held), every job's ad printed as JSON.
WRITE_QUEUE = """
import json, sys
from gridbus.agents.schedd.jobqueue import JobQueue
q = JobQueue(sys.argv[1], "schedd@old")
for i in range(3):
    cid = q.new_cluster_id()
    ad = {"Owner": "alice", "Cmd": "/bin/sleep", "Arguments": str(i), "JobPrio": i, "RequestMemory": 128 * (i + 1),
          "WantIOProxy": True, "Environment": "A=1 B=two", "Iwd": "/home/alice", "x_list": [1, "two", 3.5]}
    diffs = [{"Arguments": f"{i} {p}", "x_proc": p} for p in range(2)] if i == 1 else None
    c = q.add_cluster(cid, "alice", ad, diffs, 2)
    if i == 2:
        q.set_status(c.procs[1], 5, {"HoldReason": "via condor_hold (by user alice)", "HoldReasonCode": 1})
q.flush()
print(json.dumps({f"{p.cluster.id}.{p.id}": q.ad(p) for p in q.procs()}, default=str, sort_keys=True))
q.close()
"""


def test_a_queue_of_the_previous_release_is_migrated_with_every_attribute(previous_release: Release,
                                                                          tmp_path: Path) -> None:
    path = tmp_path / "job_queue.db"
    before = json.loads(previous_release.run(WRITE_QUEUE, str(path)))
    assert len(before) == 6
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 0
    q = JobQueue(path, "schedd@old")
    q.load()
    after = json.loads(json.dumps({f"{p.cluster.id}.{p.id}": q.ad(p) for p in q.procs()}, default=str, sort_keys=True))
    q.close()
    assert after == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    backup = tmp_path / "job_queue.db.v0.bak"
    assert sqlite3.connect(backup).execute("SELECT COUNT(*) FROM procs").fetchone()[0] == 6


def test_a_store_of_a_newer_version_is_refused_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "job_queue.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {STORE_VERSION + 1}")
    with pytest.raises(StoreTooNew) as refused:
        Store(path)
    assert str(refused.value) == (f"the job queue {path} has schema version {STORE_VERSION + 1}, newer than this "
                                  f"gridbus's {STORE_VERSION}: run the gridbus release that wrote it, or restore the "
                                  "backup an upgrade left beside it")


def test_a_new_store_is_numbered_and_takes_no_backup(tmp_path: Path) -> None:
    Store(tmp_path / "q.db").close()
    assert sqlite3.connect(tmp_path / "q.db").execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    assert not list(tmp_path.glob("*.bak"))
