"""Preemption in whole cycles over a simulated pool: by user priority where PREEMPTION_REQUIREMENTS
allows, by the startd's RANK, never before MaxJobRetirementTime, and not at all when
NEGOTIATOR_CONSIDER_PREEMPTION is false."""

from __future__ import annotations

import asyncio
import time

from gridbus import classad
from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.preemption import PreemptionPolicy
from gridbus.agents.negotiator.simulate import SimClient, SimSchedd, job_ads, machine_ads

ALLOW = PreemptionPolicy(requirements="RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2")


def claimed_by(owner: str, n: int, *, started_ago: float = 7200, retirement: float = 0,
               rank: str = "0") -> list[dict]:
    now = time.time()
    out = []
    for ad in machine_ads(n, kinds=1, seed=3):
        ad.update({"State": "Claimed", "Activity": "Busy", "RemoteOwner": owner, "RemoteUser": owner,
                   "JobStart": int(now - started_ago), "EnteredCurrentState": int(now - started_ago),
                   "CurrentRank": 0.0, "MaxJobRetirementTime": retirement, "Rank": classad.ExprTree(rank),
                   "PreemptingClaimId": "pre-" + ad["ClaimId"]})
        out.append(ad)
    return out


def cycle(tmp_path, machines: list[dict], policy: PreemptionPolicy | None, bob_priority: float = 50.0,
          alice_priority: float = 0.5) -> tuple[SimSchedd, object]:
    schedd = SimSchedd("s1", {"alice": job_ads("alice", 1, 20)})
    neg = Negotiator("test", "amqp://unused", spool=tmp_path, preemption=policy)
    neg._client = SimClient([schedd])
    neg.accountant.set_priority("bob", bob_priority)
    neg.accountant.set_priority("alice", alice_priority)
    stats = asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    return schedd, stats


def test_a_better_priority_preempts_where_preemption_requirements_allows(tmp_path):
    machines = claimed_by("bob", 10)
    schedd, stats = cycle(tmp_path, machines, ALLOW)
    assert stats.matches == 10
    assert {m["ClaimId"] for m in schedd.matched} == {m["PreemptingClaimId"] for m in machines}


def test_htcondors_default_policy_waits_an_hour_of_the_claim(tmp_path):
    schedd, _ = cycle(tmp_path, claimed_by("bob", 10, started_ago=600), PreemptionPolicy())
    assert schedd.matched == []
    schedd, _ = cycle(tmp_path / "later", claimed_by("bob", 10, started_ago=7200), PreemptionPolicy())
    assert len(schedd.matched) == 10  # the same group (<none>), an hour on, 20% better priority


def test_no_preemption_for_a_priority_not_better_nor_when_turned_off(tmp_path):
    schedd, _ = cycle(tmp_path, claimed_by("bob", 10), ALLOW, bob_priority=0.5)
    assert schedd.matched == []
    schedd, _ = cycle(tmp_path / "off", claimed_by("bob", 10), PreemptionPolicy(enabled=False))
    assert schedd.matched == []


def test_a_job_within_its_retirement_time_is_not_preempted(tmp_path):
    machines = claimed_by("bob", 6, started_ago=30, retirement=60) + claimed_by("bob", 4, started_ago=30, retirement=10)
    for i, ad in enumerate(machines):
        ad["Name"], ad["ClaimId"], ad["PreemptingClaimId"] = f"slot{i}@sim", f"claim-{i}", f"pre-{i}"
    schedd, _ = cycle(tmp_path, machines, ALLOW)
    assert sorted(m["Slot"] for m in schedd.matched) == [f"slot{i}@sim" for i in range(6, 10)]


def test_the_startds_rank_preempts_whatever_the_priorities(tmp_path):
    """alice has the worse priority and PREEMPTION_REQUIREMENTS never allows; the slots' RANK
    prefers her jobs to the ones they run."""
    machines = claimed_by("bob", 10, rank='TARGET.Owner == "alice" ? 10 : 0')
    schedd, _ = cycle(tmp_path, machines, PreemptionPolicy(requirements="false"), bob_priority=0.5, alice_priority=50)
    assert len(schedd.matched) == 10
    machines = claimed_by("bob", 10, rank='TARGET.Owner == "carol" ? 10 : 0')
    schedd, _ = cycle(tmp_path / "not", machines, PreemptionPolicy(requirements="false"), bob_priority=0.5,
                      alice_priority=50)
    assert schedd.matched == []


def test_preemption_rank_picks_the_worst_priority_first(tmp_path):
    machines = claimed_by("bob", 5) + claimed_by("carol", 5)
    for i, ad in enumerate(machines):
        ad["Name"], ad["ClaimId"], ad["PreemptingClaimId"] = f"slot{i}@sim", f"claim-{i}", f"pre-{i}"
    schedd = SimSchedd("s1", {"alice": job_ads("alice", 1, 3)})
    neg = Negotiator("test", "amqp://unused", spool=tmp_path, preemption=ALLOW)
    neg._client = SimClient([schedd])
    neg.accountant.set_priority("bob", 5.0)
    neg.accountant.set_priority("carol", 50.0)
    asyncio.run(neg.cycle.run(machines, schedd.submitter_ads()))
    assert sorted(m["Slot"] for m in schedd.matched) <= [f"slot{i}@sim" for i in range(5, 10)]
    assert len(schedd.matched) == 3
