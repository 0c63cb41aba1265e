"""A job the startd stops on its own is evicted, not completed: deterministic, no network cut.

The same exit report (``Evicted: true``, ``ClaimEnded: true``) that a lease expiry produces comes
from an administrator's Vacate; the schedd must send the job back to Idle, drop the ended claim,
and run the job again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from htcondor2 import JobEventType

from tests.e2e.pool import Pool, wait_for
from tests.integration.faults.helpers import (
    SCHEDD,
    STARTD,
    completed_once,
    count,
    events,
    rerun_job,
    runs,
    slot_states,
)

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


@pytest.fixture
def pool(amqp_url: str, tmp_path: Path):
    p = Pool(amqp_url, tmp_path / "pool")
    try:
        p.start("collector", "c")
        p.start("negotiator", "n")
        p.start("schedd", "s")
        p.start("startd", "a", GRIDBUS_NUM_CPUS="2", GRIDBUS_NUM_SLOTS="2", GRIDBUS_MEMORY="2048")
        p.wait_slots(2)
        p.wait_serving(SCHEDD)
        yield p
    finally:
        p.stop()


def test_a_vacated_job_goes_back_to_idle_and_completes_once(pool: Pool, tmp_path: Path):
    log = tmp_path / "vacate.log"
    cluster = rerun_job(pool, tmp_path, log)
    wait_for("the job running", lambda: pool.jobs(SCHEDD, "JobStatus == 2") and runs(tmp_path) == 1, 30)
    wait_for("the startd advertising the busy slot", lambda: ("Claimed", "Busy") in slot_states(pool).values(), 10)
    assert pool.call(STARTD, "Vacate", {"Slot": "", "Graceful": True}).Count == 1

    job = completed_once(pool, cluster, log)
    assert job.get("ExitCode") == 0 and not job.get("ExitBySignal") and job["NumJobStarts"] == 2, job
    assert runs(tmp_path) == 2
    assert count(log, JobEventType.JOB_EVICTED, cluster) == 1, events(log)
    assert "refused ReleaseClaim" not in pool.log_of(SCHEDD, "SchedLog")  # the ended claim was dropped, not released
