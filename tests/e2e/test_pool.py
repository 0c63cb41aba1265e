"""A real pool end to end: submit, match, claim, run, complete, with every daemon a process."""

from __future__ import annotations

import pytest
from htcondor2 import JobEventLog, JobEventType

from tests.e2e.pool import logged, wait_for

pytestmark = pytest.mark.e2e


def done(pool, schedd, cluster, n):
    """The cluster's jobs that completed (they leave the queue for the history)."""
    hist = pool.history(schedd, f"ClusterId == {cluster}", ["ProcId", "JobStatus", "ExitCode", "RemoteHost",
                                                            "LastRemoteHost", "NumJobStarts"])
    return hist if len(hist) >= n else None


def test_200_true_jobs_complete_and_the_user_log_reads_with_htcondor(pool, tmp_path):
    log = tmp_path / "jobs.log"
    cluster = pool.submit("schedd@s", 200, log=log)
    hist = wait_for("200 completed jobs", lambda: done(pool, "schedd@s", cluster, 200), timeout=90)
    assert len(hist) == 200
    assert all(j["JobStatus"] == 4 and j["ExitCode"] == 0 for j in hist)
    assert {j["ProcId"] for j in hist} == set(range(200))
    logged(log, JobEventType.JOB_TERMINATED, 200)  # the last events follow the history closely
    seen: dict[JobEventType, set[int]] = {}
    for event in JobEventLog(str(log)).events(0):
        seen.setdefault(event.type, set()).add(event.proc)
    for kind in (JobEventType.SUBMIT, JobEventType.EXECUTE, JobEventType.JOB_TERMINATED):
        assert seen.get(kind) == set(range(200)), kind
    hosts = {j.get("LastRemoteHost") or j.get("RemoteHost") for j in hist}
    assert any(str(h).endswith("@a") for h in hosts) and any(str(h).endswith("@b") for h in hosts)
