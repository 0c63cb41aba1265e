"""Races between the shadows' activations and the job queue, made deterministic with a startd
stand-in whose answers the test releases: a claim the schedd no longer needs for its job goes to
the owner's next job or back to the startd (never left idle), a job held meanwhile never comes
back as Running, and an unanswered call is retried within the lease rather than taken for a
refusal (only an explicit "claim unknown" ends a claim)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from gridbus.agents.schedd.claims import ACTIVATING, IDLE, RUNNING_JOB
from gridbus.rpc import CallTimeout, MethodResult
from tests.unit.schedd.test_activations_in_answers import (
    RUNNING,
    Shadows,
    report,
    running_claim,
    until,
)

HELD = 5
SLOT_AD = {"Name": "slot1@a", "Requirements": True}


class GatedStartd(Shadows):
    """The shadows over a startd stand-in: a method listed in ``gates`` answers only once the test
    sets its event; one listed in ``unanswered`` times out that many times first."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[str, asyncio.Event] = {}
        self.unanswered: dict[str, int] = {}

    async def _call(self, address: str, method: str, args: dict, timeout: float) -> MethodResult:
        self.calls.append((address, method, args))
        if self.unanswered.get(method, 0) > 0:
            self.unanswered[method] -= 1
            await asyncio.sleep(timeout)
            raise CallTimeout(address, method, timeout)
        if method in self.gates:
            await self.gates[method].wait()
        if method == "RequestClaim":
            return MethodResult(0, "OK", {"ClaimId": args["ClaimId"], "Slot": "slot1@a", "SlotAd": SLOT_AD})
        if method == "ActivateClaims":
            return MethodResult(0, "OK", {"Results": [{"ClaimId": a["ClaimId"], "Status": 0, "Text": "OK"}
                                                      for a in args["Activations"]]})
        return MethodResult(0, "OK", {})

    def sent(self, method: str) -> list[dict]:
        return [args for _addr, m, args in self.calls if m == method]


async def match_one(s: GatedStartd) -> None:
    """One negotiation: the owner's requests, then one match of slot1@a (claim id c1)."""
    call = SimpleNamespace(user="negotiator")
    out = await s.GetResourceRequests(call, Owner="alice", Limit=10, After=-1, AutoClusterAttrs=[], WholeAds=True)
    acid = out["Requests"][0]["AutoClusterId"]
    answer = await s.Match(call, Matches=[{"AutoClusterId": acid, "ClaimId": "c1", "Slot": "slot1@a",
                                           "Startd": "startd@a", "SlotAd": SLOT_AD}])
    assert answer == {"Accepted": 1}


def test_a_job_held_while_its_claim_is_requested_passes_the_claim_to_the_next_job():
    async def main() -> None:
        s = GatedStartd()
        s.gates["RequestClaim"] = asyncio.Event()
        await match_one(s)
        await until(lambda: s.sent("RequestClaim"))
        assert s.sent("RequestClaim")[0]["JobAd"]["ProcId"] == 0
        s.jobs[(1, 0)]["JobStatus"] = HELD  # condor_hold of the matched job, still Idle until now
        s.gates["RequestClaim"].set()
        await until(lambda: s.jobs[(1, 1)]["JobStatus"] == RUNNING)
        assert s._claims["c1"].job == (1, 1) and s._claims["c1"].state == RUNNING_JOB
        assert s.jobs[(1, 0)]["JobStatus"] == HELD and (1, 0) not in s._reserved
        assert [a["JobAd"]["ProcId"] for b in s.sent("ActivateClaims") for a in b["Activations"]] == [1]

    asyncio.run(main())


def test_a_job_removed_while_its_claim_is_requested_releases_a_claim_nobody_needs():
    async def main() -> None:
        s = GatedStartd()
        for p in (1, 2, 3):
            del s.jobs[(1, p)]
        s.gates["RequestClaim"] = asyncio.Event()
        await match_one(s)
        await until(lambda: s.sent("RequestClaim"))
        del s.jobs[(1, 0)]  # condor_rm of the matched job: it leaves the queue at once
        s.gates["RequestClaim"].set()
        await until(lambda: s.sent("ReleaseClaim"))
        assert s.sent("ReleaseClaim") == [{"ClaimId": "c1"}]
        assert "c1" not in s._claims and not s._reserved and not s.sent("ActivateClaims")

    asyncio.run(main())


def test_a_job_held_while_its_activation_is_answered_stays_held_and_its_claim_goes_on():
    async def main() -> None:
        s = GatedStartd()
        claim, call = running_claim(s)
        claim.in_reports = False  # the next job goes by ActivateClaims
        s.gates["ActivateClaims"] = asyncio.Event()
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        await until(lambda: s.sent("ActivateClaims"))
        assert (claim.state, claim.job) == (ACTIVATING, (1, 1))
        s.jobs[(1, 1)]["JobStatus"] = HELD  # held while the startd starts it
        s.gates["ActivateClaims"].set()
        # The startd runs the job: the schedd stops it and keeps the hold (never Running again).
        await until(lambda: s.sent("DeactivateClaim"))
        assert s.jobs[(1, 1)]["JobStatus"] == HELD and (1, 1) not in s._reserved
        # The job is named: one that exited meanwhile leaves the next job, started behind it, alone.
        assert s.sent("DeactivateClaim") == [{"ClaimId": "c1", "Graceful": True, "ClusterId": 1, "ProcId": 1}]
        # The job's exit frees the claim for the next idle job, and is no completion.
        await s.JobReports(call, Reports=[report("exit", 1, ExitCode=0)])
        assert s.exits == [(1, 0)] and s.jobs[(1, 1)]["JobStatus"] == HELD
        await until(lambda: s.jobs[(1, 2)]["JobStatus"] == RUNNING)
        assert claim.job == (1, 2)

    asyncio.run(main())


def test_a_job_held_before_its_activation_goes_out_passes_the_claim_on():
    async def main() -> None:
        s = GatedStartd()
        claim, call = running_claim(s)
        claim.in_reports = False
        s.gates["ActivateClaims"] = asyncio.Event()
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        # Held in the same loop turn, before the batch of activations leaves.
        s.jobs[(1, 1)]["JobStatus"] = HELD
        s.gates["ActivateClaims"].set()
        await until(lambda: s.jobs[(1, 2)]["JobStatus"] == RUNNING)
        assert claim.job == (1, 2) and s.jobs[(1, 1)]["JobStatus"] == HELD
        assert [a["JobAd"]["ProcId"] for b in s.sent("ActivateClaims") for a in b["Activations"]] == [2]

    asyncio.run(main())


def test_an_unanswered_activation_is_retried_and_the_claim_kept():
    async def main() -> None:
        s = GatedStartd()
        claim, call = running_claim(s)
        claim.in_reports = False
        s.unanswered["ActivateClaims"] = 2
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        await until(lambda: s.jobs[(1, 1)]["JobStatus"] == RUNNING)
        assert s._claims.get("c1") is claim and claim.job == (1, 1)
        # Asked again, and marked as a repeat: the startd may have run the job already.
        assert [(a["JobAd"]["ProcId"], a.get("Repeat")) for b in s.sent("ActivateClaims")
                for a in b["Activations"]] == [(1, None), (1, True), (1, True)]
        assert not s.sent("ReleaseClaim") and s.shadow_stats["ClaimsLost"] == 0

    asyncio.run(main())


def test_an_activation_unanswered_for_a_whole_lease_loses_the_claim_and_the_job_goes_back():
    async def main() -> None:
        s = GatedStartd()
        s.settings.lease_duration = 0.3
        claim, call = running_claim(s)
        claim.in_reports = False
        s.unanswered["ActivateClaims"] = s.unanswered["Alive"] = 10**6
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        await until(lambda: len(s.sent("ActivateClaims")) >= 2)
        await asyncio.sleep(s.settings.lease_duration)
        await s.check_leases()  # the startd is silent: its claims' lease runs out
        assert "c1" not in s._claims and claim.state in (ACTIVATING, IDLE)
        assert s.jobs[(1, 1)]["JobStatus"] == 1 and (1, 1) not in s._reserved and (1, 1) not in s._by_job
        sent = len(s.sent("ActivateClaims"))
        await asyncio.sleep(0.2)
        assert len(s.sent("ActivateClaims")) <= sent + 1  # no more retries for a lost claim

    asyncio.run(main())
