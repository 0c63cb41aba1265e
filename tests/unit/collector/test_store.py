"""The collector's ad store: newest ad per (MyType, Name), sequence order, lazy expiry, indexes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridbus.agents.collector.store import AdStore, BadAd, Outcome, split_private
from tests.hypothesis_profiles import examples


def ad(name="slot1@h", mytype="Machine", seq=1, start=100, lifetime=10.0, **attrs):
    return {
        "MyType": mytype,
        "Name": name,
        "UpdateSequenceNumber": seq,
        "DaemonStartTime": start,
        "ClassAdLifetime": lifetime,
        **attrs,
    }


def test_newest_ad_wins_and_gets_last_heard_from():
    s = AdStore()
    assert s.update(ad(seq=1, Cpus=1), now=1000.0) == Outcome.NEW
    assert s.update(ad(seq=2, Cpus=2), now=1001.5) == Outcome.UPDATED
    e = s.get("machine", "SLOT1@H")  # type and name are case-insensitive
    assert e is not None and e.ad["Cpus"] == 2 and e.ad["LastHeardFrom"] == 1001
    assert len(s) == 1 and s.counts() == {"Machine": 1}


def test_an_older_sequence_number_of_the_same_start_is_ignored_and_counted():
    s = AdStore()
    s.update(ad(seq=5, Cpus=5), now=0)
    assert s.update(ad(seq=4, Cpus=4), now=1) == Outcome.OUT_OF_ORDER
    assert s.get("Machine", "slot1@h").ad["Cpus"] == 5
    assert s.stats.out_of_order == 1 and s.stats.updates == 1
    # The same sequence number again (a redelivery) refreshes the ad.
    assert s.update(ad(seq=5, Cpus=5), now=2) == Outcome.UPDATED


def test_a_restarted_daemon_replaces_its_ad_whatever_its_sequence_number():
    s = AdStore()
    s.update(ad(seq=900, start=100, Cpus=1), now=0)
    assert s.update(ad(seq=1, start=200, Cpus=2), now=1) == Outcome.UPDATED
    assert s.get("Machine", "slot1@h").ad["Cpus"] == 2
    # A late update from the earlier start is older than what is held.
    assert s.update(ad(seq=901, start=100, Cpus=3), now=2) == Outcome.OUT_OF_ORDER


def test_expiry_at_the_lifetime_and_updates_push_it_back():
    s = AdStore()
    s.update(ad("a", lifetime=10), now=0)
    s.update(ad("b", lifetime=5), now=0)
    assert s.expire(4.9) == []
    assert s.expire(5.0) == [("Machine", "b")]
    s.update(ad("a", seq=2, lifetime=10), now=8)  # now lives until 18
    assert s.expire(17.9) == [] and s.get("Machine", "a") is not None
    assert s.expire(18.0) == [("Machine", "a")]
    assert len(s) == 0 and s.stats.expired == 2


def test_a_shorter_lifetime_wakes_the_heap_earlier():
    s = AdStore()
    s.update(ad("a", seq=1, lifetime=100), now=0)
    s.update(ad("a", seq=2, lifetime=2), now=1)
    assert s.expire(3.0) == [("Machine", "a")]


def test_default_lifetime_when_the_ad_says_nothing_or_nonsense():
    s = AdStore(default_lifetime=7)
    a = ad("a")
    del a["ClassAdLifetime"]
    s.update(a, now=0)
    s.update(ad("b", lifetime=-3), now=0)
    s.update(ad("c", lifetime="soon"), now=0)
    assert s.expire(6.9) == []
    assert sorted(n for _, n in s.expire(7.0)) == ["a", "b", "c"]


def test_expire_does_not_touch_ads_that_are_not_due():
    """The heap is lazily cleaned: one tick costs the ads due, not the ads held."""
    s = AdStore()
    for i in range(2000):
        s.update(ad(f"s{i}", lifetime=1000), now=0)
    s.update(ad("short", lifetime=1), now=0)
    calls = 0
    original = s._by_type["machine"].get

    class Counting(dict):
        def get(self, key, default=None):
            nonlocal calls
            calls += 1
            return original(key, default)

    s._by_type["machine"] = Counting(s._by_type["machine"])
    assert s.expire(1.0) == [("Machine", "short")]
    assert calls == 1


def test_invalidation_by_name_and_by_predicate():
    s = AdStore()
    for i in range(10):
        s.update(ad(f"slot{i}@h", Cpus=i), now=0)
    assert s.remove("MACHINE", "Slot3@H") is True
    assert s.remove("Machine", "nope") is False
    assert s.remove_where("Machine", lambda a: a["Cpus"] >= 5) == 5
    assert sorted(e.ad["Name"] for e in s.entries(["Machine"])) == [f"slot{i}@h" for i in (0, 1, 2, 4)]
    assert s.stats.invalidated == 6
    # Invalidated ads leave stale heap records; expiring them later is harmless.
    assert sorted(s.expire(100.0)) == [("Machine", f"slot{i}@h") for i in (0, 1, 2, 4)]
    assert len(s) == 0 and s.stats.expired == 4


def test_ads_without_identity_are_refused():
    s = AdStore()
    for bad, why in (
        ({"Name": "x"}, "MyType"),
        ({"MyType": "Machine"}, "Name"),
        ({"MyType": "", "Name": "x"}, "MyType"),
        ({"MyType": "Machine", "Name": 7}, "Name"),
        (["not", "a", "map"], "map"),
    ):
        with pytest.raises(BadAd, match=why):
            s.update(bad, now=0)
    assert len(s) == 0
    # Attribute names are case-insensitive.
    assert s.update({"mytype": "Machine", "NAME": "x"}, now=0) == Outcome.NEW


def test_claim_ids_never_stay_in_the_public_ad():
    public, secret = split_private({"Name": "a", "ClaimId": "s3cret", "capability": "c"})
    assert public == {"Name": "a"} and secret == {"ClaimId": "s3cret", "capability": "c"}
    s = AdStore()
    s.update(ad("a", ClaimId="s3cret"), now=0)
    e = s.get("Machine", "a")
    assert "ClaimId" not in e.ad and e.private == {"ClaimId": "s3cret"}


def test_private_ads_attach_to_their_public_ad_of_the_same_start():
    s = AdStore()
    assert s.update_private({"MyType": "Machine", "Name": "a", "ClaimId": "x"}, now=0) is False
    s.update(ad("a", start=100), now=0)
    assert s.update_private({"MyType": "Machine", "Name": "a", "ClaimId": "x", "DaemonStartTime": 99}) is False
    assert s.update_private({"MyType": "Machine", "Name": "a", "ClaimId": "x", "DaemonStartTime": 100}) is True
    assert s.get("Machine", "a").private == {"ClaimId": "x"}
    # A restart voids the old secrets.
    s.update(ad("a", start=200, seq=1), now=1)
    assert s.get("Machine", "a").private is None


def test_name_index_per_type():
    s = AdStore()
    s.update(ad("x", mytype="Machine"), now=0)
    s.update(ad("x", mytype="Scheduler"), now=0)
    assert {e.ad["MyType"] for e in s.by_name("X")} == {"Machine", "Scheduler"}
    assert [e.ad["MyType"] for e in s.by_name("x", ["scheduler"])] == ["Scheduler"]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(1, 8), st.integers(0, 30)), max_size=60))
def test_expiry_matches_a_brute_force_model(ops):
    """Random updates (name, start, lifetime, time) and expiry ticks agree with a plain model."""
    s = AdStore()
    model: dict[str, tuple[int, int, float]] = {}  # name -> (start, seq, expires)
    seq = 0
    now = 0.0
    for name_i, start, lifetime, dt in sorted(ops, key=lambda o: o[3]):
        now = float(dt)
        gone = {n for _, n in s.expire(now)}
        want_gone = {n for n, (_, _, exp) in model.items() if exp <= now}
        assert gone == want_gone
        for n in want_gone:
            del model[n]
        seq += 1
        name = f"n{name_i}"
        s.update(ad(name, seq=seq, start=start, lifetime=lifetime), now=now)
        held = model.get(name)
        if held is None or (start, seq) >= held[:2]:
            model[name] = (start, seq, now + lifetime)
        assert {e.ad["Name"] for e in s.entries()} == set(model)


def test_many_updates_keep_the_heap_small():
    s = AdStore()
    rnd = random.Random(1)
    for i in range(20_000):
        s.update(ad(f"s{rnd.randrange(100)}", seq=i, lifetime=rnd.uniform(1, 50)), now=i * 0.01)
        if i % 100 == 0:
            s.expire(i * 0.01)
    assert len(s._heap) <= 2 * len(s) + 200
