"""HTCondor's Scalable-Job-Tracking tutorial has no code cells; its prose names two mechanisms,
and this module makes the calls it describes: polling the schedd with a projection, a
constraint and the AutoCluster option, and reading a job's event log with
``JobEventLog(...).events(stop_after=0)``, which does not block."""

from __future__ import annotations

import time

import pytest

from tests.e2e.pool import wait_for
from tests.e2e.tutorials.bindings import htcondor

pytestmark = pytest.mark.usefixtures("tutorial_pool")


def test_poll_based_tracking_with_autoclusters():
    schedd = htcondor.Schedd()
    # Idle jobs that match no slot, so they stay in their autocluster.
    sub = htcondor.Submit({"executable": "/bin/sleep", "arguments": "5m", "requirements": "false"})
    result = schedd.submit(sub, count=4)
    jobs = schedd.query(constraint=f"ClusterId == {result.cluster()}", projection=["ProcId", "JobStatus"])
    assert sorted(j["ProcId"] for j in jobs) == [0, 1, 2, 3]
    summaries = schedd.query(opts=htcondor.QueryOpt.AutoCluster)
    assert summaries and sum(s.get("JobCount", 0) for s in summaries) >= 4
    schedd.act(htcondor.JobAction.Remove, f"ClusterId == {result.cluster()}")


def test_event_based_tracking_reads_without_blocking(workdir):
    log = f"{workdir}/job_one.log"
    schedd = htcondor.Schedd()
    result = schedd.submit(htcondor.Submit({"executable": "/bin/true", "log": log, "request_memory": "16MB"}))
    jel = htcondor.JobEventLog(log)

    seen: list = []

    def terminated() -> bool:
        started = time.monotonic()
        seen.extend(jel.events(stop_after=0))  # returns what is there, at once
        assert time.monotonic() - started < 5
        return any(e.type == htcondor.JobEventType.JOB_TERMINATED for e in seen)

    wait_for("the job's termination event", terminated, 60)
    assert seen[0].type == htcondor.JobEventType.SUBMIT and all(e.cluster == result.cluster() for e in seen)
