"""Claims that end promptly: a restarted startd's old claims, and claims the schedd gave up on.

- kill -9 of a startd with running jobs, restarted as its master would: the restarted startd
  announces its start, the schedd asks it about its claims at once, hears "unknown" and requeues
  the jobs (an eviction event each), long before the next Alive round of a long lease.
- A RequestClaim answered after the schedd stopped waiting leaves a claim the schedd does not
  know: the schedd releases it (an idempotent release), so the slot is not stranded until its lease
  ends.
"""

from __future__ import annotations

import signal
import time

import pytest
from htcondor2 import JobEventLog, JobEventType

from tests.e2e.conftest import STATIC_STARTD
from tests.e2e.pool import wait_for

pytestmark = pytest.mark.e2e

# A lease of 10 minutes: the Alive round comes every 200 s (lease/3), so a requeue within the
# waits below comes from the restarted startd's start event, not from a round or the lease.
LONG_LEASE = {"GRIDBUS_JOB_LEASE_DURATION": "600"}


def test_restarted_startd_answers_unknown_and_its_jobs_are_requeued_at_once(make_pool, tmp_path):
    p = make_pool(**LONG_LEASE)
    p.start("collector", "c")
    p.start("negotiator", "n")
    p.start("schedd", "s")
    p.start("startd", "a", **STATIC_STARTD)
    p.wait_serving("collector@c", "schedd@s", "negotiator@n")
    p.wait_slots(4)
    log = tmp_path / "jobs.log"
    cluster = p.submit("schedd@s", 4, cmd="/bin/sleep", args="600", log=log)
    wait_for("4 running jobs", lambda: len(p.jobs("schedd@s", "JobStatus == 2")) == 4, 60)
    p.kill("startd@a")
    killed = time.monotonic()
    p.start("startd", "a", **STATIC_STARTD)
    # Requeued (Idle again, or running again on the restarted startd) with an eviction each.
    def evicted() -> list[int]:
        events = list(JobEventLog(str(log)).events(0))
        return sorted(e.proc for e in events if e.type == JobEventType.JOB_EVICTED)
    wait_for("an eviction event for each of the 4 jobs", lambda: evicted() == [0, 1, 2, 3], 60)
    print(f"\nrequeued {time.monotonic() - killed:.1f} s after the kill (Alive round: every 200 s)")
    assert "asking it about our claims now" in p.log_of("schedd@s", "SchedLog")
    jobs = p.jobs("schedd@s", f"ClusterId == {cluster}", ["ProcId", "JobStatus", "NumJobStarts"])
    assert len(jobs) == 4 and all(j["JobStatus"] in (1, 2) for j in jobs), jobs
    p.call("schedd@s", "Remove", {"Constraint": f"ClusterId == {cluster}", "Reason": "done"})


def test_a_claim_granted_after_the_request_timed_out_is_released(make_pool):
    # The startd is stopped (SIGSTOP) while the schedd asks it for the claim, so the schedd surely
    # gives up on its RequestClaim; once it runs again it grants the claim. (A timeout of 1 ms
    # instead was not sure: on a loaded machine the answer could be in before the wait began.)
    # Ads are updated every 60 s, not every second as in other tests: the stopped startd's slot
    # ad must outlive the stop in the collector, or nothing is matched to ask for.
    p = make_pool(GRIDBUS_SHADOW_CALL_TIMEOUT="2", GRIDBUS_UPDATE_INTERVAL="60", **LONG_LEASE)
    p.start("collector", "c")
    p.start("negotiator", "n")
    p.start("schedd", "s")
    startd = p.start("startd", "a", GRIDBUS_NUM_CPUS="1", GRIDBUS_NUM_SLOTS="1", GRIDBUS_MEMORY="1024")
    p.wait_serving("collector@c", "schedd@s", "negotiator@n")
    p.wait_slots(1)
    startd.send_signal(signal.SIGSTOP)
    try:
        p.submit("schedd@s", 1, cmd="/bin/true")
        wait_for("the schedd giving up on its RequestClaim",
                 lambda: "for job 1.0 refused: no answer" in p.log_of("schedd@s", "SchedLog"), 60)
    finally:
        startd.send_signal(signal.SIGCONT)
    wait_for("the startd granting a claim", lambda: "claimed by schedd@s" in p.log_of("startd@a", "StartLog"), 60)
    wait_for("the schedd releasing the claim it gave up on",
             lambda: "granted after its request timed out" in p.log_of("schedd@s", "SchedLog"), 60)
    wait_for("the startd ending the claim on a release",
             lambda: "ended (release)" in p.log_of("startd@a", "StartLog"), 30)
    assert "ended (lease)" not in p.log_of("startd@a", "StartLog")
