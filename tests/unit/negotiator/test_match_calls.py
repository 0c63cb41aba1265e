"""The negotiator's Match calls: a large cycle's matches are split so each call stays small."""

from __future__ import annotations

import asyncio

from gridbus.agents.negotiator import cycle
from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.simulate import SimClient, SimSchedd, job_ads, machine_ads


def test_many_matches_travel_in_several_match_calls(monkeypatch):
    monkeypatch.setattr(cycle, "MATCHES_PER_CALL", 7)
    schedd = SimSchedd("s")
    schedd.jobs["alice"] = job_ads("alice", 1, 30)
    neg = Negotiator("n", "amqp://unused", interval=3600)
    neg._client = SimClient([schedd])
    stats = asyncio.run(neg.cycle.run(machine_ads(30, kinds=1), schedd.submitter_ads()))
    assert stats.matches == 30 and schedd.calls["Match"] == 5  # 7 + 7 + 7 + 7 + 2
