"""MAX_JOBS_RUNNING in a real pool: a schedd allowed 2 running jobs never runs more on 4 free
slots, logs HTCondor's sentence, and still runs every job to completion. (About 15 s.)"""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import STATIC_STARTD
from tests.e2e.pool import wait_for

pytestmark = pytest.mark.e2e


def test_max_jobs_running_throttles_a_pool_with_free_slots(make_pool):
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s", GRIDBUS_MAX_JOBS_RUNNING="2")
    pool.start("startd", "a", **STATIC_STARTD)
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
    pool.wait_slots(4)
    cluster = pool.submit("schedd@s", 6, cmd="/bin/sleep", args="1")
    most = 0
    deadline = time.monotonic() + 90
    while len(pool.history("schedd@s", f"ClusterId == {cluster}", ["ProcId"])) < 6:
        assert time.monotonic() < deadline, "6 jobs did not complete in 90 s"
        most = max(most, len(pool.jobs("schedd@s", "JobStatus == 2", ["ProcId"])))
        time.sleep(0.1)
    assert most == 2  # as many as allowed, never more, though 4 slots were free
    wait_for("the schedd's sentence", lambda: "Reached MAX_JOBS_RUNNING: no more can run"
             in pool.log_of("schedd@s", "SchedLog"), 10)
