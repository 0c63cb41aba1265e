"""Query, Locate, Invalidate, private ads and refused ads, on the real broker.

The reference filter is HTCondor's own ClassAd library (classad2 in HTCondor's semantics, with
htcondor2 imported first): every ad that the constraint makes true, in publication order, cut at
the limit, projected.
"""

from __future__ import annotations

import json
import random

import pytest

from gridbus import bus, wire
from gridbus.console.collector import AdType, DaemonNotFound, DaemonType
from gridbus.console.collector import Collector as CollectorClient
from gridbus.console.session import Session
from gridbus.status import Status
from tests.integration.collector.conftest import stats, wait_for

pytestmark = pytest.mark.broker

N_ADS = 10_000


def generated_machines(n: int, seed: int = 4) -> list[dict]:
    rnd = random.Random(seed)
    ads = []
    for i in range(n):
        node, slot = divmod(i, 8)
        ad = {
            "MyType": "Machine",
            "Name": f"slot{slot + 1}@node{node}.pool",
            "Machine": f"node{node}.pool",
            "MyAddress": f"startd@node{node}.pool",
            "Cpus": rnd.choice([1, 2, 4, 8, 16]),
            "Memory": rnd.choice([512, 2048, 4096, 8192, 32768]),
            "Disk": rnd.randrange(1_000_000, 100_000_000),
            "LoadAvg": round(rnd.random() * 4, 3),
            "State": rnd.choice(["Unclaimed", "Claimed", "Owner", "Drained"]),
            "Activity": rnd.choice(["Idle", "Busy", "Retiring"]),
            "Arch": rnd.choice(["X86_64", "aarch64"]),
            "OpSys": "LINUX",
            "PartitionableSlot": rnd.random() < 0.2,
            "UpdateSequenceNumber": 1,
            "DaemonStartTime": 1_700_000_000,
            "ClassAdLifetime": 600,
        }
        if rnd.random() < 0.3:
            ad["HasGPU"] = rnd.random() < 0.5  # absent elsewhere: undefined in constraints
        ads.append(ad)
    return ads


CASES = [
    ("true", [], -1),
    ("Cpus >= 4 && Memory > 4096", ["Name", "Cpus", "memory"], -1),
    ('State == "unclaimed" && Activity == "Idle"', ["Name", "State"], 100),  # == ignores case
    ('Arch =?= "aarch64" || HasGPU', [], -1),
    ("HasGPU =!= true && LoadAvg < 0.5", ["Name", "LoadAvg", "HasGPU"], -1),
    ('regexp("^slot[12]@node1[0-9]\\.", Name)', ["Name"], -1),
    ('Name == "SLOT3@NODE77.POOL"', [], -1),
    ('Name =?= "SLOT3@NODE77.POOL"', [], -1),
    ("Disk / Cpus > 10000000 ? PartitionableSlot : false", ["Name", "Disk", "Cpus"], 50),
    ("Memory * 2", ["Name"], 3),  # a number: EvalBool is true when non-zero
    ("NoSuchAttribute > 3", [], -1),
]


def reference(ads: list[dict], constraint: str, projection: list[str], limit: int) -> list[dict]:
    import htcondor2  # noqa: F401, I001  (first: HTCondor semantics for classad2)
    import classad2

    expr = classad2.ExprTree(constraint)
    out = []
    for ad in ads:
        value = expr.eval(scope=classad2.ClassAd(ad))
        # EvalBool: true, or a non-zero number. classad2's Value (Undefined, Error) is an IntEnum.
        number = isinstance(value, (int, float)) and not isinstance(value, (bool, classad2.Value))
        ok = value is True or (number and value != 0)
        if not ok:
            continue
        if projection:
            wanted = {p.lower() for p in projection}
            ad = {k: v for k, v in ad.items() if k.lower() in wanted}
        out.append(ad)
        if len(out) == limit:
            break
    return out


@pytest.fixture
def ten_thousand(collector, session, publisher) -> list[dict]:
    ads = generated_machines(N_ADS)
    publisher.ads(ads)
    wait_for(lambda: stats(session)["AdsHeld"] >= N_ADS, 30, f"{N_ADS} ads held")
    return ads


def test_query_matches_the_reference_filter_over_ten_thousand_ads(ten_thousand, session):
    for constraint, projection, limit in CASES:
        want = reference(ten_thousand, constraint, projection, limit)
        r = session.call(
            "collector@c1",
            "Query",
            {"AdTypes": ["Machine"], "Constraint": constraint, "Projection": projection, "Limit": limit},
        )
        assert r.status == 0, r.text
        got = [{k: v for k, v in ad.items() if k != "LastHeardFrom"} for ad in r.Ads]
        assert got == want, f"{constraint!r}: {len(got)} ads, the reference has {len(want)}"


def test_console_query_and_locate(ten_thousand, client):
    ads = client.query(AdType.Startd, "Cpus == 16 && Memory == 32768", ["Name", "Cpus"])
    assert ads and all(ad["Cpus"] == 16 for ad in ads)
    assert len(client.query(AdType.Startd, limit=7)) == 7
    ad = client.locate(DaemonType.Startd, "slot2@node3.pool")
    assert ad["MyAddress"] == "startd@node3.pool"
    assert client.locate(DaemonType.Startd, "node5.pool")["Machine"] == "node5.pool"  # by host
    collector_ad = wait_for(lambda: client.query(AdType.Collector), 5, "the collector's own ad")[0]
    assert collector_ad["MyAddress"] == "collector@c1"
    assert client.locate(DaemonType.Collector)["Name"] == "c1"
    with pytest.raises(DaemonNotFound, match="no Scheduler ad named 'nope'"):
        client.locate(DaemonType.Schedd, "nope")
    # Found without a name: the only collector answering getObjects.
    with CollectorClient(client.session) as found:
        assert found.address == "collector@c1"


def test_the_collector_ad_carries_its_statistics(ten_thousand, client):
    def fresh():
        ads = client.query(AdType.Collector)
        return ads and ads[0].get("MachineAds", 0) >= N_ADS and ads[0]

    ad = wait_for(fresh, 5, "a Collector ad counting the machine ads")
    for attr in ("UpdatesTotal", "UpdatesPerSecond", "QueriesTotal", "QueriesPerSecond",
                 "UpdatesOutOfOrder", "UpdatesRejected", "AdsExpired", "AdsHeld"):
        assert attr in ad, attr
    assert ad["UpdatesTotal"] >= N_ADS


def _alice(mgmt, broker_url, vhost) -> str:
    mgmt.put_user("alice-coll", "pw-alice")
    mgmt.put_permissions(vhost, "alice-coll", "^$", "^gridbus\\.rpc$", "^$")
    return broker_url.with_vhost(vhost).with_credentials("alice-coll", "pw-alice").url


def test_only_the_negotiators_identity_ever_receives_a_claim_id(collector, publisher, session, mgmt, broker_url, vhost):
    claim = "<10.0.0.7:9618>#1700000000#42#abcdef"
    slot = {"MyType": "Machine", "Name": "slot1@secret", "MyAddress": "startd@secret", "Cpus": 1,
            "DaemonStartTime": 5, "UpdateSequenceNumber": 1, "ClassAdLifetime": 60}
    publisher.ads([slot], key="machine.secret")
    publisher.ads([{"MyType": "Machine", "Name": "slot1@secret", "ClaimId": claim, "DaemonStartTime": 5}],
                  key="private.machine.secret")
    # A careless daemon puts a claim id in its public ad: it is kept apart all the same.
    publisher.ads([{**slot, "Name": "slot2@secret", "ClaimId": claim + "-2"}], key="machine.secret")
    wait_for(lambda: len(session.call("collector@c1", "Query", {"AdTypes": ["Machine"], "Private": True}).Ads) == 2,
             5, "both slots held")
    priv = session.call("collector@c1", "Query", {"AdTypes": ["Machine"], "Private": True})
    assert {a["Name"]: a.get("ClaimId") for a in priv.Ads} == {"slot1@secret": claim, "slot2@secret": claim + "-2"}
    url = _alice(mgmt, broker_url, vhost)
    try:
        with Session(url, timeout=10) as alice:
            every = [
                alice.call("collector@c1", "Query", {}),
                alice.call("collector@c1", "Query", {"AdTypes": ["Machine"], "Projection": ["Name", "ClaimId"]}),
                alice.call("collector@c1", "Query", {"Constraint": 'ClaimId =!= undefined'}),
                alice.call("collector@c1", "Locate", {"DaemonType": "Startd", "Name": "slot1@secret"}),
            ]
            for r in every:
                assert r.status == 0, r.text
                assert "abcdef" not in json.dumps(r.outArgs, default=str)
            assert every[2].Ads == []  # not even a constraint can see it
            denied = alice.call("collector@c1", "Query", {"AdTypes": ["Machine"], "Private": True})
            assert denied.status == Status.FORBIDDEN
            assert "alice-coll may not read private ads" in denied.text and "guest" in denied.text
            denied = alice.call("collector@c1", "Invalidate", {"AdType": "Machine", "Names": ["slot1@secret"]})
            assert denied.status == Status.FORBIDDEN
    finally:
        mgmt.delete_user("alice-coll")


def test_bad_ads_are_refused_counted_and_the_collector_serves_on(collector, publisher, session, client):
    before = stats(session)["UpdatesRejected"]
    publisher.ads([{"Name": "no-type", "Cpus": 1}])
    publisher.ads([{"MyType": "Machine", "Cpus": 1}])
    publisher.raw(b"\xc1\x00 not msgpack")
    publisher.raw(b"{not json", content_type=wire.JSON)
    publisher.raw(wire.encode({"mytype": "Machine", "constraint": "((("}), mtype=bus.T_INVALIDATE)
    publisher.ads([{"MyType": "Machine", "Name": "fine@h", "Cpus": 2}])
    wait_for(lambda: stats(session)["UpdatesRejected"] >= before + 5, 5, "five refusals counted")
    assert [a["Name"] for a in client.query(AdType.Startd, "true", ["Name"])] == ["fine@h"]


def test_invalidate_by_name_and_by_constraint(collector, publisher, session):
    publisher.ads([{"MyType": "Machine", "Name": f"s{i}@h", "Cpus": i} for i in range(10)])
    wait_for(lambda: stats(session)["AdsHeld"] >= 10, 5, "ten ads")
    r = session.call("collector@c1", "Invalidate", {"AdType": "Machine", "Names": ["s0@h"], "Constraint": "Cpus >= 6"})
    assert r.status == 0 and r.Count == 5
    r = session.call("collector@c1", "Query", {"AdTypes": ["Machine"], "Projection": ["Name"]})
    assert sorted(a["Name"] for a in r.Ads) == [f"s{i}@h" for i in range(1, 6)]
    # An invalidation message by constraint, as a daemon may send.
    publisher.raw(wire.encode({"mytype": "Machine", "constraint": "Cpus < 3"}), mtype=bus.T_INVALIDATE)
    wait_for(lambda: len(session.call("collector@c1", "Query", {"AdTypes": ["Machine"]}).Ads) == 3, 5, "three left")
    r = session.call("collector@c1", "Query", {"Constraint": "Cpus >"})
    assert r.status == Status.INVALID_PARAMETER and "Cpus >" in r.text
