"""A preempting RequestClaim (the claimed slot's advertised preempting claim id): refused for a job
the slot's RANK likes less than the one it runs, and while the running job retires
(MaxJobRetirementTime); otherwise the running job is vacated (reported evicted) and the slot is
claimed anew."""

from __future__ import annotations

import asyncio

import pytest

from gridbus.status import MethodError
from tests.unit.startd.test_claims_without_broker import (
    DAEMON,
    SCHEDD,
    Schedd,
    claim_all,
    job,
    settled,
    startd,
)


def test_a_preempting_claim_waits_for_retirement_then_vacates(tmp_path):
    reports = Schedd()
    s = startd(tmp_path, reports, rank='TARGET.Owner == "carol" ? 10 : 0', max_job_retirement_time="60")

    async def scenario() -> None:
        await s.on_start()
        try:
            claims = await claim_all(s)
            running = job(0, MaxJobRetirementTime=2)  # shorter than the startd's 60: it counts
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claims[0], "JobAd": running}])
            await settled(lambda: s.starter.running)
            slot = next(sl for sl in s.table.slots.values() if sl.claim is not None and sl.claim.id == claims[0])
            ad = s.slot_ads.slot_ad(slot)
            assert (ad["MaxJobRetirementTime"], ad["CurrentRank"]) == (2.0, 0.0)
            private = {a["Name"]: a for a in s.slot_ads.private_ads()}[slot.name]
            preempting = private["PreemptingClaimId"]
            assert private["ClaimId"] == claims[0] and preempting not in claims
            bob = job(5, Owner="bob", GlobalJobId="s2#1.0#1")
            with pytest.raises(MethodError, match="retiring"):
                await s.claims.RequestClaim(DAEMON, ClaimId=preempting, JobAd=bob, Schedd="schedd@s2", LeaseDuration=60)
            slot.claim.job.started -= 3  # its retirement is over
            out = await s.claims.RequestClaim(DAEMON, ClaimId=preempting, JobAd=bob, Schedd="schedd@s2",
                                              LeaseDuration=60)
            assert out["ClaimId"] == preempting and slot.claim.schedd == "schedd@s2"
            await settled(lambda: any(r.get("Evicted") for r in reports.reports))
            evicted = [r for r in reports.reports if r.get("Evicted")]
            assert evicted[0]["EvictReason"] == "preempted" and evicted[0]["ClaimId"] == claims[0]
        finally:
            await s.on_stop()

    asyncio.run(scenario())


def test_the_slots_rank_keeps_the_job_it_prefers(tmp_path):
    s = startd(tmp_path, rank='TARGET.Owner == "carol" ? 10 : 0')

    async def scenario() -> None:
        await s.on_start()
        try:
            claims = await claim_all(s)
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claims[0], "JobAd": job(0, Owner="carol")}])
            await settled(lambda: s.starter.running)
            slot = next(sl for sl in s.table.slots.values() if sl.claim is not None and sl.claim.id == claims[0])
            with pytest.raises(MethodError, match="RANK prefers"):
                await s.claims.RequestClaim(DAEMON, ClaimId=slot.preempting_id, JobAd=job(5, Owner="bob"), Schedd=SCHEDD,
                                            LeaseDuration=60)
            assert slot.claim.id == claims[0] and s.starter.running
        finally:
            await s.on_stop()

    asyncio.run(scenario())
