"""One negotiation cycle's figures; the Negotiator ad carries the last one's."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CycleStats:
    """One cycle's figures (HTCondor's LastNegotiationCycle...0 attributes)."""

    start: float = 0.0
    duration: float = 0.0
    matches: int = 0
    rejections: dict[str, int] = field(default_factory=dict)
    submitters: int = 0
    slots: int = 0
    idle_jobs: int = 0
    requests: int = 0
    rounds: int = 0
    evaluations: int = 0
    schedd_calls: int = 0
    # Where the cycle's time went (parts of duration), by HTCondor's phases: 1 reading the ads from
    # the collector, 2 the accounting (usage, the pie, the matchmaker built over the slots),
    # 3 ordering the submitters and fetching their first request pages, 4 matching, with the
    # wait for the schedds' answers to Match at its end (``answers``).
    fetch: float = 0.0
    accounting: float = 0.0
    first_requests: float = 0.0
    matching: float = 0.0
    answers: float = 0.0

    def lap(self, phase: str, since: float) -> float:
        """Add the time since ``since`` to ``phase``; returns now, the next phase's start."""
        now = time.monotonic()
        setattr(self, phase, getattr(self, phase) + now - since)
        return now

    def ad(self) -> dict[str, Any]:
        """The cycle's attributes in the Negotiator ad."""
        return {
            "LastNegotiationCycleTime0": int(self.start),
            "LastNegotiationCycleDuration0": round(self.duration, 4),
            "LastNegotiationCyclePhase1Duration0": round(self.fetch, 4),
            "LastNegotiationCyclePhase2Duration0": round(self.accounting, 4),
            "LastNegotiationCyclePhase3Duration0": round(self.first_requests, 4),
            "LastNegotiationCyclePhase4Duration0": round(self.matching + self.answers, 4),
            "LastNegotiationCycleMatches0": self.matches,
            "LastNegotiationCycleRejections0": sum(self.rejections.values()),
            "LastNegotiationCycleRejectionReasons0": dict(self.rejections),
            "LastNegotiationCycleActiveSubmitterCount0": self.submitters,
            "LastNegotiationCycleSlots0": self.slots,
            "LastNegotiationCycleNumIdleJobs0": self.idle_jobs,
            "LastNegotiationCycleResourceRequests0": self.requests,
            "LastNegotiationCycleSlotShareIter0": self.rounds,
            "LastNegotiationCycleMatchEvaluations0": self.evaluations,
            "LastNegotiationCycleScheddCalls0": self.schedd_calls,
        }
