"""A negotiation cycle full of hostile requests runs off the negotiator's event loop: its calls
are answered meanwhile, and the other submitters' jobs still match."""

from __future__ import annotations

import asyncio
import time

from gridbus.agent.threaded import AgentThread
from gridbus.agents.negotiator import Negotiator as NegotiatorAgent
from gridbus.agents.negotiator.matchmaker import REJECT_HOSTILE
from gridbus.agents.negotiator.simulate import (
    SimClient,
    SimSchedd,
    hostile_job_ads,
    job_ads,
    machine_ads,
)
from gridbus.console import Session


def test_the_negotiator_answers_during_a_hostile_cycle(amqp_url, tmp_path):
    good, bad = SimSchedd("good"), SimSchedd("bad")
    good.jobs["alice"] = job_ads("alice", 3, 10)
    bad.jobs["mallory"] = hostile_job_ads("mallory", 2, 2, first_cluster=100)
    # An allowance of 25 evaluations past the match budget per request: about 1.3 s of
    # evaluation for each of mallory's two requests, which would block the event loop that long.
    agent = NegotiatorAgent("n-hostile", amqp_url, spool=tmp_path, interval=3600, match_strikes=25)
    with AgentThread(agent) as t, Session(amqp_url, timeout=10) as s:
        assert s.call("negotiator@n-hostile", "GetPriorities").status == 0  # connected, warm
        agent._client = SimClient([good, bad], fallback=agent._client)  # the schedds, in process
        ads = good.submitter_ads() + bad.submitter_ads()
        cycle = asyncio.run_coroutine_threadsafe(agent.cycle.run(machine_ads(2_000), ads), t.loop)
        answered, lags = 0, []
        while not cycle.done():
            assert s.call("negotiator@n-hostile", "GetPriorities").status == 0
            answered += 1
            # How long the negotiator's event loop takes to run a callback of ours: what matching
            # on the loop would stretch. (Timed apart from the calls, whose round trips through the
            # broker also stretch whenever the broker is slow, as under a full test suite's load.)
            started = time.perf_counter()
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), t.loop).result(30)
            lags.append(time.perf_counter() - started)
        stats = cycle.result(0)
    assert answered >= 10, f"the cycle took {stats.duration:.2f} s, too short to call during it"
    # Typically a few milliseconds; matching on the event loop would make one lag as long as a
    # hostile request's evaluation, about half the cycle. Judged against the cycle's own length, so
    # a loaded machine, which stretches both alike, does not fail it.
    assert max(lags) < max(0.5, stats.duration / 4), (sorted(lags)[-5:], stats.duration)
    assert len(good.matched) == 30 and not bad.matched
    assert stats.rejections[REJECT_HOSTILE] == 2 * 2
