"""Drain through the console's Startd, and claim leases under a paused schedd (HTCondor ticket #2563)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.agents.startd import CLAIM_REFUSED, Startd
from gridbus.console import Session
from gridbus.console.startd import DrainType
from gridbus.console.startd import Startd as StartdClient
from gridbus.rpc import CallFailed
from gridbus.status import Status
from tests.integration.startd.helpers import exit_report, settings, startd_and_schedd, wait_until

pytestmark = pytest.mark.broker

REPO = Path(__file__).resolve().parents[3]


def test_graceful_drain_lets_the_running_job_finish_and_takes_no_new_claim(amqp_url, tmp_path):
    with startd_and_schedd(amqp_url, tmp_path, num_slots=2) as (startd, _t, schedd), Session(amqp_url, timeout=10) as s:
        slot1, slot2 = startd.table.slots.values()
        other_id = slot2.claim_id
        r = s.call(startd.address, "RequestClaim", {"ClaimId": slot1.claim_id, "JobAd": {"Owner": "alice"},
                                                    "Schedd": schedd.address})
        claim = r.ClaimId
        job = {"ClusterId": 3, "ProcId": 0, "Cmd": "/bin/sh", "Arguments": "-c 'sleep 1; exit 4'"}
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job}).status == 0
        client = StartdClient(startd.address, session=s)
        request_id = client.drainJobs(how_fast="graceful", reason="maintenance")
        assert request_id and client.status()["Draining"] is True
        with pytest.raises(CallFailed, match="already draining"):
            client.drainJobs(drain_type=DrainType.Quick)
        by_name = {a["Name"]: a for a in client.slots()}
        assert by_name[slot1.name]["Activity"] == "Retiring" and by_name[slot2.name]["State"] == "Drained"
        assert by_name[slot1.name]["DrainReason"] == "maintenance"
        r = s.call(startd.address, "RequestClaim", {"ClaimId": other_id, "JobAd": {}, "Schedd": schedd.address})
        assert r.status == Status.USER + CLAIM_REFUSED and "draining" in r.text
        assert claim in startd.claims.by_id and startd.starter.running  # the job still runs

        ex = exit_report(schedd, claim)
        assert ex["ExitCode"] == 4 and ex["ClaimEnded"] is True and "Evicted" not in ex
        wait_until(lambda: not startd.claims.by_id, what="the retired claim ended")
        states = {(a["State"], a["Activity"]) for a in client.slots()}
        assert states == {("Drained", "Idle")}
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job}).status == Status.FORBIDDEN
        with pytest.raises(CallFailed, match="not"):
            client.cancelDrainJobs("wrong-id")
        client.cancelDrainJobs(request_id)
        assert {(a["State"], a["Activity"]) for a in client.slots()} == {("Unclaimed", "Idle")}
        assert s.call(startd.address, "RequestClaim", {"ClaimId": other_id, "JobAd": {}, "Schedd": schedd.address}).status == 0
        # quick drain vacates a running job now
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": other_id, "JobAd": {**job, "ProcId": 1, "Arguments": "-c 'sleep 60'"}}).status == 0
        wait_until(lambda: startd.starter.running, what="the job started")
        client.drainJobs(how_fast="quick", on_completion="resume")
        ex = exit_report(schedd, other_id)
        assert ex["Evicted"] is True and ex["EvictReason"] == "drain" and ex["ExitSignal"] == signal.SIGTERM
        wait_until(lambda: client.status()["Draining"] is False, what="resumed after the drain")


def start_fake_schedd(amqp_url: str, name: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.integration.startd.fakeschedd", "--url", amqp_url, "--name", name],
                            cwd=REPO, env=env)


def schedd_state(s: Session, address: str, timeout: float = 2.0):
    return s.call(address, "State", {}, timeout=timeout)


def test_leases_survive_a_short_outage_and_end_cleanly_after_a_long_one(amqp_url, tmp_path):
    lease = 4
    startd = Startd("l1", amqp_url, settings=settings(tmp_path, num_slots=2, report_timeout=0.5, report_retry=0.3),
                    update_interval=1)
    proc = start_fake_schedd(amqp_url, "paused")
    address = "schedd@paused"
    try:
        with AgentThread(startd), Session(amqp_url, timeout=10) as s:
            wait_until(lambda: _answers(s, address), what="the test schedd answering")
            slot1, slot2 = startd.table.slots.values()

            # 1. cut for less than the lease: the job survives and its result arrives afterwards
            job = {"ClusterId": 1, "ProcId": 0, "Cmd": "/bin/sh", "Arguments": "-c 'sleep 0.7; exit 9'"}
            claim = s.call(address, "Run", {"Startd": startd.address, "ClaimId": slot1.claim_id, "JobAd": job,
                                            "Lease": lease}).ClaimId
            assert claim in startd.claims.by_id, claim
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: claim not in startd.starter.running, timeout=5, what="the job's exit")
                failed = startd.reporter.failures
                wait_until(lambda: startd.reporter.failures > failed, timeout=5, what="an unanswered exit report")
                assert claim in startd.claims.by_id  # exited and unreported, the claim kept
                time.sleep(lease * 0.4)  # the outage itself: shorter than the lease, by design
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            exits = wait_until(lambda: [r for r in schedd_state(s, address).Reports
                                        if r["ClaimId"] == claim and r["Event"] == "exit"], what="the exit report")
            assert exits[0]["ExitCode"] == 9
            assert claim in startd.claims.by_id
            state = schedd_state(s, address)
            assert claim in state.Held and claim not in state.Dropped

            # 2. cut for longer than the lease: the claim ends on both sides, the job is killed
            job2 = {"ClusterId": 2, "ProcId": 0, "Cmd": "/bin/sleep", "Arguments": "60"}
            claim2 = s.call(address, "Run", {"Startd": startd.address, "ClaimId": slot2.claim_id, "JobAd": job2,
                                             "Lease": lease}).ClaimId
            wait_until(lambda: claim2 in startd.starter.running, what="the second job running")
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: claim2 not in startd.claims.by_id and claim not in startd.claims.by_id, timeout=lease + 5,
                           what="the startd ending both claims after the lease")
                assert not startd.starter.running and slot2.state == "Unclaimed"
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            state = wait_until(lambda: (st := schedd_state(s, address)) and not st.Held and st, timeout=lease + 5,
                               what="the schedd dropping its claims")
            assert state.Dropped[claim2] == "unknown to the startd" and state.Dropped[claim] == "unknown to the startd"
    finally:
        proc.terminate()
        proc.wait(10)


def _answers(s: Session, address: str) -> bool:
    try:
        return schedd_state(s, address, timeout=0.5).status == 0
    except TimeoutError:
        return False
