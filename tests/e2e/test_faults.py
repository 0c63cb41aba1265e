"""kill -9 of a startd and of the schedd with jobs running: nothing lost, nothing run to completion twice."""

from __future__ import annotations

import pytest
from htcondor2 import JobEventType

from tests.e2e.pool import logged, wait_for

pytestmark = pytest.mark.e2e


def completed(pool, cluster, n):
    hist = pool.history("schedd@s", f"ClusterId == {cluster}")
    return hist if len(hist) >= n else None


def running_on(pool, suffix):
    jobs = pool.jobs("schedd@s", "JobStatus == 2", ["ProcId", "RemoteHost"])
    return [j for j in jobs if str(j.get("RemoteHost", "")).endswith(suffix)]


def test_killed_startd_jobs_return_to_idle_and_complete_elsewhere(pool):
    cluster = pool.submit("schedd@s", 8, cmd="/bin/sleep", args="4")
    on_a = wait_for("jobs running on startd a", lambda: len(r := running_on(pool, "@a")) >= 2 and r, 30)
    pool.kill("startd@a")
    hist = wait_for("8 completed jobs", lambda: completed(pool, cluster, 8), timeout=60)
    assert sorted(j["ProcId"] for j in hist) == list(range(8))
    assert all(j["ExitCode"] == 0 for j in hist)
    moved = {j["ProcId"]: j for j in hist if j["ProcId"] in {r["ProcId"] for r in on_a}}
    for job in moved.values():
        assert str(job["LastRemoteHost"]).endswith("@b") and job["NumJobStarts"] >= 2, job


def test_killed_schedd_restarts_and_every_job_completes_exactly_once(pool, tmp_path):
    log = tmp_path / "restart.log"
    cluster = pool.submit("schedd@s", 8, cmd="/bin/sleep", args="3", log=log)
    wait_for("8 running jobs", lambda: len(pool.jobs("schedd@s", "JobStatus == 2")) >= 8, 30)
    pool.kill("schedd@s")
    pool.session = None  # the console's replies went with the schedd's queue: start a new session
    pool.start("schedd", "s")
    hist = wait_for("8 completed jobs after the restart", lambda: completed(pool, cluster, 8), timeout=60)
    assert sorted(j["ProcId"] for j in hist) == list(range(8))
    assert pool.jobs("schedd@s", f"ClusterId == {cluster}") == []
    terminated = [e.proc for e in logged(log, JobEventType.JOB_TERMINATED, 8)]
    assert sorted(terminated) == list(range(8)), terminated  # each exactly once
