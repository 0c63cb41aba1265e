"""Bursts of one-job clusters through plain Schedd.submit calls, some held or removed as soon as
they are queued: the pool never stalls and no claim is left idle.

Many single-job clusters make many matches per cycle while the schedd reuses its claims; the holds
and removals race the matches, claims and activations of their jobs. The schedd's calls to the
startd get a short SHADOW_CALL_TIMEOUT, so that a startd answering late (as a loaded one does within
the default 10 s) is the common case here, not a rare one: an unanswered activation must be asked
again within the lease, never taken for a refusal (which left the startd's claim Claimed/Idle and
let the startd run a job the schedd then ran again).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from gridbus.bus import BrokerURL
from gridbus.console import JobAction, Schedd, Submit
from gridbus.mgmt import Management
from tests.e2e.pool import Pool, standard_pool, wait_for

pytestmark = pytest.mark.e2e

SLOTS = {"GRIDBUS_NUM_CPUS": "12", "GRIDBUS_NUM_SLOTS": "12", "GRIDBUS_MEMORY": "12288"}
HELD, REMOVED = 5, 3


@pytest.fixture(scope="module")
def burst_pool(broker_url: BrokerURL, mgmt: Management, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("burstpool"), "bursts", slots=SLOTS,
                       schedd_env={"GRIDBUS_SHADOW_CALL_TIMEOUT": "0.5"}) as pool:
        yield pool


def submit_burst(pool: Pool, per_thread: int, threads: int) -> tuple[set[int], set[int], set[int]]:
    """One-job clusters from ``threads`` clients at once; the first client holds every 5th of its
    clusters and removes every 7th right after submitting it. (all, held, removed) cluster ids."""
    every: set[int] = set()
    held: set[int] = set()
    removed: set[int] = set()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client(index: int) -> None:
        try:
            schedd = Schedd("schedd@s", url=pool.url)
            sub = Submit({"executable": "/bin/true", "initialdir": str(pool.workdir), "request_memory": "16MB",
                          "request_disk": "64KB"})
            for k in range(per_thread):
                cluster = schedd.submit(sub, count=1).cluster()
                with lock:
                    every.add(cluster)
                # A job that already completed cannot be held or removed: only those acted on count.
                if index == 0 and k % 5 == 4:
                    if schedd.act(JobAction.Hold, f"ClusterId == {cluster}")["TotalSuccess"] == 1:
                        with lock:
                            held.add(cluster)
                elif index == 0 and k % 7 == 6:
                    if schedd.act(JobAction.Remove, f"ClusterId == {cluster}")["TotalSuccess"] == 1:
                        with lock:
                            removed.add(cluster)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    return every, held, removed


def startd_stats(pool: Pool) -> dict:
    return dict(pool.console().getObjects(_class="startd")[0].getStatistics())


def test_bursts_of_one_job_clusters_complete_and_leave_no_claim_idle(burst_pool: Pool):
    pool = burst_pool
    submitted: set[int] = set()
    for _round in range(2):
        every, held, removed = submit_burst(pool, 50, 3)
        assert len(every) == 150
        submitted |= every

        def settled() -> list[dict] | None:
            left = pool.jobs("schedd@s", "true", ["ClusterId", "JobStatus"])
            return left if all(j["JobStatus"] == HELD for j in left) else None

        # A deadline for a stall, not a measure of speed.
        left = wait_for("every job of the burst to complete or stay held", settled, timeout=120)
        # The held jobs, and only they, stay: none started behind its hold, nor completed.
        assert {j["ClusterId"] for j in left} & every == held
        done = {j["ClusterId"]: j["JobStatus"] for j in pool.history("schedd@s", "true", ["ClusterId", "JobStatus"])}
        assert {c for c in every if done.get(c) == 4} == every - held - removed
        assert {c for c in every if done.get(c) == REMOVED} == removed
        # Nothing idle is left, so every claim goes back to the startd: none is kept idle.
        wait_for("the startd to hold no claim", lambda: startd_stats(pool)["ClaimsActive"] == 0, timeout=30)
    # Every job ran at most once: a job the startd started on a claim the schedd gave up for lost
    # would be matched and run a second time.
    assert startd_stats(pool)["JobsStarted"] <= len(submitted)
