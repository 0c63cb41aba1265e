"""Query helpers and the collector's ingest path, without a broker."""

from __future__ import annotations

import asyncio
import inspect
import json

import msgpack
import pytest

from gridbus import bus, wire
from gridbus.agent import Call
from gridbus.agents.collector import Collector
from gridbus.agents.collector.query import name_lookup, projector, select
from gridbus.status import MethodError, Status


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('Name == "slot1@h"', ("slot1@h", False)),
        ('(MY.Name =?= "slot1@h")', ("slot1@h", True)),
        ('"a@b" == name', ("a@b", False)),
        ('Name == "a" && Cpus > 1', None),
        ('Name == "a" || true', None),
        ('Machine == "a"', None),
        ("true", None),
    ],
)
def test_name_lookup_only_for_a_plain_name_test(text, want):
    assert name_lookup(text) == want


def test_projection_is_case_insensitive_and_keeps_the_ads_spelling():
    project = projector(["name", "Cpus", "Absent"])
    assert project({"Name": "a", "Cpus": 2, "Memory": 3}) == {"Name": "a", "Cpus": 2}
    assert projector([]) is None
    with pytest.raises(MethodError, match="attribute names"):
        projector(["Name", 3])


def test_select_honours_the_limit():
    ads = [{"i": i} for i in range(10)]
    assert [a["i"] for a in select(ads, lambda a: a["i"] % 2 == 0, 3)] == [0, 2, 4]
    assert len(list(select(ads, lambda a: True, -1))) == 10
    assert list(select(ads, lambda a: True, 0)) == []


async def collect(answer) -> list[dict]:
    """The messages of an answer as the framework sends them: one, or one per yielded chunk."""
    if inspect.isasyncgen(answer):
        return [chunk async for chunk in answer]
    return [await answer]


def machine(name, seq=1, **attrs):
    return {"MyType": "Machine", "Name": name, "UpdateSequenceNumber": seq, "DaemonStartTime": 1,
            "ClassAdLifetime": 60, "MyAddress": "startd@h", **attrs}


@pytest.fixture
def coll():
    return Collector("c1", "amqp://daemon:pw@127.0.0.1:5672/", private_readers=["negotiator-acct"])


def test_ingest_counts_ads_out_of_order_and_refusals(coll, caplog):
    body = wire.encode({"ads": [machine("a", 2), machine("b", 2), {"Name": "no-type"}, {"MyType": "Machine"}]})
    assert coll.ingest(body, wire.MSGPACK, bus.T_AD, "machine.h") == 2
    assert coll.ingest(wire.encode({"ads": [machine("a", 1)]}), wire.MSGPACK, bus.T_AD, "machine.h") == 0
    assert coll.ingest(b"\xc1garbage", wire.MSGPACK, bus.T_AD, "machine.h") == 0
    assert coll.ingest(wire.encode([1, 2]), wire.MSGPACK, bus.T_AD, "machine.h") == 0
    # JSON is accepted too (the management UI's "Publish message" form).
    assert coll.ingest(json.dumps({"ads": [machine("c")]}).encode(), wire.JSON, bus.T_AD, "machine.h") == 1
    stats = coll.collector_statistics()
    assert stats["AdsHeld"] == 3 and stats["UpdatesOutOfOrder"] == 1
    assert stats["UpdatesRejected"] == 4 and stats["UpdatesTotal"] == 3
    assert "without a MyType" in caplog.text
    assert coll.daemon_ad()["MachineAds"] == 3


def test_ingest_invalidations_by_name(coll):
    coll.ingest(wire.encode({"ads": [machine("a"), machine("b")]}), wire.MSGPACK, bus.T_AD, "machine.h")
    coll.ingest(wire.encode({"mytype": "Machine", "names": ["a"]}), wire.MSGPACK, bus.T_INVALIDATE, "machine.h")
    assert [e.ad["Name"] for e in coll.store.entries()] == ["b"]
    coll.ingest(wire.encode({"names": ["b"]}), wire.MSGPACK, bus.T_INVALIDATE, "machine.h")
    assert coll.rejected == 1 and len(coll.store) == 1


def test_private_ads_arrive_apart_and_need_the_negotiators_identity(coll):
    coll.ingest(wire.encode({"ads": [machine("a")]}), wire.MSGPACK, bus.T_AD, "machine.h")
    secret = {"MyType": "Machine", "Name": "a", "ClaimId": "<1.2.3.4:5>#1#2", "DaemonStartTime": 1}
    assert coll.ingest(wire.encode({"ads": [secret]}), wire.MSGPACK, bus.T_AD, "private.machine.h") == 1

    def query(user, private):
        call = Call(user, "collector@c1", "Query", {})
        answer = coll.Query(call, AdTypes=["Machine"], Constraint="true", Projection=[], Limit=-1, Private=private)
        return [ad for chunk in asyncio.run(collect(answer)) for ad in chunk["Ads"]]

    (public,) = query("alice", False)
    assert "ClaimId" not in public
    (merged,) = query("negotiator-acct", True)
    assert merged["ClaimId"] == secret["ClaimId"]
    with pytest.raises(MethodError) as err:
        query("alice", True)
    assert err.value.status == Status.FORBIDDEN and "alice" in err.value.text and "negotiator-acct" in err.value.text


def test_query_streams_chunks_and_answers_an_empty_result_with_one_chunk():
    coll = Collector("c2", "amqp://guest:guest@127.0.0.1:5672/", query_chunk=4)
    coll.ingest(wire.encode({"ads": [machine(f"s{i}") for i in range(10)]}), wire.MSGPACK, bus.T_AD, "machine.h")

    async def chunks(**args):
        call = Call("guest", "collector@c2", "Query", {})
        base = {"AdTypes": [], "Constraint": "true", "Projection": [], "Limit": -1, "Private": False}
        return [c["Ads"] for c in await collect(coll.Query(call, **{**base, **args}))]

    assert [len(c) for c in asyncio.run(chunks())] == [4, 4, 2]
    assert asyncio.run(chunks(AdTypes=["Scheduler"])) == [[]]
    assert [len(c) for c in asyncio.run(chunks(Limit=5))] == [4, 1]
    assert asyncio.run(chunks(Constraint='Name == "S7"', Projection=["Name"])) == [[{"Name": "s7"}]]


def test_msgpack_of_random_bytes_never_raises(coll):
    import random

    rnd = random.Random(7)
    for _ in range(300):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
        coll.ingest(body, wire.MSGPACK, rnd.choice([bus.T_AD, bus.T_INVALIDATE, None]), "x.y")
    coll.ingest(msgpack.packb({"ads": [None, 3, "x", {"MyType": 1, "Name": "a"}]}), wire.MSGPACK, bus.T_AD, "x.y")
    assert coll.rejected >= 4


def test_configuration_and_reconfig(tmp_path, monkeypatch):
    from gridbus.agents.collector import build
    from gridbus.config import Config

    conf = tmp_path / "gridbus.toml"
    conf.write_text('UPDATE_INTERVAL = 10.0\nCOLLECTOR_UPDATE_INTERVAL = 60.0\n[collector]\nCOLLECTOR_PRIVATE_READERS = ["neg"]\n')
    monkeypatch.setenv("GRIDBUS_CONFIG", str(conf))
    coll = build(Config.load(daemon="collector"), "cfg", "amqp://daemon:pw@127.0.0.1:5672/")
    assert coll.address == "collector@cfg" and coll.private_readers == {"neg"}
    assert coll.update_interval == 60.0 and coll.store.default_lifetime == 30.0
    conf.write_text("UPDATE_INTERVAL = 20.0\nCOLLECTOR_UPDATE_INTERVAL = 60.0\nCLASSAD_LIFETIME = 5.0\n")
    changed = asyncio.run(coll.reconfig())
    assert {"UPDATE_INTERVAL", "CLASSAD_LIFETIME", "COLLECTOR_PRIVATE_READERS"} <= set(changed)
    # The daemons' UPDATE_INTERVAL is not the collector's own interval.
    assert coll.update_interval == 60.0 and coll.lifetime == 180.0
    assert coll.store.default_lifetime == 5.0 and coll.private_readers == {"daemon"}


def test_a_gap_in_a_senders_messages_is_counted_and_asked_for_once_the_queue_drains(coll):
    def send(seq, start=1, sender="startd@h", key="machine.h"):
        body = {"ads": [machine(f"s{seq}")], "from": sender, "start": start, "seq": seq}
        coll.ingest(wire.encode(body), wire.MSGPACK, bus.T_AD, key)

    for seq in (1, 2, 5):  # 3 and 4 lost
        send(seq)
    assert coll.collector_statistics()["UpdatesLost"] == 2
    # Not while the queue still overflows (its senders' rounds would be dropped too), nor when
    # its length is unknown; then once, and not again within the holdoff.
    assert coll.due_readvertisements(5000, now=100.0) == []
    assert coll.due_readvertisements(None, now=100.0) == []
    assert coll.due_readvertisements(0, now=100.0) == ["startd@h"]
    send(4)  # late: no gap
    send(7)  # another loss: counted, and wanted again, but within the holdoff
    assert coll.updates_lost == 3
    assert coll.due_readvertisements(0, now=105.0) == []
    assert coll.due_readvertisements(0, now=111.0) == ["startd@h"]
    send(1, start=2)  # the sender restarted: its numbers begin again
    send(2, start=2)
    send(9, sender="startd@other", key="machine.h")  # not its own routing key: not followed
    send(12, sender="startd@other", key="machine.h")
    assert coll.updates_lost == 3 and coll.due_readvertisements(0, now=200.0) == []
    assert coll.collector_statistics()["ReadvertisementsAsked"] == 2
    assert len(coll.store) == 7  # every ad was stored (s1..s12, seven names), whatever its sequence said


def test_a_private_query_of_every_ad_streams_each_with_its_secret():
    coll = Collector("c3", "amqp://guest:guest@127.0.0.1:5672/", query_chunk=500)
    coll.ingest(wire.encode({"ads": [machine(f"s{i}") for i in range(1200)]}), wire.MSGPACK, bus.T_AD, "machine.h")
    secrets = [{"MyType": "Machine", "Name": f"s{i}", "ClaimId": f"claim-{i}", "DaemonStartTime": 1} for i in range(1200)]
    coll.ingest(wire.encode({"ads": secrets}), wire.MSGPACK, bus.T_AD, "private.machine.h")

    async def chunks(**args):
        call = Call("guest", "collector@c3", "Query", {})
        base = {"AdTypes": ["Machine"], "Constraint": "true", "Projection": [], "Limit": -1, "Private": True}
        return [c["Ads"] for c in await collect(coll.Query(call, **{**base, **args}))]

    got = asyncio.run(chunks())
    assert [len(c) for c in got] == [500, 500, 200]
    assert all(ad["ClaimId"] == f"claim-{ad['Name'][1:]}" for c in got for ad in c)
    assert all("ClaimId" not in e.ad for e in coll.store.entries())  # the stored ads are not touched
    assert asyncio.run(chunks(Limit=3, Projection=["Name", "ClaimId"])) == [
        [{"Name": f"s{i}", "ClaimId": f"claim-{i}"} for i in range(3)]]


class _Delivered:
    """An ad message as aio-pika delivers it, recording its acknowledgement."""

    def __init__(self, body: bytes, acked: list):
        self.body, self.content_type, self.type, self.routing_key = body, wire.MSGPACK, bus.T_AD, "machine.h"
        self.headers: dict = {}  # no protocol version: gridbus 0.1.0's, which the collector takes
        self.app_id = "startd@h"
        self._acked = acked

    async def ack(self, multiple: bool = False) -> None:
        self._acked.append((self, multiple))


def test_a_flood_of_ad_messages_is_ingested_in_slices_in_order_and_every_one_acknowledged(coll, monkeypatch):
    from gridbus.agents.collector import agent as collector_agent

    monkeypatch.setattr(collector_agent, "INGEST_SLICE", 0.0)  # a slice per message: a quick machine too
    acked: list = []
    messages = [_Delivered(wire.encode({"ads": [machine(f"slot{i}@h", seq=1)]}), acked) for i in range(400)]
    progress: list[int] = []

    async def main():
        ingest = asyncio.create_task(coll._ingest_loop())
        for m in messages:  # one delivery of many messages, handed over in one turn of the loop
            await coll._on_ads(m)

        async def other_work():
            while coll._inbox:
                progress.append(len(coll._inbox))
                await asyncio.sleep(0)
        await other_work()
        await coll._ack_ads()
        ingest.cancel()
    asyncio.run(main())
    assert [e.ad["Name"] for e in coll.store.entries(["Machine"])] == [f"slot{i}@h" for i in range(400)]
    # Other work ran while the messages were ingested, not only once they all were.
    assert len(progress) > 2 and 0 < progress[-1] < 400
    assert acked and acked[-1] == (messages[-1], True)  # acknowledged together, up to the last
