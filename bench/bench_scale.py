"""The scale test: a simulated pool of many slots and 10 schedds on this one machine.

HTCondor 8.3's scale goal was 200,000 slots in one pool and 10 schedds managing 400,000 jobs
(quoted, not measured here). This runs a real collector, negotiator and 10 schedds
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

    .venv/bin/python bench/bench_scale.py [--quick] [--slots N] [--jobs N] [--runtime S] [--startd-nice N]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEDDS = 10
CLUSTERS_PER_SCHEDD = 100  # 1,000 autoclusters in all
SLOTS_PER_STARTD = 10_000
HTCONDOR_QUOTED = {"slots (HTCondor 8.3 goal)": 200_000, "schedds": 10, "jobs": 400_000,
        "shadow memory per running job (HTCondor 8.4)": "386 KB",
        "healthy negotiation cycle of a large pool (HTCondor manual)": "on the order of ten minutes"}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _say(text: str) -> None:
    """Progress on stderr (a full-size run takes many minutes)."""
    print(time.strftime("%H:%M:%S"), text, file=sys.stderr, flush=True)


def _cycles(pool: Any) -> list[tuple[int, int, float]]:
    """(cycle, matches, seconds) of each negotiation cycle so far, from the negotiator's log."""
    text = pool.log_of("negotiator@n", "NegotiatorLog")
    return [(int(c), int(m), float(s)) for c, m, s in
            re.findall(r"cycle (\d+): (\d+) matches, [^(]*?, ([\d.]+) s \(", text)]


def _vhost() -> tuple[Any, str, str]:
    from bench_pool import _vhost as make  # the pool benchmark's vhost helper

    return make("scale")


# Seconds each `q -totals` (Summary query) took during the run, per phase; a schedd that did not
# answer within the query timeout counts as the timeout.
QUERY_TIMEOUT = 60.0
LATENCIES: dict[str, list[float]] = {}
PHASE = ["start"]


def _summary(pool: Any, schedd: str) -> dict[str, int]:
    """The schedd's totals (what `gridbus q -totals` asks for: its Summary ads)."""
    from gridbus.rpc import CallTimeout

    started = time.perf_counter()
    try:
        r = pool.call(schedd, "Query", {"Constraint": "true", "Projection": [], "Limit": -1, "Opts": 8,
                                        "Compact": False}, timeout=QUERY_TIMEOUT)
    except CallTimeout:
        LATENCIES.setdefault(PHASE[0], []).append(QUERY_TIMEOUT)
        _say(f"{schedd} did not answer q -totals within {QUERY_TIMEOUT:g} s")
        return {"Jobs": -1, "Idle": -1, "Running": -1, "Completed": -1}
    LATENCIES.setdefault(PHASE[0], []).append(time.perf_counter() - started)
    ads = r.outArgs.get("Jobs", [])
    total = next((a for a in ads if "Owner" not in a), {})
    return {k: int(total.get(k, 0)) for k in ("Jobs", "Idle", "Running", "Completed")}


def _latency_table() -> dict[str, tuple[int, float, float, float, float]]:
    """Per phase: calls, median, 90th percentile, max and mean of the q -totals latencies."""
    out = {}
    for phase, values in LATENCIES.items():
        v = sorted(values)
        out[phase] = (len(v), round(v[len(v) // 2], 3), round(v[min(len(v) - 1, len(v) * 9 // 10)], 3),
                      round(v[-1], 3), round(sum(v) / len(v), 3))
    return out


def _total(pool: Any, names: list[str], key: str) -> int | None:
    """One figure of `q -totals` summed over the schedds; None when one did not answer."""
    values = [_summary(pool, f"schedd@{n}")[key] for n in names]
    return None if min(values) < 0 else sum(values)


def run(quick: bool = False, slots: int | None = None, jobs: int | None = None, runtime: float | None = None,
        slots_per_startd: int = SLOTS_PER_STARTD, out: dict[str, Any] | None = None, workdir: str = "",
        startd_nice: int = 0) -> dict:
    """The figures, gathered into ``out`` as they come (a run that fails part way keeps them).

    ``startd_nice``: the scale-test startds run at this nice level. They stand for 200,000 slots
    on other machines; above 0, what they spend on this machine's two cpus gives way to the
    daemons measured (the collector, the negotiator, the schedds), as another machine's would."""
    from tests.e2e.pool import Pool, wait_for

    slots = slots or (20_000 if quick else 200_000)
    jobs = jobs or 2 * slots
    runtime = runtime or (60.0 if quick else 300.0)
    startds = max(1, -(-slots // slots_per_startd))
    per_startd = slots // startds
    slots = per_startd * startds
    per_cluster = max(1, jobs // (SCHEDDS * CLUSTERS_PER_SCHEDD))
    jobs = per_cluster * SCHEDDS * CLUSTERS_PER_SCHEDD
    out = out if out is not None else {}
    out.update({"slots": slots, "startds": startds, "schedds": SCHEDDS, "jobs": jobs,
                "autoclusters": SCHEDDS * CLUSTERS_PER_SCHEDD, "job_runtime_s": runtime, "startd_nice": startd_nice})
    mgmt, vhost, url = _vhost()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = workdir or tmp
        # HTCondor-like intervals, not the test harness's short ones (its 6 s claim lease expires
        # under a claim storm on a loaded machine, and the claims churn).
        # A startd of 10,000 slots answers a storm of RequestClaims in seconds, not at once: the
        # schedds wait for its answers (SHADOW_CALL_TIMEOUT) rather than giving the claims up.
        pool = Pool(url, Path(tmp), GRIDBUS_UPDATE_INTERVAL="300", GRIDBUS_NEGOTIATOR_INTERVAL="20",
                    GRIDBUS_JOB_LEASE_DURATION="2400", GRIDBUS_SCHEDD_INTERVAL="60",
                    GRIDBUS_STARTER_UPDATE_INTERVAL="300", GRIDBUS_SHADOW_CALL_TIMEOUT="300",
                    GRIDBUS_NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE="200", GRIDBUS_NEGOTIATOR_MATCH_HOLD="300",
                    # Each schedd runs a tenth of the pool: 20,000 jobs at 200,000 slots, past
                    # MAX_JOBS_RUNNING's default (10,000, HTCondor's), as an HTCondor site would set it.
                    GRIDBUS_MAX_JOBS_RUNNING=str(slots))
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
                if startd_nice:  # (nice is per thread: set before the process makes any)
                    pool.wrappers[f"startd@sim{i}"] = ["nice", "-n", str(startd_nice)]
                pool.start("startd", f"sim{i}", GRIDBUS_STARTD_SIMULATE_JOBS="true", GRIDBUS_NUM_CPUS=str(per_startd),
                           GRIDBUS_NUM_SLOTS=str(per_startd), GRIDBUS_MEMORY=str(per_startd * 2048))
            col_cpu0 = _cpu_seconds(col_pid)
            _say(f"{startds} startds of {per_startd} slots started")
            wait_for(f"{slots} slot ads", lambda: _count_machines(pool) >= slots, timeout=1800, interval=5)
            out["all_slot_ads_in_collector_s"] = round(time.monotonic() - t0, 1)
            ingest_cpu = _cpu_seconds(col_pid) - col_cpu0
            out["collector_cpu_s_for_first_ads (one ad per slot, includes the count queries)"] = round(ingest_cpu, 1)
            out["ingest_needed_ads_per_s (every slot every 300 s)"] = round(slots / 300, 1)
            out["collector_ingest_capacity_ads_per_cpu_s"] = round(slots / max(ingest_cpu, 1e-3))
            out["collector_rss_kib_per_slot_ad"] = round((_rss_kib(col_pid) - col_rss0) / slots, 2)
            _say(f"{slots} slot ads in the collector")

            # Submit: 100 clusters per schedd, each its own RequestMemory (its own autocluster).
            schedd_pids = {n: pool.procs[f"schedd@{n}"].pid for n in names}
            empty_rss = {n: _rss_kib(p) for n, p in schedd_pids.items()}
            ts = time.monotonic()
            for si, n in enumerate(names):
                for c in range(CLUSTERS_PER_SCHEDD):
                    pool.submit(f"schedd@{n}", per_cluster, cmd="/bin/sleep", args=str(runtime), owner=f"u{si}",
                                RequestMemory=16 + si * CLUSTERS_PER_SCHEDD + c)
            out["submit_s"] = round(time.monotonic() - ts, 1)
            out["submit_jobs_per_s"] = round(jobs / max(time.monotonic() - ts, 1e-3))
            idle_rss = {n: _rss_kib(p) for n, p in schedd_pids.items()}
            out["schedd_rss_kib_per_idle_job (growth)"] = round(sum(idle_rss[n] - empty_rss[n] for n in names) / jobs, 2)
            _say(f"{jobs} jobs submitted in {out['submit_s']} s")

            startd_pids = [p.pid for k, p in pool.procs.items() if k.startswith("startd@")]
            cpu0 = {"schedds": sum(_cpu_seconds(p) for p in schedd_pids.values()),
                    "startds": sum(_cpu_seconds(p) for p in startd_pids)}
            pool.start("negotiator", "n")
            tn = time.monotonic()
            PHASE[0] = "filling"

            def busy() -> int:
                running = _total(pool, names, "Running") or 0
                if int(time.monotonic()) % 30 < 5:
                    _say(f"{running} running; cycles {_cycles(pool)[-3:]}")
                return running

            wait_for("the pool to fill", lambda: busy() >= slots, timeout=3600, interval=5)
            PHASE[0] = "full"
            out["negotiator_start_to_pool_full_s"] = round(time.monotonic() - tn, 1)
            out["fill_cpu_ms_per_job"] = {k: round((sum(_cpu_seconds(p) for p in pids) - cpu0[k]) * 1000 / slots, 2)
                                          for k, pids in (("schedds", schedd_pids.values()), ("startds", startd_pids))}
            cycles = _cycles(pool)
            out["first_negotiation_cycle (matches, s)"] = cycles[0][1:] if cycles else None
            out["negotiation_cycles_to_fill (cycle, matches, s)"] = cycles
            _say(f"pool full: {out['negotiator_start_to_pool_full_s']} s; cycles {cycles}")

            # q -totals per schedd while full.
            lat = []
            for n in names:
                t = time.perf_counter()
                _summary(pool, f"schedd@{n}")
                lat.append(time.perf_counter() - t)
            out["q_totals_s_per_schedd (max, mean)"] = (round(max(lat), 3), round(sum(lat) / len(lat), 3))
            run_rss = {n: _rss_kib(p) for n, p in schedd_pids.items()}
            running = {n: max(0, _summary(pool, f"schedd@{n}")["Running"]) for n in names}
            out["schedd_kib_per_running_job"] = round(
                sum(run_rss[n] - idle_rss[n] for n in names) / max(1, sum(running.values())), 2)

            out["negotiator_rss_kib_per_slot (whole process)"] = round(_rss_kib(pool.procs["negotiator@n"].pid) / slots, 2)
            # Steady state: completions over a window once the first jobs have ended.
            PHASE[0] = "completing"
            wait_for("the first completions", lambda: (_total(pool, names, "Jobs") or jobs) < jobs,
                     timeout=runtime * 3 + 600, interval=1)
            left0 = wait_for("totals", lambda: _total(pool, names, "Jobs"), timeout=600)
            tw = time.monotonic()
            time.sleep(min(60.0, runtime))
            left1 = wait_for("totals", lambda: _total(pool, names, "Jobs"), timeout=600)
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
            out["schedd_kib_per_job (all schedds' rss / jobs submitted)"] = round(
                sum(v for k, v in rss.items() if k.startswith("schedd@")) / jobs, 2)
            out["q_totals_s_per_schedd_by_phase (calls, p50, p90, max, mean)"] = _latency_table()
            out["quoted, not measured here"] = HTCONDOR_QUOTED
        finally:
            try:
                pool.stop()
            finally:
                mgmt.delete_vhost(vhost)
    return out


# --groups-preemption: the ten submitters in three groups of 50/30/20% (dynamic quotas), half the
# pool claimed by a user of a worse priority whom PREEMPTION_REQUIREMENTS lets them preempt.
BENCH_GROUPS = {"group_a": 0.5, "group_b": 0.3, "group_c": 0.2}
BENCH_PREEMPTION_REQUIREMENTS = "RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2"


def negotiator_only(slots: int, jobs: int, groups_preemption: bool = False, claimed: float = 0.0) -> dict[str, Any]:
    """One cycle of the negotiator alone over ``slots`` simulated Machine ads and 10 simulated
    schedds (in process, answering at once) with ``jobs`` idle jobs in 1,000 autoclusters: the
    negotiator's own share of a cycle, apart from the schedds' and the broker's. ``claimed``: the
    fraction of the slots claimed by a user of a worse priority; ``groups_preemption``: with
    accounting groups and preemption on (else, as before either existed: preemption off)."""
    import asyncio

    from gridbus.agents.negotiator.agent import Negotiator
    from gridbus.agents.negotiator.groups import GroupConfig
    from gridbus.agents.negotiator.preemption import PreemptionPolicy
    from gridbus.agents.negotiator.simulate import SimClient, SimSchedd, job_ads, machine_ads

    machines = machine_ads(slots, kinds=1)
    now = time.time()
    for i, m in enumerate(machines):  # startds of SLOTS_PER_STARTD slots, as in the pool above
        host = f"sim{i // SLOTS_PER_STARTD}"
        m.update(Name=f"slot{i % SLOTS_PER_STARTD + 1}@{host}", Machine=host, MyAddress=f"startd@{host}",
                 Arch="X86_64", OpSys="LINUX", Memory=2048)
        if i < claimed * slots:
            m.update(State="Claimed", Activity="Busy", RemoteOwner="low", RemoteUser="low", JobStart=int(now - 7200),
                     PreemptingClaimId=m["ClaimId"],
                     EnteredCurrentState=int(now - 7200), CurrentRank=0.0, MaxJobRetirementTime=0)
    per_cluster = max(1, jobs // (SCHEDDS * CLUSTERS_PER_SCHEDD))
    groups = list(BENCH_GROUPS)
    schedds = []
    for k in range(SCHEDDS):
        owner = f"u{k}"
        ads = job_ads(owner, CLUSTERS_PER_SCHEDD, per_cluster)
        for j in ads:
            j["RequestMemory"] = 16 + k * CLUSTERS_PER_SCHEDD + j["ClusterId"]
            if groups_preemption:
                j["AcctGroup"] = groups[0 if k < 5 else 1 if k < 8 else 2]
        schedds.append(SimSchedd(f"s{k}", {owner: ads}))
    spent: dict[str, float] = {}
    config = GroupConfig.none()
    if groups_preemption:
        quotas = {f"GROUP_QUOTA_DYNAMIC_{g}": q for g, q in BENCH_GROUPS.items()}
        config = GroupConfig.from_knobs(groups, quotas.get)
    policy = PreemptionPolicy(groups_preemption, BENCH_PREEMPTION_REQUIREMENTS)
    with tempfile.TemporaryDirectory() as spool:
        neg = Negotiator("bench", "amqp://unused", spool=spool, groups=config, preemption=policy)
        neg.accountant.set_priority("low", 1000.0)
        client = SimClient(schedds)

        async def timed_call(address: str, method: str, args: Any = None, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return await SimClient.call(client, address, method, args, **kw)
            finally:
                spent[method] = spent.get(method, 0.0) + time.perf_counter() - t

        client.call = timed_call  # type: ignore[method-assign]
        neg._client = client  # type: ignore[assignment]
        started, cpu0 = time.perf_counter(), time.process_time()
        stats = asyncio.run(neg.cycle.run(machines, [a for s in schedds for a in s.submitter_ads()]))
        total, cpu = time.perf_counter() - started, time.process_time() - cpu0
    schedds_s = sum(spent.values())
    return {"slots": slots, "jobs": per_cluster * SCHEDDS * CLUSTERS_PER_SCHEDD, "matches": stats.matches,
            "of which preempting": sum(1 for s in schedds for m in s.matched if int(m["ClaimId"].split("-")[1]) < claimed * slots)
            if claimed else 0,
            "requests": stats.requests, "cycle_s": round(total, 2),
            "cycle_cpu_s (negotiator and simulated schedds, all threads)": round(cpu, 2),
            "negotiator_own_s (cycle less the simulated schedds' answers)": round(total - schedds_s, 2),
            "simulated_schedds_s": {k: round(v, 2) for k, v in spent.items()},
            "negotiator_rss_kib_per_slot (whole process)": round(_rss_kib(os.getpid()) / slots, 2)}


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
    p.add_argument("--startd-nice", type=int, default=0,
                   help="nice level of the scale-test startds (they stand for other machines)")
    p.add_argument("--workdir", default="", help="keep the daemons' logs here (default: a temporary directory)")
    p.add_argument("--negotiator-only", action="store_true",
                   help="one cycle of the negotiator alone, with simulated schedds in process")
    p.add_argument("--groups-preemption", action="store_true",
                   help="with --negotiator-only: a cycle with groups and preemption on beside one as before (half "
                        "the pool claimed by a worse priority), and their ratio")
    a = p.parse_args()
    if a.negotiator_only and a.groups_preemption:
        n = a.slots or 200_000
        before = negotiator_only(n, a.jobs or 2 * n, False, 0.5)
        after = negotiator_only(n, a.jobs or 2 * n, True, 0.5)
        for key in before:
            print(f"{key:58} {before[key]}  |  groups+preemption: {after[key]}")
        print(f"{'ratio of cycles, groups+preemption over as before':58} {after['cycle_s'] / before['cycle_s']:.2f}")
        sys.exit(0)
    if a.negotiator_only:
        for key, value in negotiator_only(a.slots or 200_000, a.jobs or 2 * (a.slots or 200_000)).items():
            print(f"{key:58} {value}")
        sys.exit(0)
    # A run stopped with SIGTERM still stops its daemons and deletes its vhost.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    figures: dict[str, Any] = {}
    try:
        run(a.quick, a.slots, a.jobs, a.runtime, a.slots_per_startd, figures, a.workdir, a.startd_nice)
    finally:
        if LATENCIES and "q_totals_s_per_schedd_by_phase (calls, p50, p90, max, mean)" not in figures:  # stopped
            figures["q_totals_s_per_schedd_by_phase so far (calls, p50, p90, max, mean)"] = _latency_table()
        for key, value in figures.items():
            print(f"{key:58} {value}", flush=True)
