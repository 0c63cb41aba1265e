"""Accounting groups: quotas and surplus as HTCondor's admin manual describes them, and whole
cycles over a simulated pool negotiated group by group."""

from __future__ import annotations

import asyncio

import pytest

from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.groups import NONE, GroupConfig
from gridbus.agents.negotiator.preemption import PreemptionPolicy
from gridbus.agents.negotiator.simulate import SimClient, SimSchedd, job_ads, machine_ads


def config(names: str, **knobs: object) -> GroupConfig:
    return GroupConfig.from_knobs(names.split(","), lambda k: knobs.get(k))


def figures(groups: GroupConfig) -> dict[str, tuple[float, float]]:
    return {g.name: (round(g.quota, 2), round(g.allocated, 2)) for g in groups.groups()}


MANUAL = "group_physics,group_physics.hep,group_physics.lep,group_chemistry"


def test_static_quotas_are_scaled_down_when_the_pool_shrinks_and_not_up_when_it_grows():
    groups = config("group_physics,group_chemistry", GROUP_QUOTA_group_physics=20, GROUP_QUOTA_group_chemistry=10)
    groups.assign(15, {}, {"group_physics": 100, "group_chemistry": 100})
    assert figures(groups) == {NONE: (15, 0), "group_physics": (10, 10), "group_chemistry": (5, 5)}
    groups.assign(60, {}, {"group_physics": 100, "group_chemistry": 100})
    assert figures(groups)["group_physics"] == (20, 20) and groups.root.own_quota == 30


def test_dynamic_subgroup_quotas_are_fractions_of_the_parents():
    groups = config(MANUAL, GROUP_QUOTA_DYNAMIC_group_chemistry=0.33334, GROUP_QUOTA_DYNAMIC_group_physics=0.66667,
                    **{"GROUP_QUOTA_DYNAMIC_group_physics.hep": 0.75, "GROUP_QUOTA_DYNAMIC_group_physics.lep": 0.25})
    groups.assign(30, {}, {})
    quotas = {name: q for name, (q, _a) in figures(groups).items()}
    assert quotas == {NONE: 30, "group_physics": 20, "group_physics.hep": 15, "group_physics.lep": 5,
                      "group_chemistry": 10}


def test_surplus_stays_under_a_parent_that_does_not_accept_it():
    """The manual's example: hep and lep accept surplus, physics does not: together they may use
    physics' 20 however they like, never more; chemistry's unused 10 goes to no one."""
    groups = config(MANUAL, GROUP_QUOTA_group_physics=20, GROUP_QUOTA_group_chemistry=10, GROUP_ACCEPT_SURPLUS="false",
                    GROUP_ACCEPT_SURPLUS_group_physics="false",
                    **{"GROUP_QUOTA_group_physics.hep": 15, "GROUP_QUOTA_group_physics.lep": 5,
                       "GROUP_ACCEPT_SURPLUS_group_physics.hep": "true", "GROUP_ACCEPT_SURPLUS_group_physics.lep": "true"})
    groups.assign(30, {}, {"group_physics.hep": 100, "group_physics.lep": 0})
    assert figures(groups)["group_physics.hep"] == (15, 20)
    assert figures(groups)["group_chemistry"] == (10, 0)
    groups = config(MANUAL, GROUP_QUOTA_group_physics=20, GROUP_QUOTA_group_chemistry=10, GROUP_ACCEPT_SURPLUS="true",
                    **{"GROUP_QUOTA_group_physics.hep": 15, "GROUP_QUOTA_group_physics.lep": 5})
    groups.assign(30, {}, {"group_physics.hep": 100})
    assert figures(groups)["group_physics.hep"] == (15, 30)  # physics accepts too: chemistry's 10 as well


def test_groups_are_served_most_starving_first_and_none_last():
    groups = config("a,b", GROUP_QUOTA_DYNAMIC_a=0.5, GROUP_QUOTA_DYNAMIC_b=0.5)
    groups.assign(100, {"a": 40, "b": 10}, {"a": 100, "b": 100})
    assert [g.name for g in groups.order()] == ["b", "a", NONE]


def test_membership_is_the_longest_configured_prefix_case_insensitive():
    groups = config(MANUAL)
    assert groups.group_of("Group_Physics.HEP").name == "group_physics.hep"
    assert groups.group_of("group_physics.hep.higgs").name == "group_physics.hep"
    assert groups.group_of("group_biology").name == NONE and groups.group_of(None).name == NONE


@pytest.mark.parametrize(("names", "knobs", "sentence"), [
    ("a,a", {}, "twice"),
    ("a.b", {}, "does not list"),
    ("a", {"GROUP_QUOTA_a": 1, "GROUP_QUOTA_DYNAMIC_a": 0.5}, "both"),
    ("a", {"GROUP_QUOTA_DYNAMIC_a": 1.5}, "fraction"),
    ("a", {"GROUP_QUOTA_a": "lots"}, "number"),
    ("a", {"GROUP_ACCEPT_SURPLUS_a": "maybe"}, "GROUP_ACCEPT_SURPLUS_a: 'maybe' is not a valid bool"),
    ("a", {"GROUP_AUTOREGROUP": "sometimes"}, "GROUP_AUTOREGROUP: 'sometimes' is not a valid bool"),
])
def test_a_bad_configuration_is_refused_with_a_sentence(names, knobs, sentence):
    with pytest.raises(ValueError, match=sentence):
        config(names, **knobs)


def test_surplus_and_autoregroup_read_true_false_words():
    groups = config("a,b", GROUP_ACCEPT_SURPLUS="on", GROUP_ACCEPT_SURPLUS_b="n", GROUP_AUTOREGROUP_a="T")
    a, b = groups.by_name["a"], groups.by_name["b"]
    assert (a.accept_surplus, a.autoregroup, b.accept_surplus, b.autoregroup) == (True, True, False, False)


# ------------------------------------------------------------------ whole cycles
QUOTAS = {"GROUP_QUOTA_DYNAMIC_group_a": 0.5, "GROUP_QUOTA_DYNAMIC_group_b": 0.3, "GROUP_QUOTA_DYNAMIC_group_c": 0.2}
# Four submitters flooding three groups: two share group_a.
FLOOD = {"alice": "group_a", "dave": "group_a", "bob": "group_b", "carol": "group_c"}


def flooded_pool(tmp_path, slots: int, flood: dict[str, str], **knobs: object) -> tuple[Negotiator, SimSchedd, list]:
    schedd = SimSchedd("s1")
    for i, (owner, group) in enumerate(flood.items()):
        jobs = job_ads(owner, 1, slots, first_cluster=1000 * (i + 1))
        for j in jobs:
            j["AcctGroup"] = group
        schedd.jobs[owner] = jobs
    groups = config("group_a,group_b,group_c", **{**QUOTAS, **knobs})
    neg = Negotiator("test", "amqp://unused", spool=tmp_path, groups=groups)
    neg._client = SimClient([schedd])
    return neg, schedd, machine_ads(slots, kinds=1, seed=3)


def running(schedd: SimSchedd, flood: dict[str, str]) -> dict[str, int]:
    owners = {1000 * (i + 1): owner for i, owner in enumerate(flood)}
    out: dict[str, int] = {}
    for m in schedd.matched:
        owner = owners[m["Job"][0]]
        out[owner] = out.get(owner, 0) + 1
    return out


def test_a_flooded_pool_is_shared_by_the_quotas(tmp_path):
    neg, schedd, machines = flooded_pool(tmp_path, 300, FLOOD)
    stats = asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    got = running(schedd, FLOOD)
    assert stats.matches == 300
    assert got["alice"] + got["dave"] == 150 and got["bob"] == 90 and got["carol"] == 60
    assert abs(got["alice"] - got["dave"]) <= 1  # within a group, by user priority (equal here)


def test_a_group_without_demand_leaves_its_share_idle_unless_surplus_is_accepted(tmp_path):
    flood = {"alice": "group_a", "bob": "group_b"}
    neg, schedd, machines = flooded_pool(tmp_path, 300, flood)
    asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    assert running(schedd, flood) == {"alice": 150, "bob": 90}
    neg, schedd, machines = flooded_pool(tmp_path / "surplus", 300, flood, GROUP_ACCEPT_SURPLUS_group_a="true")
    asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    assert running(schedd, flood) == {"alice": 210, "bob": 90}


def test_autoregroup_lets_a_group_past_its_quota_into_what_is_left(tmp_path):
    flood = {"alice": "group_a", "bob": "group_b"}
    neg, schedd, machines = flooded_pool(tmp_path, 300, flood, GROUP_AUTOREGROUP_group_b="true")
    asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    assert running(schedd, flood) == {"alice": 150, "bob": 150}


def test_group_members_are_accounted_by_group_and_user_and_listed_with_the_groups(tmp_path):
    neg, schedd, machines = flooded_pool(tmp_path, 300, FLOOD)
    asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    assert neg.cycle.pending.usage()["group_a.alice"] == pytest.approx(75, abs=1)
    rows = asyncio.run(neg.accountant_calls.GetPriorities(None))["Priorities"]
    groups = {r["Name"]: r for r in rows if r.get("IsAccountingGroup")}
    assert set(groups) == {NONE, "group_a", "group_b", "group_c"}
    assert (groups["group_b"]["EffectiveQuota"], groups["group_b"]["SurplusPolicy"]) == (90, "no")


def test_a_full_pool_asks_no_schedd_for_requests_but_counts_the_groups_usage(tmp_path):
    schedd = SimSchedd("s1", {"alice": [{**j, "AcctGroup": "group_a"} for j in job_ads("alice", 1, 5)]})
    groups = config("group_a,group_b,group_c", **QUOTAS)
    neg = Negotiator("test", "amqp://unused", spool=tmp_path, groups=groups, preemption=PreemptionPolicy(enabled=False))
    neg._client = SimClient([schedd])
    full = [{**m, "State": "Claimed", "RemoteOwner": "bob", "AccountingGroup": "group_b.bob@s1"}
            for m in machine_ads(10, kinds=1)]
    asyncio.run(neg.cycle.run(full, schedd.submitter_ads()))
    assert "GetResourceRequests" not in schedd.calls
    assert groups.by_name["group_b"].usage == 10
