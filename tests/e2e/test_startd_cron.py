"""Node health by startd cron, end to end: a STARTD_CRON job reports NODE_IS_HEALTHY, the slots'
START is NODE_IS_HEALTHY (STARTD_ATTRS gives it a value before the first report). A report of
false stops new matches on that startd within a period while its running job finishes; true
brings them back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.e2e

PERIOD = 2  # STARTD_CRON_HEALTH_PERIOD, seconds
HEALTH = """#!/bin/sh
echo "NODE_IS_HEALTHY = $(cat "$1")"
echo "Checked = $(date +%s)"
"""
WAITER = """#!/bin/sh
while [ ! -e "$1" ]; do sleep 0.1; done
"""


@pytest.fixture(scope="module")
def pool(mgmt, broker_url, tmp_path_factory) -> Iterator[Pool]:
    vhost = f"gridbus-test-cron-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    work = tmp_path_factory.mktemp("cron-pool")
    for name, text in (("health.sh", HEALTH), ("waiter.sh", WAITER)):
        (work / name).write_text(text)
        (work / name).chmod(0o755)
    (work / "health").write_text("true\n")
    p = Pool(broker_url.with_vhost(vhost).url, work)
    try:
        p.start("collector", "c")
        p.start("negotiator", "n")
        p.start("schedd", "s")
        p.start("startd", "h", GRIDBUS_NUM_CPUS="2", GRIDBUS_NUM_SLOTS="2", GRIDBUS_MEMORY="2048",
                GRIDBUS_START="NODE_IS_HEALTHY", GRIDBUS_STARTD_ATTRS="NODE_IS_HEALTHY", GRIDBUS_NODE_IS_HEALTHY="true",
                GRIDBUS_STARTD_CRON_JOBLIST="HEALTH", GRIDBUS_STARTD_CRON_HEALTH_EXECUTABLE=str(work / "health.sh"),
                GRIDBUS_STARTD_CRON_HEALTH_ARGS=str(work / "health"), GRIDBUS_STARTD_CRON_HEALTH_PERIOD=str(PERIOD),
                GRIDBUS_STARTD_CRON_AUTOPUBLISH="If_Changed")
        p.wait_serving("collector@c", "schedd@s", "negotiator@n")
        p.wait_slots(2)
        yield p
    finally:
        p.stop()
        mgmt.delete_vhost(vhost)


def healthy(pool: Pool) -> set:
    return {ad.get("NODE_IS_HEALTHY") for ad in pool.ads("Machine")}


def cycles(pool: Pool) -> int:
    return int(pool.negotiator_stats().get("NegotiationCycles", 0))


def waiter(pool: Pool, release: Path, count: int) -> int:
    return pool.submit("schedd@s", count, cmd=str(pool.workdir / "waiter.sh"), args=str(release))


def by_status(pool: Pool, cluster: int, status: int) -> list[dict]:
    return pool.jobs("schedd@s", f"ClusterId == {cluster} && JobStatus == {status}")


def test_a_sick_node_takes_no_new_job_and_finishes_its_running_one(pool):
    assert healthy(pool) == {True}
    (ad, *_) = pool.ads("Machine")
    assert isinstance(ad.get("Checked"), int)  # the cron job's other attribute is in the slot ads too
    first_release = pool.workdir / "release-first"
    running = waiter(pool, first_release, 1)
    wait_for("the first job to run", lambda: by_status(pool, running, 2), timeout=30)

    (pool.workdir / "health").write_text("false\n")
    sick_at = time.monotonic()
    wait_for("the slot ads to say NODE_IS_HEALTHY = false", lambda: healthy(pool) == {False}, timeout=3 * PERIOD)
    took = time.monotonic() - sick_at
    # A period for the job's next run, and the update's way to the collector (coalesced, then queried).
    assert took <= PERIOD + 2.5, f"the report reached the collector {took:.1f} s after the node fell sick"

    later_release = pool.workdir / "release-later"
    later = waiter(pool, later_release, 2)
    start = cycles(pool)
    wait_for("three negotiation cycles", lambda: cycles(pool) >= start + 3, timeout=30)
    assert len(by_status(pool, later, 1)) == 2  # no match on a sick node, though a slot is free
    assert len(by_status(pool, running, 2)) == 1  # the running job goes on
    first_release.touch()
    wait_for("the running job to finish", lambda: pool.history("schedd@s", f"ClusterId == {running}"), timeout=30)
    start = cycles(pool)
    wait_for("two more negotiation cycles", lambda: cycles(pool) >= start + 2, timeout=30)
    assert len(by_status(pool, later, 1)) == 2  # its slot, free again, takes no new job either

    (pool.workdir / "health").write_text("true\n")
    later_release.touch()
    done = wait_for("the waiting jobs to run once the node is healthy",
                    lambda: (h := pool.history("schedd@s", f"ClusterId == {later}")) and len(h) == 2 and h, timeout=30)
    assert all(j["ExitCode"] == 0 for j in done)
    assert "STARTD_CRON" not in pool.log_of("startd@h", "StartLog")  # the job never failed
