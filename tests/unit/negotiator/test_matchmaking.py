"""Two-way matchmaking over slot groups, ranks, partitionable slots, fair shares, analysis."""

from __future__ import annotations

import pytest

from gridbus.agents.negotiator.analyze import analyze, split_conjuncts
from gridbus.agents.negotiator.matchmaker import (
    REJECT_NO_MATCH,
    REJECT_PRIORITY,
    Matchmaker,
    fair_shares,
)
from gridbus.autocluster import AutoClusters
from gridbus.classad import ExprTree


def slot(name, claim="c", **attrs):
    ad = {"MyType": "Machine", "Name": name, "MyAddress": "startd@" + name.split("@")[-1], "SlotType": "Static",
          "Cpus": 1, "Memory": 2048, "Disk": 100000, "State": "Unclaimed", "ClaimId": f"{claim}-{name}",
          "Requirements": ExprTree("START"), "Start": True}
    ad.update(attrs)
    return ad


def job(req="true", rank=None, **attrs):
    ad = {"Owner": "alice", "RequestCpus": 1, "RequestMemory": 100, "RequestDisk": 10, "Requirements": ExprTree(req)}
    if rank is not None:
        ad["Rank"] = ExprTree(rank)
    ad.update(attrs)
    return ad


def test_both_requirements_must_hold():
    slots = [slot("slot1@a", HasGPU=True), slot("slot1@b", HasGPU=False),
             slot("slot1@c", HasGPU=True, Start=ExprTree('TARGET.Owner != "alice"'))]
    mm = Matchmaker(slots)
    found, reason = mm.match(job("TARGET.HasGPU"), 3)
    assert [m.slot.name for m in found] == ["slot1@a"] and reason == REJECT_NO_MATCH
    found, reason = Matchmaker(slots).match(job("TARGET.NoSuchAttr == 1"), 1)
    assert found == [] and reason == REJECT_NO_MATCH


def test_job_rank_then_slot_rank_choose_the_slot():
    slots = [slot("slot1@slow", KFlops=10, Rank=ExprTree("0")),
             slot("slot1@fast", KFlops=99, Rank=ExprTree("0")),
             slot("slot2@fast", KFlops=99, Rank=ExprTree('TARGET.Owner == "alice" ? 10 : 0'))]
    found, _ = Matchmaker(slots).match(job(rank="TARGET.KFlops"), 1)
    assert found[0].slot.name == "slot2@fast"  # job Rank ties between the fast ones; slot Rank breaks it
    found, _ = Matchmaker(slots).match(job(rank="-TARGET.KFlops"), 1)
    assert found[0].slot.name == "slot1@slow"


def test_identical_slots_are_one_group_and_cost_one_evaluation():
    slots = [slot(f"slot{i}@n{i // 4}", Arch="X86_64") for i in range(400)]
    mm = Matchmaker(slots)
    found, reason = mm.match(job('TARGET.Arch == "X86_64"'), 300)
    assert len(found) == 300 and reason is None
    assert mm.evaluations == 1
    assert len({m.slot.claim_id for m in found}) == 300
    # A job that looks at Name sees every slot apart; the Name index leaves one slot to test.
    mm = Matchmaker(slots)
    found, _ = mm.match(job('TARGET.Name == "slot7@n1"'), 5)
    assert [m.slot.name for m in found] == ["slot7@n1"] and mm.evaluations == 1
    # Unless the clause is beyond the index: then every slot is tested.
    mm = Matchmaker(slots)
    found, _ = mm.match(job('regexp("^slot7@n1$", TARGET.Name)'), 5)
    assert [m.slot.name for m in found] == ["slot7@n1"] and mm.evaluations == 400


def test_slots_taken_through_one_grouping_are_gone_for_another():
    slots = [slot(f"slot{i}@n", Arch="X86_64", Mem=i) for i in range(4)]
    mm = Matchmaker(slots)
    assert len(mm.match(job('TARGET.Arch == "X86_64"'), 3)[0]) == 3
    found, _ = mm.match(job("TARGET.Mem >= 0"), 4)
    assert len(found) == 1
    assert not mm.has_free()


def test_partitionable_slot_is_carved_while_resources_last():
    p = slot("slot1@big", SlotType="Partitionable", PartitionableSlot=True, Cpus=4, Memory=1000,
             Requirements=ExprTree("START && TARGET.RequestCpus <= MY.Cpus && TARGET.RequestMemory <= MY.Memory"))
    mm = Matchmaker([p])
    found, reason = mm.match(job(RequestCpus=1, RequestMemory=300), 10)
    assert len(found) == 3 and reason == REJECT_NO_MATCH  # memory runs out before cpus
    assert [m.slot_ad["Memory"] for m in found] == [1000, 700, 400]
    assert {m.slot.claim_id for m in found} == {"c-slot1@big"}


def test_partitionable_slot_gpus_are_carved_too():
    p = slot("slot1@gpu", SlotType="Partitionable", PartitionableSlot=True, Cpus=8, Memory=4000, GPUs=2)
    mm = Matchmaker([p])
    found, reason = mm.match(job("TARGET.GPUs >= RequestGPUs", RequestGPUs=1), 3)
    assert len(found) == 2 and reason == REJECT_NO_MATCH  # the third finds no GPU left, though cpus are
    assert [m.slot_ad["GPUs"] for m in found] == [2, 1]


def test_budget_limits_a_submitter():
    mm = Matchmaker([slot(f"slot{i}@n") for i in range(10)])
    found, reason = mm.match(job(), 10, budget=4)
    assert len(found) == 4 and reason == REJECT_PRIORITY


def test_claimed_and_dynamic_slots_are_not_matched():
    slots = [slot("slot1@a", State="Claimed"), slot("slot1_1@b", SlotType="Dynamic"),
             {k: v for k, v in slot("slot1@c").items() if k != "ClaimId"}]
    assert Matchmaker(slots).slots == []


def test_fair_shares_are_inverse_to_effective_priority():
    shares = fair_shares(4, {"a": 0.5, "b": 0.5}, {})
    assert shares == {"a": pytest.approx(2), "b": pytest.approx(2)}
    shares = fair_shares(4, {"a": 0.5, "b": 1.5}, {"a": 1})
    assert shares["a"] == pytest.approx(2) and shares["b"] == pytest.approx(1)


def test_autoclusters_group_alike_jobs_and_page():
    ac = AutoClusters()
    jobs = [job('TARGET.Memory >= MY.RequestMemory', ClusterId=1, ProcId=p, Cmd=f"/bin/x{p}") for p in range(5)]
    jobs += [job('TARGET.Memory >= MY.RequestMemory', ClusterId=2, ProcId=0, RequestMemory=999)]
    jobs += [job("TARGET.HasGPU", ClusterId=3, ProcId=p) for p in range(2)]
    groups = ac.group(jobs)
    assert [(len(ids)) for _acid, _ad, ids in groups] == [5, 1, 2]
    first = ac.page(groups, 2, -1)
    assert [r["Count"] for r in first] == [5, 1] and "Cmd" not in first[0]["Ad"]
    assert first[0]["Ad"]["RequestMemory"] == 100
    rest = ac.page(groups, 2, first[-1]["AutoClusterId"])
    assert [r["Count"] for r in rest] == [2]
    assert ac.page(groups, 2, rest[-1]["AutoClusterId"]) == []
    assert ac.id_of(jobs[0]) == groups[0][0]  # ids are stable


def test_analysis_names_the_clause_that_fails_most():
    assert split_conjuncts('(a && (b || c)) && d == "x&&y"') == ["(a && (b || c))", 'd == "x&&y"']
    assert split_conjuncts("(a && (b || c))") == ["a", "(b || c)"]
    slots = [slot(f"slot{i}@n", Memory=1024 * i, Arch="X86_64") for i in range(1, 5)]
    slots.append(slot("slot1@arm", Memory=8192, Arch="aarch64", Start=ExprTree('TARGET.Owner == "bob"')))
    out = analyze(job('TARGET.Arch == "X86_64" && TARGET.Memory >= 100000'), slots)
    assert out["Matching"] == 0 and out["RejectedByJob"] == 5 and out["RejectedBySlot"] == 1
    assert out["WorstClause"] == "TARGET.Memory >= 100000"
    assert "no slot matches" in out["Summary"]
    out = analyze(job("TARGET.Memory >= 3000"), slots)
    assert (out["Matching"], out["Available"]) == (2, 2)
