"""The negotiator's locate of its collector: a broadcast nobody heard (a pool started all at once,
the collector's queue not bound yet) is asked again soon, not after one long wait."""

from __future__ import annotations

import asyncio
import time

import pytest

from gridbus.agents.negotiator import collector_ads
from gridbus.agents.negotiator.agent import Negotiator
from gridbus.rpc import CallTimeout, MethodResult


class LateCollector:
    """A client whose class.collector broadcasts go unheard until ``up_after`` seconds after the
    first one, when the collector comes up: a locate waiting past then is answered then. (Counted
    from the first call, not from the client's making: a loaded machine's start of the event loop
    must not move the collector's start ahead of the negotiator's first ask.)"""

    def __init__(self, up_after: float):
        self.up_after = up_after
        self.up_at: float | None = None
        self.waits: list[float] = []

    async def get_objects(self, routing_key: str, class_name: str | None, filters=None, timeout: float = 5.0):
        assert routing_key == "class.collector"
        self.waits.append(timeout)
        now = time.monotonic()
        if self.up_at is None:
            self.up_at = now + self.up_after
        if now + timeout < self.up_at:
            await asyncio.sleep(timeout)
            raise CallTimeout(routing_key, "getObjects", timeout)
        await asyncio.sleep(max(0.0, self.up_at - now))
        return MethodResult(0, "OK", {"objects": [{"agent": "collector@c"}]})


def test_a_collector_up_just_after_the_first_locate_is_found_within_a_second(monkeypatch):
    monkeypatch.setattr(collector_ads, "LOCATE_TIMEOUTS", (0.05, 0.1, 0.2, 0.4))
    client = LateCollector(up_after=0.08)
    neg = Negotiator("n", "amqp://unused", interval=3600)
    neg._client = client
    assert asyncio.run(neg.collector.address()) == "collector@c"
    assert client.waits == [0.05, 0.1]  # found by the second try, not after one wait of 0.4 s


def test_no_collector_at_all_is_a_timeout_after_every_try(monkeypatch):
    monkeypatch.setattr(collector_ads, "LOCATE_TIMEOUTS", (0.01, 0.02))
    client = LateCollector(up_after=3600)
    neg = Negotiator("n", "amqp://unused", interval=3600)
    neg._client = client
    with pytest.raises(CallTimeout):
        asyncio.run(neg.collector.address())
    assert client.waits == [0.01, 0.02]
