"""Claim reuse with no round trip of its own: activations in the answer to JobReports
(docs/protocols.md, "Activations in the answer"), each answered by an ``activated`` report."""

from __future__ import annotations

import pytest

from gridbus.agents.startd import CLAIM_BUSY
from gridbus.console import Session
from gridbus.status import Status
from tests.integration.startd.helpers import exit_report, reports_for, startd_and_schedd

pytestmark = pytest.mark.broker


def job(proc: int, **kw) -> dict:
    return {"ClusterId": 3, "ProcId": proc, "GlobalJobId": f"fake#3.{proc}#1", "Owner": "alice", "Cmd": "/bin/true", **kw}


def activated(schedd, claim: str, proc: int) -> list[dict]:
    return [r for r in reports_for(schedd, claim, "activated") if r.get("ProcId") == proc]


def test_jobs_chained_through_answers_repeats_busy_and_failures(amqp_url, tmp_path):
    with startd_and_schedd(amqp_url, tmp_path, num_slots=1) as (startd, _t, schedd), Session(amqp_url, timeout=10) as s:
        slot = next(iter(startd.table.slots.values()))
        r = s.call(startd.address, "RequestClaim", {"ClaimId": slot.claim_id, "JobAd": {"Owner": "alice"},
                                                    "Schedd": schedd.address, "LeaseDuration": 60})
        assert r.status == 0 and r.ReportActivations is True, r.text
        claim = r.ClaimId
        # Jobs 1 and 2 ride in the answers to the exit reports of 0 and 1; job 3 cannot start.
        schedd.answer_after.update({
            (claim, "exit", 0): [{"ClaimId": claim, "JobAd": job(1)}],
            (claim, "exit", 1): [{"ClaimId": claim, "JobAd": job(2, Arguments="-c 'exit 4'", Cmd="/bin/sh")}],
            (claim, "exit", 2): [{"ClaimId": claim, "JobAd": job(3, Cmd="/no/such")}],
        })
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job(0)}).status == 0
        ex = exit_report(schedd, claim, 4)
        assert (ex["ProcId"], ex["HoldReasonCode"]) == (3, 6) and "/no/such" in ex["HoldReason"]
        assert [exit_report(schedd, claim, n)["ProcId"] for n in (1, 2, 3)] == [0, 1, 2]
        assert exit_report(schedd, claim, 3)["ExitCode"] == 4
        for proc in (1, 2, 3):
            schedd.wait_for(lambda sc, p=proc: activated(sc, claim, p))  # may come in the call after the exit
            assert [(a["Status"], a["Text"]) for a in activated(schedd, claim, proc)] == [(0, "OK")], proc
        assert [r["ProcId"] for r in reports_for(schedd, claim, "execute")] == [0, 1, 2]

        # While a job runs: a repeat of it is answered OK (its first answer may have been lost),
        # another job is busy, a claim the startd does not know is ignored, not reported.
        sleeper = job(4, Cmd="/bin/sleep", Arguments="30")
        schedd.answer_after.update({
            (claim, "exit", 5): [{"ClaimId": claim, "JobAd": sleeper}],
            (claim, "activated", 4): [{"ClaimId": claim, "JobAd": sleeper}, {"ClaimId": claim, "JobAd": job(6)},
                                      {"ClaimId": "forged", "JobAd": job(7)}, {"JobAd": job(8)}, "junk"],
        })
        s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job(5)})
        schedd.wait_for(lambda sc: len(activated(sc, claim, 4)) == 2 and activated(sc, claim, 6))
        assert [a["Status"] for a in activated(schedd, claim, 4)] == [0, 0]
        assert activated(schedd, claim, 6)[0]["Status"] == Status.USER + CLAIM_BUSY
        assert len(reports_for(schedd, claim, "execute")) == 5  # the repeat did not start job 4 again
        assert not [r for r in schedd.reports if r.get("ProcId") in (7, 8)]
        assert s.call(startd.address, "DeactivateClaim", {"ClaimId": claim, "Graceful": False}).status == 0
        assert exit_report(schedd, claim, 6)["EvictReason"] == "deactivate"


def test_jobs_queued_ahead_run_back_to_back_and_a_withdrawn_one_never_runs(amqp_url, tmp_path):
    """Jobs queued ahead in a JobReports answer (CLAIM_PREFETCH_JOBS) start as the claim's job
    exits, each reported activated (Ahead) right behind that exit; WithdrawActivation over the bus
    takes one back before its turn, and a ReleaseClaim drops the rest."""
    with startd_and_schedd(amqp_url, tmp_path, num_slots=1) as (startd, _t, schedd), Session(amqp_url, timeout=10) as s:
        slot = next(iter(startd.table.slots.values()))
        r = s.call(startd.address, "RequestClaim", {"ClaimId": slot.claim_id, "JobAd": {"Owner": "alice"},
                                                    "Schedd": schedd.address, "LeaseDuration": 60})
        claim = r.ClaimId
        sleeper = job(11, Cmd="/bin/sleep", Arguments="30")
        schedd.ahead_after[(claim, "execute", 10)] = [
            {"ClaimId": claim, "Seq": 1, "JobAd": sleeper}, {"ClaimId": claim, "Seq": 2, "JobAd": job(12)},
            {"ClaimId": claim, "Seq": 3, "JobAd": job(13)}]
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job(10, Cmd="/bin/sleep",
                                                                                     Arguments="1")}).status == 0
        schedd.wait_for(lambda sc: reports_for(sc, claim, "execute") and any(
            rep.get("AheadSeq") == 3 for rep in sc.reports))  # the answer with the queue was taken
        w = s.call(startd.address, "WithdrawActivation", {"ClaimId": claim, "ClusterId": 3, "ProcId": 12})
        assert w.status == 0 and w.Withdrawn is True, w.text
        # Job 10 exits; 11 (a sleep) starts behind it at once.
        schedd.wait_for(lambda sc: activated(sc, claim, 11))
        order = [(rep["Event"], rep["ProcId"]) for rep in schedd.reports if rep["Event"] in ("exit", "activated")]
        assert order == [("exit", 10), ("activated", 11)]
        assert activated(schedd, claim, 11)[0].get("Ahead") is True
        assert s.call(startd.address, "ReleaseClaim", {"ClaimId": claim}).status == 0
        ex = exit_report(schedd, claim, 2)
        assert ex["ProcId"] == 11 and ex.get("ClaimEnded") is True
        # Neither the withdrawn job nor the one queued behind it ran.
        assert [rep["ProcId"] for rep in reports_for(schedd, claim, "execute")] == [10, 11]
        assert not [rep for rep in schedd.reports if rep.get("ProcId") in (12, 13)]
