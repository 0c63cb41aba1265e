"""Slots handed out in an earlier cycle that their startd has not re-advertised yet.

A match is sent to the schedd, which claims the slot; until the startd's next ad shows the claim,
the collector still shows the slot as it was. Such a slot stays out of later cycles (for at most
NEGOTIATOR_MATCH_HOLD seconds), and a partitionable slot shows what is left after what was carved.
"""

from __future__ import annotations

from typing import Any

from gridbus.adrefs import lowered
from gridbus.agents.negotiator.matchmaker import Slot, get, requested


class PendingMatches:
    def __init__(self, match_hold: float):
        self.match_hold = match_hold
        # claim id -> (UpdateSequenceNumber of the ad matched, when, cpus/memory/disk carved)
        self.claims: dict[str, tuple[Any, float, tuple[float, ...] | None]] = {}
        # claim id -> {accounting name: slot weight matched to it}: usage the collector's ads do
        # not show yet, counted against the name's share and its group's quota.
        self.charged: dict[str, dict[str, float]] = {}

    def hide(
        self, machines: list[dict[str, Any]], lows: list[dict[str, Any]], now: float
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The ads without the slots still pending (the ads, and the same keyed by lower-case
        names)."""
        for old, (_seq, when, _carved) in list(self.claims.items()):
            if now - when > self.match_hold:
                self._forget(old)
        if not self.claims:
            return machines, lows
        out, out_low = [], []
        for m, low in zip(machines, lows, strict=True):
            found = low.get("claimid")
            cid = found if isinstance(found, str) else ""
            pending = self.claims.get(cid) if cid else None
            if pending is None:  # a claimed slot matched to preempt it
                pcid = low.get("preemptingclaimid")
                if isinstance(pcid, str) and pcid in self.claims:
                    cid, pending = pcid, self.claims[pcid]
            if pending is None or low.get("updatesequencenumber") != pending[0]:
                if pending is not None:
                    self._forget(cid)
                out.append(m)
                out_low.append(low)
            elif pending[2] is not None:  # a partitionable slot: take off what was carved
                m = dict(m)
                for attr, amount in zip(("Cpus", "Memory", "Disk"), pending[2], strict=True):
                    value = get(m, attr, 0) or 0
                    m[attr] = value - amount
                out.append(m)
                out_low.append(lowered(m))
        return out, out_low

    def _forget(self, cid: str) -> None:
        del self.claims[cid]
        self.charged.pop(cid, None)

    def usage(self) -> dict[str, float]:
        """Slot weight matched per accounting name on the slots still pending."""
        out: dict[str, float] = {}
        for charges in self.charged.values():
            for name, weight in charges.items():
                out[name] = out.get(name, 0.0) + weight
        return out

    def remember(self, slot: Slot, slot_ad: dict[str, Any], job: dict[str, Any], now: float,
                 charged: str = "", weight: float = 0.0) -> None:
        """A match made on ``slot`` (``slot_ad`` as the matchmaker saw it), of ``weight`` charged
        to the accounting name ``charged``."""
        carved = None
        if slot.partitionable:
            before = self.claims.get(slot.claim_id)
            need = requested(job, slot_ad)
            carved = need if before is None or before[2] is None else tuple(a + b for a, b in zip(before[2], need, strict=True))
        self.claims[slot.claim_id] = (slot.low.get("updatesequencenumber"), now, carved)
        if charged:
            charges = self.charged.setdefault(slot.claim_id, {})
            charges[charged] = charges.get(charged, 0.0) + weight
