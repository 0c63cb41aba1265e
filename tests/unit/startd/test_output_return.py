"""A job whose sandbox travels reports its exit only once its output is back (agents/startd/
sandbox.py, through the activation): what becomes of that report when the claim ends meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gridbus.agents.startd import slots as sl
from tests.unit.startd.test_claims_without_broker import (
    DAEMON,
    SCHEDD,
    Schedd,
    job,
    settled,
    startd,
)


def test_an_exit_whose_claim_ended_while_its_output_went_back_says_so_and_leaves_the_freed_slot_alone(tmp_path, monkeypatch):
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    returning: list[tuple[dict[str, Any], Callable[[dict[str, Any]], None]]] = []
    # The job's output is on its way back (as for a transferred sandbox): the report waits for it.
    monkeypatch.setattr(s.sandboxes, "holds", lambda claim_id: True)
    monkeypatch.setattr(s.sandboxes, "return_output", lambda claim, job, extra, report: returning.append((extra, report)))

    async def scenario() -> tuple[list[dict[str, Any]], sl.Slot]:
        await s.on_start()
        try:
            ad = s.private_ads()[0]
            out = await s.claims.RequestClaim(DAEMON, ClaimId=ad["ClaimId"], JobAd=job(0), Schedd=SCHEDD, LeaseDuration=60)
            claim = s.claims.by_id[out["ClaimId"]]
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claim.id, "JobAd": job(0, Arguments="0.01")}])
            await settled(lambda: returning)  # the job exited; its output goes back
            await s.claims.ReleaseClaim(DAEMON, ClaimId=claim.id)  # the schedd lets the claim go meanwhile
            assert claim.id not in s.claims.by_id and claim.slot.state == sl.UNCLAIMED
            extra, report = returning[0]
            report(extra)  # the output is back
            exits = await settled(lambda: [r for r in schedd.reports if r["Event"] == "exit"])
            return exits, claim.slot
        finally:
            await s.on_stop()

    (exit_report,), slot = asyncio.run(scenario())
    assert exit_report["ProcId"] == 0 and exit_report["ClaimEnded"] is True  # the schedd reuses it for nothing
    assert (slot.state, slot.activity) == (sl.UNCLAIMED, sl.IDLE)
