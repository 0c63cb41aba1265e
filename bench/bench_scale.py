"""The scale test: a simulated pool of many slots and 10 schedds on this one machine.

HTCondor 8.3's scale goal was 200,000 slots in one pool and 10 schedds managing 400,000 jobs
(seed 004, quoted, not measured here). This runs a real collector, negotiator and 10 schedds
against scale-test startds (STARTD_SIMULATE_JOBS: real startds whose jobs run as timers), each
advertising SLOTS_PER_STARTD static slots in batched ads. The jobs are sleeps in 1,000
autoclusters (100 clusters per schedd, each with its own RequestMemory), one owner per schedd.

Measured, in one run:

- slot ads: how long until the collector holds every slot; the collector's ingest rate needed
  for every slot updating every 300 s (slots / 300) beside the ingest it did;
- the first negotiation cycle (its duration and matches, from the negotiator's ad) and the time
  from the first submit until every slot is busy;
- `q -totals` (the Summary query it makes) per schedd, while the pool is full;
- steady-state completions per second (jobs that finished in a window once the first ones end);
- resident memory of each daemon: per slot (collector, startds, negotiator) and per job (schedd),
  and the schedd's memory per running job (its RSS with its jobs running less its RSS with the
  same jobs idle, over the jobs running).

    .venv/bin/python bench/bench_scale.py [--quick] [--slots N] [--jobs N] [--runtime S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEDDS = 10
CLUSTERS_PER_SCHEDD = 100  # 1,000 autoclusters in all
SLOTS_PER_STARTD = 10_000
SEED = {"slots (HTCondor 8.3 goal, seed 004)": 200_000, "schedds": 10, "jobs": 400_000,
        "shadow memory per running job (HTCondor 8.4, seed 004)": "386 KB",
        "healthy negotiation cycle of a large pool (HTCondor manual)": "on the order of ten minutes"}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _vhost() -> tuple[Any, str, str]:
    from gridbus.bus import BrokerURL, default_url
    from gridbus.mgmt import Management

    base = BrokerURL(os.environ.get("GRIDBUS_BENCH_AMQP_URL") or default_url())
    mgmt = Management.for_broker(base)
    vhost = f"gridbus-bench-scale-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, base.user, ".*", ".*", ".*")
    return mgmt, vhost, base.with_vhost(vhost).url


def _summary(pool: Any, schedd: str) -> dict[str, int]:
    """The schedd's totals (what `gridbus q -totals` asks for: its Summary ads)."""
    r = pool.call(schedd, "Query", {"Constraint": "true", "Projection": [], "Limit": -1, "Opts": 8, "Compact": False})
    ads = r.outArgs.get("Jobs", [])
    total = next((a for a in ads if "Owner" not in a), {})
    return {k: int(total.get(k, 0)) for k in ("Jobs", "Idle", "Running", "Completed")}


def run(quick: bool = False, slots: int | None = None, jobs: int | None = None, runtime: float | None = None,
        slots_per_startd: int = SLOTS_PER_STARTD) -> dict:
    from tests.e2e.pool import Pool, wait_for

    slots = slots or (20_000 if quick else 200_000)
    jobs = jobs or 2 * slots
    runtime = runtime or (60.0 if quick else 300.0)
    startds = max(1, -(-slots // slots_per_startd))
    per_startd = slots // startds
    slots = per_startd * startds
    per_cluster = max(1, jobs // (SCHEDDS * CLUSTERS_PER_SCHEDD))
    jobs = per_cluster * SCHEDDS * CLUSTERS_PER_SCHEDD
    out: dict[str, Any] = {"slots": slots, "startds": startds, "schedds": SCHEDDS, "jobs": jobs,
                           "autoclusters": SCHEDDS * CLUSTERS_PER_SCHEDD, "job_runtime_s": runtime}
    mgmt, vhost, url = _vhost()
    with tempfile.TemporaryDirectory() as tmp:
        # HTCondor-like intervals, not the test harness's short ones (its 6 s claim lease expires
        # under a claim storm on a loaded machine, and the claims churn).
        pool = Pool(url, Path(tmp), GRIDBUS_UPDATE_INTERVAL="300", GRIDBUS_NEGOTIATOR_INTERVAL="20",
                    GRIDBUS_JOB_LEASE_DURATION="1200", GRIDBUS_SCHEDD_INTERVAL="60",
                    GRIDBUS_STARTER_UPDATE_INTERVAL="300")
        try:
            pool.start("collector", "c")
            names = [f"s{i}" for i in range(SCHEDDS)]
            for n in names:
                pool.start("schedd", n)
            pool.wait_serving("collector@c", *(f"schedd@{n}" for n in names), timeout=120)
            col_pid = pool.procs["collector@c"].pid
            col_rss0 = _rss_kib(col_pid)
            t0 = time.monotonic()
            for i in range(startds):
                pool.start("startd", f"sim{i}", GRIDBUS_STARTD_SIMULATE_JOBS="true", GRIDBUS_NUM_CPUS=str(per_startd),
                           GRIDBUS_NUM_SLOTS=str(per_startd), GRIDBUS_MEMORY=str(per_startd * 2048))
            col_cpu0 = _cpu_seconds(col_pid)
            wait_for(f"{slots} slot ads", lambda: _count_machines(pool) >= slots, timeout=1800, interval=5)
            out["all_slot_ads_in_collector_s"] = round(time.monotonic() - t0, 1)
            out["collector_cpu_s_for_first_ads"] = round(_cpu_seconds(col_pid) - col_cpu0, 1)
            out["ingest_needed_ads_per_s (every slot every 300 s)"] = round(slots / 300, 1)
            out["collector_cpu_s_per_300s_of_updates (one ad per slot)"] = out["collector_cpu_s_for_first_ads"]

            # Submit: 100 clusters per schedd, each its own RequestMemory (its own autocluster).
            ts = time.monotonic()
            for si, n in enumerate(names):
                for c in range(CLUSTERS_PER_SCHEDD):
                    pool.submit(f"schedd@{n}", per_cluster, cmd="/bin/sleep", args=str(runtime), owner=f"u{si}",
                                RequestMemory=16 + si * CLUSTERS_PER_SCHEDD + c)
            out["submit_s"] = round(time.monotonic() - ts, 1)
            schedd_pids = {n: pool.procs[f"schedd@{n}"].pid for n in names}
            idle_rss = {n: _rss_kib(p) for n, p in schedd_pids.items()}
            out["schedd_rss_kib_per_idle_job"] = round(sum(idle_rss.values()) / jobs, 2)

            pool.start("negotiator", "n")
            tn = time.monotonic()

            def busy() -> int:
                return sum(_summary(pool, f"schedd@{n}")["Running"] for n in names)

            wait_for("the pool to fill", lambda: busy() >= slots, timeout=1800, interval=2)
            out["negotiator_start_to_pool_full_s"] = round(time.monotonic() - tn, 1)
            neg = pool.negotiator_stats()
            out["last_cycle_when_full (the negotiator's ad)"] = {k: neg.get(f"LastNegotiationCycle{k}0") for k in ("Duration", "Matches", "ScheddCalls")}
            out["negotiation_cycles_so_far"] = neg.get("NegotiationCycles")

            # q -totals per schedd while full.
            lat = []
            for n in names:
                t = time.perf_counter()
                _summary(pool, f"schedd@{n}")
                lat.append(time.perf_counter() - t)
            out["q_totals_s_per_schedd (max, mean)"] = (round(max(lat), 3), round(sum(lat) / len(lat), 3))
            run_rss = {n: _rss_kib(p) for n, p in schedd_pids.items()}
            running = {n: _summary(pool, f"schedd@{n}")["Running"] for n in names}
            out["schedd_kib_per_running_job"] = round(
                sum(run_rss[n] - idle_rss[n] for n in names) / max(1, sum(running.values())), 2)

            # Steady state: completions over a window once the first jobs have ended.
            wait_for("the first completions", lambda: sum(_summary(pool, f"schedd@{n}")["Jobs"] for n in names) < jobs,
                     timeout=runtime * 3 + 600, interval=1)
            left0, tw = sum(_summary(pool, f"schedd@{n}")["Jobs"] for n in names), time.monotonic()
            time.sleep(min(60.0, runtime))
            left1 = sum(_summary(pool, f"schedd@{n}")["Jobs"] for n in names)
            out["steady_completions_per_s"] = round((left0 - left1) / (time.monotonic() - tw), 1)
            lat = []
            for n in names:
                t = time.perf_counter()
                _summary(pool, f"schedd@{n}")
                lat.append(time.perf_counter() - t)
            out["q_totals_s_per_schedd_while_completing (max, mean)"] = (round(max(lat), 3), round(sum(lat) / len(lat), 3))

            rss = {name: _rss_kib(p.pid) for name, p in pool.procs.items()}
            out["collector_kib_per_slot"] = round((rss["collector@c"] - col_rss0) / slots, 2)
            out["startd_kib_per_slot"] = round(sum(v for k, v in rss.items() if k.startswith("startd@")) / slots, 2)
            out["negotiator_kib_per_slot"] = round(rss["negotiator@n"] / slots, 2)
            out["schedd_kib_per_job (all schedds' rss / jobs submitted)"] = round(
                sum(v for k, v in rss.items() if k.startswith("schedd@")) / jobs, 2)
            out["quoted, not measured here"] = SEED
        finally:
            pool.stop()
            mgmt.delete_vhost(vhost)
    return out


def _count_machines(pool: Any) -> int:
    r = pool.call("collector@c", "Query", {"AdTypes": ["Machine"], "Constraint": "true", "Projection": ["Name"],
                                            "Limit": -1}, timeout=120)
    return len(r.outArgs.get("Ads", []))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--slots", type=int)
    p.add_argument("--jobs", type=int)
    p.add_argument("--runtime", type=float)
    p.add_argument("--slots-per-startd", type=int, default=SLOTS_PER_STARTD)
    a = p.parse_args()
    for key, value in run(a.quick, a.slots, a.jobs, a.runtime, a.slots_per_startd).items():
        print(f"{key:58} {value}")
