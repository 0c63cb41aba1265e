"""Claim leases (docs/protocols.md, "Claiming and running"): ``Alive`` every lease/3 to each
startd for all its claims. Only an explicit "unknown" ends a claim at once; an unanswered startd
loses its claims when the lease runs out, and their jobs go back to Idle to be matched elsewhere.
A startd that restarts knows none of its predecessor's claims: its start event makes the schedd
ask it about ours at once, so their jobs are requeued now rather than at the next round."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gridbus import bus, wire
from gridbus.agents.schedd.claims import CLAIMING, Claim, Claims, Spawn
from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import RUNNING, SUSPENDED, JobStateCalls

log = logging.getLogger("gridbus.schedd.leases")


class Leases:
    def __init__(self, address: str, queue: JobQueue, claims: Claims, state: JobStateCalls, spawn: Spawn,
                 settings: ScheddSettings):
        self.address = address
        self.queue = queue
        self.claims = claims
        self.state = state
        self._spawn = spawn
        self.settings = settings

    async def listen(self, channel: Any) -> str:
        """Hear the startds' start events on ``channel`` (at the schedd's setup); the queue's name."""
        starts = await channel.declare_queue(f"gridbus.starts.{self.address}", exclusive=True,
                                             arguments={"x-max-length": 1000, "x-overflow": "drop-head"})
        await starts.bind(bus.EVENTS, bus.event_key("daemon", "start", "startd"))
        await starts.consume(self._on_daemon_start, no_ack=True)
        return starts.name

    async def _on_daemon_start(self, message: Any) -> None:
        try:
            body = wire.decode(message.body, message.content_type)
        except wire.DecodeError:
            return
        startd = body.get("address") if isinstance(body, dict) else None
        if not isinstance(startd, str) or startd == self.address:
            return
        if any(c.startd == startd and c.state != CLAIMING for c in self.claims.by_id.values()):
            log.info("%s restarted: asking it about our claims now", startd)
            self._spawn(self.check_leases(only=startd), "claims of a restarted startd")

    async def run(self) -> None:
        """Check the leases every lease/3, for ever; at once first if claims were read back at a
        restart: their startds heard nothing from this schedd while it was down, and a lease
        renewed only a round later may run out on the startd meanwhile (its job killed, to run
        again elsewhere)."""
        first = bool(self.claims.by_id)
        while True:
            if not first:
                await asyncio.sleep(max(0.2, self.settings.lease_duration / 3))
            first = False
            try:
                await self.check_leases()
            except Exception:
                log.exception("lease check failed")

    async def check_leases(self, only: str | None = None) -> None:
        """One round of Alive calls (one per startd, or to ``only``), then drop the claims whose
        lease ran out."""
        by_startd: dict[str, list[Claim]] = {}
        for claim in self.claims.by_id.values():
            if claim.state != CLAIMING and only in (None, claim.startd):
                by_startd.setdefault(claim.startd, []).append(claim)
        answers = await asyncio.gather(
            *(self.claims.call_startd(s, "Alive", {"ClaimIds": [c.claim_id for c in cs]}) for s, cs in by_startd.items())
        )
        now = time.monotonic()
        for (_startd, claims), result in zip(by_startd.items(), answers, strict=True):
            if result is None or not result.ok:
                continue
            unknown = set(result.outArgs.get("Unknown", []))
            for claim in claims:
                if claim.claim_id in unknown:
                    await self._claim_lost(claim, "the startd no longer knows the claim")
                else:
                    claim.last_alive = now
        for claim in list(self.claims.by_id.values()):
            if now - claim.last_alive > self.settings.lease_duration:
                await self._claim_lost(claim, f"the claim lease ({self.settings.lease_duration:g} s) ran out")

    async def _claim_lost(self, claim: Claim, why: str) -> None:
        if self.claims.by_id.get(claim.claim_id) is not claim:
            return
        self.claims.stats["ClaimsLost"] += 1
        job = claim.job
        self.claims.drop(claim)
        if job is None:
            return
        self.claims.unreserve(job)
        if self.queue.status(*job) in (RUNNING, SUSPENDED):
            await self.state.job_evicted(job[0], job[1], f"claim on {claim.slot} lost: {why}")

