"""Preemption in a real pool (10 slots of the scale-test startd, whose jobs are timers): a better
priority takes slots back within two negotiation cycles where PREEMPTION_REQUIREMENTS allows, after
the startd's MaxJobRetirementTime and not a second before; the evicted jobs run again to completion,
each once at a time; and HTCondor's default policy does not preempt a claim an hour young."""

from __future__ import annotations

import re
import time

import pytest
from htcondor2 import JobEventLog, JobEventType

from gridbus.console import Negotiator
from tests.e2e.pool import wait_for

SLOTS = 10
RETIREMENT = 3
SIM_STARTD = {"GRIDBUS_STARTD_SIMULATE_JOBS": "true", "GRIDBUS_NUM_CPUS": str(SLOTS),
              "GRIDBUS_NUM_SLOTS": str(SLOTS), "GRIDBUS_MEMORY": str(SLOTS * 64),
              "GRIDBUS_MAXJOBRETIREMENTTIME": str(RETIREMENT)}
ALLOW = {"GRIDBUS_PREEMPTION_REQUIREMENTS": "RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2"}
_CYCLE = re.compile(r"^(\S+ \S+),\d+ \S+ INFO cycle \d+: (\d+) matches, \d+ slots, (\d+) submitters", re.M)


def pool_full_of_bob(make_pool, tmp_path, negotiator_env: dict[str, str], bob_seconds: int):
    p = make_pool()
    p.start("collector", "c")
    p.start("schedd", "s1")
    p.start("startd", "sim", **SIM_STARTD)
    p.start("negotiator", "n", **negotiator_env)
    p.wait_serving("collector@c", "schedd@s1", "negotiator@n")
    p.wait_slots(SLOTS)
    with Negotiator(p.url, name="n") as neg:
        neg.setFactor("bob", 100)  # bob's priority: 100 times worse than alice's
    log = tmp_path / "bob.log"
    bob = p.submit("schedd@s1", SLOTS, owner="bob", cmd="/nonexistent/sleep", args=str(bob_seconds), log=log)
    wait_for("bob's jobs on every slot", lambda: len(p.jobs("schedd@s1", "JobStatus == 2", ["ProcId"])) == SLOTS,
             timeout=30)
    return p, bob, log


def cycles(p) -> list[tuple[float, int, int]]:
    """(when it ended, matches, submitters) of each negotiation cycle in the NegotiatorLog."""
    text = (p.local_dir("negotiator@n") / "log" / "NegotiatorLog").read_text()
    return [(time.mktime(time.strptime(m[1], "%Y-%m-%d %H:%M:%S")), int(m[2]), int(m[3])) for m in _CYCLE.finditer(text)]


def running_once(p) -> bool:
    """Every running job on one slot only (never twice at once)."""
    ids = [m.get("JobId") for m in p.ads("Machine") if m.get("JobId")]
    assert len(ids) == len(set(ids)), ids
    return True


@pytest.mark.e2e
def test_a_better_priority_preempts_after_retirement_and_the_evicted_jobs_run_again(make_pool, tmp_path):
    p, bob, bob_log = pool_full_of_bob(make_pool, tmp_path, ALLOW, bob_seconds=6)
    seen = len(cycles(p))
    alice = p.submit("schedd@s1", 4, owner="alice", cmd="/nonexistent/sleep", args="2")
    wait_for("alice's jobs running", lambda: running_once(p) and len(
        p.jobs("schedd@s1", f"ClusterId == {alice} && JobStatus == 2", ["ProcId"])) == 4, timeout=30)
    events = list(JobEventLog(str(bob_log)).events(0))
    started: dict[tuple[int, int], int] = {}
    for e in events:
        if e.type == JobEventType.EXECUTE:
            started.setdefault((e.cluster, e.proc), e.timestamp)  # the run that was evicted
    evicted = [e for e in events if e.type == JobEventType.JOB_EVICTED]
    assert len(evicted) == 4, evicted
    for e in evicted:  # retirement honoured to the second (the log's timestamps are whole seconds)
        ran = e.timestamp - started[(e.cluster, e.proc)]
        assert RETIREMENT <= ran + 1 and ran <= RETIREMENT + 4, (ran, e)
    # Preempted within two cycles of the first that could (one that began with a bob's job's
    # retirement surely over): at most one such cycle ended before the one that matched alice.
    free_at = min(started[(e.cluster, e.proc)] for e in evicted) + RETIREMENT + 1
    later = cycles(p)[seen:]
    matched_at = next(when for when, matches, _s in later if matches > 0)
    assert sum(1 for when, _m, _s in later if free_at <= when < matched_at) <= 1, (free_at, later)

    # Every job runs to completion, the evicted ones again, none lost, none twice at once.
    wait_for("every job done", lambda: running_once(p) and not p.jobs("schedd@s1", "true", ["ProcId"]), timeout=60)
    done = p.history("schedd@s1", "true", ["ClusterId", "ProcId", "JobStatus", "ExitCode"])
    assert sorted((j["ClusterId"], j["ProcId"]) for j in done) == sorted(
        [(bob, i) for i in range(SLOTS)] + [(alice, i) for i in range(4)])
    assert all(j["JobStatus"] == 4 and j["ExitCode"] == 0 for j in done)


@pytest.mark.e2e
def test_htcondors_default_policy_does_not_preempt_a_young_claim(make_pool, tmp_path):
    p, _bob, bob_log = pool_full_of_bob(make_pool, tmp_path, {}, bob_seconds=3600)
    seen = len(cycles(p))
    alice = p.submit("schedd@s1", 4, owner="alice", cmd="/nonexistent/sleep", args="2")
    wait_for("three cycles that saw alice", lambda: sum(1 for *_x, subs in cycles(p)[seen:] if subs > 0) >= 3,
             timeout=30)
    assert not p.jobs("schedd@s1", f"ClusterId == {alice} && JobStatus == 2", ["ProcId"])
    assert not [e for e in JobEventLog(str(bob_log)).events(0) if e.type == JobEventType.JOB_EVICTED]
