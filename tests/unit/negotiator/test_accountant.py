"""The accountant: half-life priorities, factors, usage, persistence, concurrency limits."""

from __future__ import annotations

import json

import pytest

from gridbus.agents.negotiator.accountant import MIN_PRIORITY, Accountant, parse_limits
from gridbus.agents.negotiator.accountant_store import AccountantStore


def test_priority_moves_half_way_to_usage_in_one_halflife():
    acc = Accountant(halflife=100.0)
    acc.update_usage({"alice": 4.0}, now=1000.0)  # first update: no time has passed
    assert acc.user("alice").Priority == MIN_PRIORITY
    acc.update_usage({"alice": 4.0}, now=1100.0)
    assert acc.user("alice").Priority == pytest.approx(0.5 * 0.5 + 0.5 * 4.0)
    # Idle again: it decays back towards the floor, never below.
    for t in range(1200, 5000, 100):
        acc.update_usage({}, now=float(t))
    assert acc.user("alice").Priority == pytest.approx(MIN_PRIORITY)


def test_accumulated_usage_is_slot_seconds_held():
    acc = Accountant(halflife=1000.0)
    acc.update_usage({"bob": 2.0}, now=0.5)
    acc.update_usage({"bob": 3.0}, now=10.5)  # held 2 cpus for 10 s
    acc.update_usage({}, now=20.5)  # then 3 cpus for 10 s
    assert acc.user("bob").AccumulatedUsage == pytest.approx(2 * 10 + 3 * 10)
    assert acc.user("bob").ResourcesUsed == 0


def test_effective_priority_is_real_times_factor_and_orders_users():
    acc = Accountant()
    acc.set_factor("bob", 3.0)
    acc.user("alice")
    assert acc.effective_priority("bob") == pytest.approx(1.5)
    assert [u["Name"] for u in acc.priorities()] == ["alice", "bob"]
    with pytest.raises(ValueError, match="at least 1"):
        acc.set_factor("bob", 0.5)
    with pytest.raises(ValueError, match="at least 0.5"):
        acc.set_priority("bob", 0.1)
    with pytest.raises(ValueError, match="negative"):
        acc.set_usage("bob", -1)


def test_persisted_across_restarts(tmp_path):
    path = tmp_path / "spool" / "accountant.json"
    store = AccountantStore(path)
    acc = store.load(halflife=50.0)
    acc.set_factor("carol", 2.0)
    acc.update_usage({"carol": 1.0}, now=10.0)
    acc.update_usage({"carol": 1.0}, now=60.0)
    acc.set_limit("Licenses", 3)
    store.save(acc)
    again = store.load(halflife=50.0)
    assert again.user("carol").PriorityFactor == 2.0
    assert again.user("carol").Priority == pytest.approx(acc.user("carol").Priority)
    assert again.limit_max("licenses") == 3 and again.last_update == 60.0
    assert json.loads(path.read_text())["version"] == 1
    path.write_text("{not json")
    with pytest.raises(ValueError, match="accountant file"):
        store.load()


def test_concurrency_limits_fall_back_to_group_then_default():
    acc = Accountant(default_limit=7)
    acc.set_limit("db", 2)
    assert acc.limit_max("DB.read") == 2 and acc.limit_max("db") == 2 and acc.limit_max("other") == 7
    with pytest.raises(ValueError, match="limit name"):
        acc.set_limit("bad name", 1)
    assert parse_limits("DB, licenses:2.5,  ") == {"db": 1.0, "licenses": 2.5}
    assert parse_limits(None) == {}
