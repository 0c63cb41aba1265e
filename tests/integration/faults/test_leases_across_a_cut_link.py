"""Claim leases across a real cut link (issues 6 and 7).

The schedd runs in a network namespace and reaches the broker only through a veth pair; the
startd, the collector and the negotiator are on the host. Cutting the veth cuts exactly the path
between the schedd side and the startd, while TCP stays open (segments are dropped, then
retransmitted), as on a real outage. The broker's heartbeat (60 s) is far longer than any cut
here, so neither the broker nor the clients notice: only the claim leases decide.

- Shorter than the lease: running jobs survive, an exit that happened during the cut arrives
  afterwards and is recorded exactly once.
- Longer than the lease: both sides end the claim on their own (the startd kills the job and frees
  the slot, the schedd returns the job to Idle); after the restore the job runs again and
  completes, once.
- Restored just after the startd ended the claim, before the schedd noticed: the startd's exit
  report of the job it killed arrives at a schedd that still holds the claim; it must send the job
  back to Idle (an eviction), not record the kill as the job's completion.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from htcondor2 import JobEventType

from tests.e2e.pool import wait_for
from tests.integration.faults.helpers import (
    SCHEDD,
    STARTD,
    all_unclaimed,
    completed_once,
    count,
    events,
    rerun_job,
    runs,
    slot_states,
)
from tests.integration.faults.netns import NetnsLink

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

def test_a_cut_shorter_than_the_lease_loses_nothing(make_netpool, link: NetnsLink, tmp_path: Path):
    lease = 10.0
    pool = make_netpool(lease)
    log = tmp_path / "short.log"
    quick = pool.submit(SCHEDD, 1, cmd="/bin/sh", args="-c 'sleep 1.5; exit 7'", log=log)
    slow = pool.submit(SCHEDD, 1, cmd="/bin/sh", args="-c 'sleep 6; exit 3'", log=log)
    wait_for("both jobs running", lambda: len(pool.jobs(SCHEDD, "JobStatus == 2")) == 2, 30)

    link.cut()
    try:
        # The quick job ends during the cut: its exit report goes unanswered and is retried.
        wait_for("the startd retrying an unanswered exit report",
                 lambda: "JobReports to schedd@s unanswered" in pool.log_of(STARTD, "StartLog"), lease * 0.6)
        remaining = lease * 0.35 - (time.monotonic() - (link.cut_at or 0))
        time.sleep(max(0.0, remaining))  # the outage itself: a third of the lease, by design
    finally:
        outage = link.restore()
    assert outage < lease / 2

    first = completed_once(pool, quick, log)
    assert first["ExitCode"] == 7 and first["JobStatus"] == 4
    second = completed_once(pool, slow, log)
    assert second["ExitCode"] == 3 and second["JobStatus"] == 4
    for job in (first, second):
        assert job.get("NumJobStarts", 1) == 1, job
    assert count(log, JobEventType.EXECUTE) == 2 and count(log, JobEventType.JOB_EVICTED) == 0, events(log)
    assert "ran out" not in pool.log_of(STARTD, "StartLog")


def running_rerun_job(make_netpool, lease: float, tmp_path: Path, log_name: str):
    """A pool with the given lease and one job (that runs again if evicted) running on a busy slot."""
    pool = make_netpool(lease)
    log = tmp_path / log_name
    cluster = rerun_job(pool, tmp_path, log)
    wait_for("the job running", lambda: pool.jobs(SCHEDD, "JobStatus == 2") and runs(tmp_path) == 1, 30)
    wait_for("the startd advertising the busy slot", lambda: ("Claimed", "Busy") in slot_states(pool).values(), 10)
    return pool, log, cluster


def test_a_cut_longer_than_the_lease_ends_the_claim_on_both_sides(make_netpool, link: NetnsLink, tmp_path: Path):
    lease = 5.0
    pool, log, cluster = running_rerun_job(make_netpool, lease, tmp_path, "long.log")

    link.cut()
    try:
        # Each side acts on its own, with no word from the other: the startd kills the job and
        # frees the slot; the schedd (whose user log is a local file) sends the job back to Idle.
        wait_for("the startd freeing the slot after the lease", lambda: all_unclaimed(pool), lease * 3)
        assert "lease of 5 s ran out with no word from schedd@s" in pool.log_of(STARTD, "StartLog")
        wait_for("the schedd evicting the job after the lease",
                 lambda: count(log, JobEventType.JOB_EVICTED, cluster) == 1, lease * 4)
    finally:
        outage = link.restore()
    assert outage > lease * 2 / 3  # the lease counts from the last renewal before the cut

    job = completed_once(pool, cluster, log)
    assert job["ExitCode"] == 0 and job["NumJobStarts"] == 2, job
    assert runs(tmp_path) == 2
    assert count(log, JobEventType.EXECUTE, cluster) == 2 and count(log, JobEventType.JOB_EVICTED, cluster) == 1


def test_a_restore_between_the_startd_ending_the_claim_and_the_schedd_noticing(make_netpool, link: NetnsLink,
                                                                               tmp_path: Path):
    lease = 5.0
    pool, log, cluster = running_rerun_job(make_netpool, lease, tmp_path, "race.log")

    link.cut()
    try:
        wait_for("the startd freeing the slot after the lease", lambda: all_unclaimed(pool), lease * 3)
    finally:
        outage = link.restore()  # at once: the schedd's own lease check is typically still to come
    # The startd's lease counts from the last renewal before the cut (Alive comes every lease/3),
    # so it can run out up to a third of a lease after the cut began.
    assert outage > lease * 2 / 3
    assert "lease of 5 s ran out with no word from schedd@s" in pool.log_of(STARTD, "StartLog")

    job = completed_once(pool, cluster, log)
    # The kill at the lease's end is an eviction, whichever side's word reached the schedd first.
    assert job["ExitCode"] == 0 and not job.get("ExitBySignal") and job["NumJobStarts"] == 2, job
    assert runs(tmp_path) == 2
    assert count(log, JobEventType.JOB_EVICTED, cluster) == 1, events(log)
