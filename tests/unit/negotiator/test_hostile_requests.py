"""A hostile request costs the matchmaker a few evaluations per cycle, not slots x the budget."""

from __future__ import annotations

import asyncio

from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.matchmaker import REJECT_HOSTILE, Matchmaker
from gridbus.agents.negotiator.simulate import (
    SimClient,
    SimSchedd,
    hostile_job_ads,
    job_ads,
    machine_ads,
)


def test_a_request_past_the_evaluation_bound_is_rejected_after_a_few_slots():
    mm = Matchmaker(machine_ads(2_000), strikes=3)
    (hostile,) = hostile_job_ads("mallory", 1, 1)
    found, reason = mm.match(hostile, 10)
    # Every slot is a kind of its own for this Requirements: without the strikes it would be
    # tested on all 2,000 slots at the regular expression's match budget each.
    assert (found, reason) == ([], REJECT_HOSTILE)
    assert mm.evaluations == 3
    assert "evaluation bound on 3 slots" in mm.hostile and "match budget" in mm.hostile
    # The next request starts with a clean allowance and matches.
    found, reason = mm.match(job_ads("alice", 1, 1)[0], 5)
    assert len(found) == 5 and reason is None and mm.hostile is None


def test_a_request_within_each_bound_is_rejected_past_its_time_for_the_cycle():
    mm = Matchmaker(machine_ads(2_000), strikes=3, request_seconds=0.05)
    (slow,) = hostile_job_ads("mallory", 1, 1, pad=14)  # backtracks for a while, within the budget
    found, reason = mm.match(slow, 10)
    assert (found, reason) == ([], REJECT_HOSTILE)
    assert "more than 0.05 s of evaluation" in mm.hostile
    assert mm.evaluations < 2_000


def test_a_hostile_submitter_is_skipped_and_others_match():
    good, bad = SimSchedd("good"), SimSchedd("bad")
    good.jobs["alice"] = job_ads("alice", 3, 10)
    bad.jobs["mallory"] = hostile_job_ads("mallory", 5, 2, first_cluster=100)
    neg = Negotiator("n", "amqp://unused", interval=3600)
    neg._client = SimClient([good, bad])
    stats = asyncio.run(neg.cycle.run(machine_ads(500), good.submitter_ads() + bad.submitter_ads()))
    assert len(good.matched) == 30 and not bad.matched
    # Two hostile requests and mallory is done for the cycle: its other three are not tried.
    assert stats.rejections[REJECT_HOSTILE] == 2 * 2
    assert stats.evaluations <= 30 + 2 * 3 + 10

