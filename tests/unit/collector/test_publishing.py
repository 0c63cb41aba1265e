"""The publishing side of the agent framework: batching, invalidation of vanished ads, jitter."""

from __future__ import annotations

import asyncio
from typing import Any

from gridbus import bus
from gridbus.agent import Agent
from gridbus.agent.core import ADS_PER_MESSAGE


class Recorder(Agent):
    kind = "rec"
    my_type = "Generic"

    def __init__(self, slots: int):
        super().__init__("r1", "amqp://guest:guest@127.0.0.1:5672/", update_interval=10)
        self.slots = [{"MyType": "Machine", "Name": f"slot{i}@h"} for i in range(slots)]
        self.secrets: list[dict[str, Any]] = []
        self.sent: list[tuple[str, Any, str]] = []

    def ads(self) -> list[dict[str, Any]]:
        return [self.daemon_ad(), *self.slots]

    def private_ads(self) -> list[dict[str, Any]]:
        return self.secrets

    async def publish(self, exchange: str, key: str, body: Any, mtype: str) -> None:
        assert exchange == bus.ADS
        self.sent.append((key, body, mtype))


def test_many_ads_travel_batched_by_type_with_sequence_and_lifetime():
    a = Recorder(1200)
    a.secrets = [{"MyType": "Machine", "Name": "slot0@h", "ClaimId": "x"}]
    asyncio.run(a.advertiser.publish_ads())
    # (A type's message leaves as soon as it is full: the order across types is not kept.)
    keys = sorted((k, len(b["ads"]), t) for k, b, t in a.sent)
    assert keys == sorted([
        ("generic.r1", 1, bus.T_AD),
        ("machine.r1", ADS_PER_MESSAGE, bus.T_AD),
        ("machine.r1", ADS_PER_MESSAGE, bus.T_AD),
        ("machine.r1", 200, bus.T_AD),
        ("private.machine.r1", 1, bus.T_AD),
    ])
    every = [ad for _, b, _ in a.sent for ad in b["ads"]]
    (first,) = {ad["UpdateSequenceNumber"] for ad in every}  # one number for the whole round
    assert {ad["ClassAdLifetime"] for ad in every} == {30.0}
    assert {ad["DaemonStartTime"] for ad in every} == {a.start_time}
    a.sent.clear()
    asyncio.run(a.advertiser.publish_ads())
    assert {ad["UpdateSequenceNumber"] for _, b, _ in a.sent for ad in b["ads"]} == {first + 1}
    # Each message is numbered, one more than the last, whatever its type: a gap is a lost message.
    stamps = [(b["from"], b["start"], b["seq"]) for _, b, _ in a.sent]
    assert stamps == [("rec@r1", a.start_time, n) for n in range(6, 11)]


def test_a_round_hands_the_loop_back_between_its_messages():
    a = Recorder(1200)
    beats: list[int] = []

    async def main():
        async def heartbeat():
            while True:
                beats.append(len(a.sent))
                await asyncio.sleep(0)
        hb = asyncio.create_task(heartbeat())
        await asyncio.sleep(0)
        await a.advertiser.publish_ads()
        hb.cancel()
    asyncio.run(main())
    # Another task ran after each message, not only after the whole round.
    assert {1, 2, 3} <= set(beats), beats


def test_a_daemon_restarted_within_the_same_second_outranks_its_predecessor(monkeypatch):
    from gridbus.agent import core
    from gridbus.agents.collector.store import AdStore, Outcome

    clock = iter([1000.25, 1000.75])
    monkeypatch.setattr(core.time, "time", lambda: next(clock))
    before, after = Recorder(0), Recorder(0)  # the same daemon, started twice in second 1000
    assert before.start_time == after.start_time == 1000
    for _ in range(5):  # the first one's life: a few rounds of updates
        asyncio.run(before.advertiser.publish_ads())
    asyncio.run(after.advertiser.publish_ads())
    store = AdStore(clock=lambda: 0.0)
    old_ad, new_ad = before.sent[-1][1]["ads"][0], after.sent[-1][1]["ads"][0]
    assert store.update(dict(old_ad)) == Outcome.NEW
    assert store.update(dict(new_ad)) == Outcome.UPDATED  # not refused as out of order
    assert store.update(dict(old_ad)) == Outcome.OUT_OF_ORDER


def test_an_ad_gone_since_the_last_round_is_invalidated_and_a_stop_invalidates_all():
    a = Recorder(3)
    asyncio.run(a.advertiser.publish_ads())
    a.slots.pop(1)
    a.sent.clear()
    asyncio.run(a.advertiser.publish_ads())
    invalidations = [(k, b) for k, b, t in a.sent if t == bus.T_INVALIDATE]
    assert [(k, b["mytype"], b["names"]) for k, b in invalidations] == [("machine.r1", "Machine", ["slot1@h"])]
    a.sent.clear()
    asyncio.run(a.advertiser.invalidate())
    got = {b["mytype"]: sorted(b["names"]) for _, b, t in a.sent if t == bus.T_INVALIDATE}
    assert got == {"Generic": ["r1"], "Machine": ["slot0@h", "slot2@h"]}


def test_update_waits_spread_over_the_interval_then_stay_close_to_it():
    a = Recorder(0)
    firsts = [a.advertiser.next_update_wait(True) for _ in range(2000)]
    later = [a.advertiser.next_update_wait(False) for _ in range(2000)]
    assert 1.0 <= min(firsts) and max(firsts) <= 10.0
    # Spread: the first waits cover the interval (no herd), later ones keep a 10% jitter.
    assert min(firsts) < 2.0 and max(firsts) > 9.0
    assert 9.0 <= min(later) and max(later) <= 10.0 and max(later) - min(later) > 0.5


class Slots(Recorder):
    """A recorder that can build the ads of named slots alone (as the startd does)."""

    def ads_named(self, names: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return [s for s in self.slots if s["Name"] in names], [s for s in self.secrets if s["Name"] in names]


def test_a_round_of_named_changes_sends_only_those_and_invalidates_the_gone():
    a = Slots(1000)
    asyncio.run(a.advertiser.publish_ads())
    a.sent.clear()
    a.slots = [s for s in a.slots if s["Name"] != "slot7@h"]
    a.secrets = [{"MyType": "Machine", "Name": "slot3@h", "ClaimId": "y"}]
    asyncio.run(a.advertiser.publish_ads({"slot3@h", "slot7@h"}))
    assert [(k, [ad["Name"] for ad in b.get("ads", [])] or b["names"]) for k, b, _ in a.sent] == [
        ("machine.r1", ["slot3@h"]),
        ("private.machine.r1", ["slot3@h"]),
        ("machine.r1", ["slot7@h"]),  # the invalidation of the slot gone
    ]
    # A later whole round knows slot7 is gone already and invalidates nothing.
    a.sent.clear()
    asyncio.run(a.advertiser.publish_ads())
    assert not [b for _, b, t in a.sent if t == bus.T_INVALIDATE]
    # An agent that cannot build named ads sends whole rounds.
    b = Recorder(3)
    asyncio.run(b.advertiser.publish_ads({"slot1@h"}))
    assert sum(len(body["ads"]) for _, body, _ in b.sent) == 4


def test_changes_coming_faster_than_the_interval_still_get_whole_rounds():
    a = Slots(50)
    a.update_interval = 0.4

    async def main() -> list[int]:
        a.advertiser.start(lambda coro, name: asyncio.create_task(coro, name=name))
        sizes: list[int] = []
        try:
            while sizes.count(50) < 3:  # the first round and two periodic ones
                a.ads_changed(["slot1@h"])
                await asyncio.sleep(0.02)
                sizes += [len(b["ads"]) for k, b, t in a.sent if k == "machine.r1" and t == bus.T_AD]
                a.sent.clear()
        finally:
            await a.advertiser.stop()
        return sizes

    sizes = asyncio.run(asyncio.wait_for(main(), 10))
    # Whole rounds keep coming (three within the timeout) though a change is named every 20 ms,
    # and between them the changes go as rounds of the one slot. (How many of each depends on the
    # first round's random phase, so only their kinds are checked.)
    assert set(sizes) == {1, 50}, sizes
