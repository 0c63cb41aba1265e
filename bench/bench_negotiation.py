"""One negotiation cycle: 1,000 slots against 1,000 autoclusters (goal < 2 s; seed 004: 4 s on a LAN).

The ads come from a simulator (gridbus.agents.negotiator.simulate): static slots of a few hardware
kinds and jobs in distinct autoclusters; the schedds answer in process, so the figure is the
negotiator's own work (grouping, two-way matching, ranking, fair share, paging 20 requests per
round trip), not the broker's. A second run makes every slot distinct (no two alike: the worst
case for slot grouping). Run: .venv/bin/python bench/bench_negotiation.py [--quick]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridbus.agents.negotiator.agent import Negotiator  # noqa: E402
from gridbus.agents.negotiator.simulate import SimClient, SimSchedd, job_ads, machine_ads  # noqa: E402

SEED_SECONDS = 4.0  # seed 004: a 1,000-slot cycle on a LAN
GOAL_SECONDS = 2.0


def one_cycle(slots: int, autoclusters: int, kinds: int, distinct: bool) -> dict:
    machines = machine_ads(slots, kinds=kinds)
    if distinct:
        for i, m in enumerate(machines):
            m["KFlops"] = 1_000_000 + i  # every slot ranks differently: no two are alike
    owners = ("alice", "bob", "carol", "dave")
    per = autoclusters // len(owners)
    schedd = SimSchedd("sim", {o: job_ads(o, per, 1, first_cluster=1 + k * per) for k, o in enumerate(owners)})
    with tempfile.TemporaryDirectory() as spool:
        neg = Negotiator("bench", "amqp://guest:guest@127.0.0.1:5672/", spool=spool)
        neg._client = SimClient([schedd])
        started = time.perf_counter()
        stats = asyncio.run(neg.negotiate_with(machines, schedd.submitter_ads()))
        elapsed = time.perf_counter() - started
    return {"seconds": round(elapsed, 3), "matches": stats.matches, "evaluations": stats.evaluations,
            "schedd_calls": stats.schedd_calls, "requests": stats.requests}


def run(quick: bool = False) -> dict:
    slots = 200 if quick else 1000
    grouped = one_cycle(slots, slots, kinds=10, distinct=False)
    distinct = one_cycle(slots, slots, kinds=10, distinct=True)
    return {
        "slots": slots,
        "autoclusters": slots,
        "cycle_seconds_10_slot_kinds": grouped["seconds"],
        "cycle_seconds_all_slots_distinct": distinct["seconds"],
        "matches": grouped["matches"],
        "match_evaluations_grouped": grouped["evaluations"],
        "match_evaluations_distinct": distinct["evaluations"],
        "schedd_round_trips": grouped["schedd_calls"],
        "seed_004_seconds": SEED_SECONDS,
        "goal_seconds": GOAL_SECONDS,
        "ratio_seed_over_gridbus": round(SEED_SECONDS / max(grouped["seconds"], 1e-9), 1),
    }


if __name__ == "__main__":
    figures = run(quick="--quick" in sys.argv)
    for k, v in figures.items():
        print(f"{k:36} {v}")
