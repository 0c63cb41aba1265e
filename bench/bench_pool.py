"""Pool throughput: 10,000 /bin/true jobs on a personal pool, and Celery running the same work,
at equal concurrency (2 slots against a prefork worker of 2, 8 slots against prefork 8).

gridbus: a collector, a negotiator, a schedd and one startd (N static slots), each a process on
a vhost of its own, with the product's default settings (not the test pool's second-long
intervals and unsynced job queue: `product_defaults`); one Submit of 10,000 procs; the rate is jobs completed per second from the
Submit to the last job's terminated event in the user log, as condor_wait sees it (all of it:
matching, claiming, claim reuse, SQLite commits, the user log). Celery (the peer, in the same run, on the same broker, a vhost of its own): a prefork
worker with N processes and the rpc result backend runs a task that runs /bin/true 10,000 times;
the rate is from the first ``delay()`` to the last result. The floor, in the same run: bare
``subprocess.Popen("/bin/true")`` then ``wait()`` in 2 threads (spawns per second on this
machine with nothing else around). Goals: at least 2 x Celery at both concurrencies and at
least half the bare spawn rate. The cpu each daemon spent per job is printed beside the rates,
and the whole machine's (every process, the broker, the jobs and the kernel) for each system.

gridbus runs each job in cgroups of its own (as HTCondor does where it can); Celery runs none.
Each concurrency is also run with the startd's cgroups off (BASE_CGROUP empty), the peer's own
setting, and printed beside; the goals are judged on the default, cgroups on.

    .venv/bin/python bench/bench_pool.py [--quick] [--slots 2,8] [--popen] [--rounds N] [--jobs N]

``--popen``: the startd starts jobs with subprocess.Popen instead of its fast spawn
(STARTER_FAST_SPAWN false), to measure the one against the other. ``--rounds N``: every figure
N times, the peer and the floor measured again beside gridbus in each round; the rates and ratios
printed are the medians (the cpu and message figures the last round's), and each round's ratios
are listed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gridbus.eventlog import JobEventType  # noqa: E402

HTCONDOR_2011_RATE = 95.0  # jobs/s, HTCondor's schedd in HTCondor's 2011 schedd job-rate report
SLOTS = 8


def _vhost(tag: str) -> tuple[object, str, str]:
    from gridbus.bus import BrokerURL, default_url
    from gridbus.mgmt import Management

    base = BrokerURL(os.environ.get("GRIDBUS_BENCH_AMQP_URL") or default_url())
    mgmt = Management.for_broker(base)
    vhost = f"gridbus-bench-{tag}-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, base.user, ".*", ".*", ".*")
    return mgmt, vhost, base.with_vhost(vhost).url


def _cpu_seconds(pid: int) -> float:
    """User + system cpu of a process so far (its children's not included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_cpu_seconds() -> float:
    """Busy cpu seconds of the whole machine so far (every process and the kernel: /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def bare_spawn_rate(jobs: int, threads: int = 2) -> float:
    """/bin/true spawned and waited for in ``threads`` threads: spawns per second."""
    from concurrent.futures import ThreadPoolExecutor

    def spawn(n: int) -> None:
        for _ in range(n):
            subprocess.Popen(["/bin/true"]).wait()

    started = time.monotonic()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(spawn, [jobs // threads] * threads))
    return (jobs // threads * threads) / (time.monotonic() - started)


def _messages(mgmt, vhost: str) -> dict[str, tuple[int, int]]:
    """Messages published and delivered so far, per daemon (its connection's name), from the
    broker's channel statistics."""
    names = {c["name"]: str((c.get("client_properties") or {}).get("connection_name", "?"))
             for c in mgmt.connections(vhost)}
    out: dict[str, tuple[int, int]] = {}
    for ch in mgmt.request("GET", f"/vhosts/{mgmt.q(vhost)}/channels"):
        who = names.get((ch.get("connection_details") or {}).get("name", ""), "?")
        who = who.split()[-1].split("@")[0] if who != "?" else who
        st = ch.get("message_stats") or {}
        pub, got = out.get(who, (0, 0))
        out[who] = (pub + st.get("publish", 0), got + st.get("deliver_get", 0))
    return out


def _message_rates(mgmt, vhost: str, before: dict, jobs: int) -> dict[str, dict[str, float]]:
    # The broker samples its statistics every 5 s: wait for the sample that covers the run.
    time.sleep(6)
    after = _messages(mgmt, vhost)
    return {who: {"published": round((pub - before.get(who, (0, 0))[0]) / jobs, 3),
                  "delivered": round((got - before.get(who, (0, 0))[1]) / jobs, 3)}
            for who, (pub, got) in sorted(after.items()) if who in ("collector", "negotiator", "schedd", "startd")}


class _TerminatedCounter:
    """The job terminated events in a user log, counted as the log grows: their header lines
    only (gridbus.eventlog.JobEventLog would parse every event, in the cpu this benchmark
    measures)."""

    HEADER = f"{JobEventType.JOB_TERMINATED:03d} (".encode()

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.tail = b""
        self.seen = 0

    def count(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return 0
        self.offset += len(data)
        text = self.tail + data
        lines = text.split(b"\n")
        self.tail = lines.pop()  # (a line not yet ended)
        self.seen += sum(1 for line in lines if line.startswith(self.HEADER))
        return self.seen


def product_defaults() -> dict[str, str]:
    """The test pool's settings (tests/e2e/pool.py: intervals of a second, the job queue synced
    NORMAL) put back to the product's defaults, as a pool configured by nobody runs: the
    benchmark measures gridbus as shipped, not as its tests speed it up. Only running root's
    jobs stays (the benchmark runs as root; its jobs are /bin/true)."""
    import gridbus.agents.collector  # noqa: F401 - each daemon's knobs, declared on import
    import gridbus.agents.negotiator.main  # noqa: F401
    import gridbus.agents.schedd.settings  # noqa: F401
    import gridbus.agents.startd.settings  # noqa: F401
    from gridbus.config import declared, env_name
    from tests.e2e.pool import BASE_ENV

    knobs = {k.env: k for k in declared().values()}
    out = {}
    for var in BASE_ENV:
        if var in (env_name("STARTER_ALLOW_ROOT_JOBS"), env_name("USER_MAP")):
            continue
        default = knobs[var].default
        out[var] = str(default).lower() if isinstance(default, bool) else str(default)
    return out


def gridbus_rate(jobs: int, slots: int = SLOTS, cgroups: bool = True, fast_spawn: bool = True,
                 schedd_env: dict[str, str] | None = None) -> dict:
    """``schedd_env``: knobs of the schedd's own (bench_durable_events.py: SCHEDD_DURABLE_EVENTS)."""
    from tests.e2e.pool import Pool, wait_for

    mgmt, vhost, url = _vhost("pool")
    with tempfile.TemporaryDirectory() as tmp:
        pool = Pool(url, Path(tmp), **product_defaults())
        try:
            pool.start("collector", "c")
            pool.start("negotiator", "n")
            pool.start("schedd", "s", **(schedd_env or {}))
            off = {} if cgroups else {"GRIDBUS_BASE_CGROUP": ""}
            if not fast_spawn:
                off["GRIDBUS_STARTER_FAST_SPAWN"] = "false"
            pool.start("startd", "a", GRIDBUS_NUM_CPUS=str(slots), GRIDBUS_NUM_SLOTS=str(slots), GRIDBUS_MEMORY="8192",
                       **off)
            pool.wait_slots(slots, timeout=60)
            log = Path(tmp) / "bench.log"
            time.sleep(6)  # the broker's statistics sample of the idle pool
            msgs0 = _messages(mgmt, vhost)
            cpu0 = {name: _cpu_seconds(proc.pid) for name, proc in pool.procs.items()}
            machine0 = _machine_cpu_seconds()
            started = time.monotonic()
            cluster = pool.submit("schedd@s", jobs, log=log)

            terminated = _TerminatedCounter(log)
            # Done when the user log holds every job's terminated event (as condor_wait reads
            # it): no probe loads the schedd it measures, and the log is read where it grew.
            wait_for(f"{jobs} jobs to terminate", lambda: terminated.count() >= jobs, timeout=600, interval=0.01)
            elapsed = time.monotonic() - started
            machine = _machine_cpu_seconds() - machine0
            cpu = {name.split("@")[0]: _cpu_seconds(proc.pid) - cpu0[name] for name, proc in pool.procs.items()}

            def left() -> bool:
                args = {"Constraint": f"ClusterId == {cluster}", "Projection": ["ProcId"], "Limit": 1}
                return not pool.call("schedd@s", "Query", args).outArgs.get("Jobs", [])

            wait_for(f"{jobs} jobs to leave the queue", left, timeout=60, interval=0.1)  # (not timed)
            hist = pool.history("schedd@s", f"ClusterId == {cluster}", ["ExitCode"])
            ok = sum(1 for j in hist if j.get("ExitCode") == 0)
            stats = pool.negotiator_stats()
            msgs = _message_rates(mgmt, vhost, msgs0, jobs)
        finally:
            pool.stop()
            mgmt.delete_vhost(vhost)
    return {"seconds": elapsed, "rate": jobs / elapsed, "completed_ok": ok, "matches": stats.get("TotalMatches"),
            "cpu_ms_per_job": {k: round(v / jobs * 1000, 3) for k, v in cpu.items()}, "messages_per_job": msgs,
            "machine_cpu_ms_per_job": round(machine / jobs * 1000, 2)}


CELERY_APP = textwrap.dedent(
    """
    import subprocess
    from celery import Celery
    app = Celery("benchpool")
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"],
                    worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)

    @app.task
    def run_true():
        return subprocess.run(["/bin/true"]).returncode
    """
)


def celery_rate(jobs: int, concurrency: int = 2) -> dict:
    mgmt, vhost, url = _vhost("celery")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "benchpool.py").write_text(CELERY_APP)
        env = {**os.environ, "PYTHONPATH": tmp, "CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": "rpc://"}
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "benchpool", "worker", "--pool=prefork", f"--concurrency={concurrency}",
             "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            sys.path.insert(0, tmp)
            import benchpool  # type: ignore[import-not-found]

            benchpool.app.conf.update(broker_url=url, result_backend="rpc://")
            # Warm up: the worker is up when one task comes back.
            benchpool.run_true.delay().get(timeout=60)
            machine0 = _machine_cpu_seconds()
            started = time.monotonic()
            results = [benchpool.run_true.delay() for _ in range(jobs)]
            codes = [r.get(timeout=600) for r in results]
            elapsed = time.monotonic() - started
            machine = _machine_cpu_seconds() - machine0
        finally:
            worker.terminate()
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()
            sys.path.remove(tmp)
            sys.modules.pop("benchpool", None)
            mgmt.delete_vhost(vhost)
    return {"seconds": elapsed, "rate": jobs / elapsed, "completed_ok": sum(1 for c in codes if c == 0),
            "machine_cpu_ms_per_job": round(machine / jobs * 1000, 2)}


def _spawn_name(fast_spawn: bool) -> str:
    from gridbus.agents.startd import spawn

    if not fast_spawn or not spawn.AVAILABLE:
        return "subprocess.Popen"
    return "fast (agents/startd/_spawn.c, " + ("a child beside the startd)" if spawn.CONCURRENT else "vfork)")


JOBS = 10_000  # per figure: at 2,000 the pool's start (the Submit, the first match and claims) was a tenth of a run


def run(quick: bool = False, slot_counts: tuple[int, ...] = (2, 8), fast_spawn: bool = True, rounds: int = 1,
        jobs: int | None = None) -> dict:
    """Each figure measured ``rounds`` times, the peer and the floor beside it in each round (this
    machine's speed drifts by a fifth over minutes: a ratio is taken within a round, where both
    sides met the same machine); with more than one round, medians, and each round's ratios."""
    jobs = jobs or (300 if quick else JOBS)
    out: dict = {"jobs": jobs, "rounds": rounds, "startd_spawn": _spawn_name(fast_spawn)}
    met = True
    for n in slot_counts:
        per: list[dict] = []
        for _ in range(rounds):
            bare = bare_spawn_rate(jobs)
            g = gridbus_rate(jobs, n, fast_spawn=fast_spawn)
            g_off = gridbus_rate(jobs, n, cgroups=False, fast_spawn=fast_spawn)
            c = celery_rate(jobs, n)
            per.append({"bare": bare, "g": g, "g_off": g_off, "c": c, "ratio": g["rate"] / c["rate"],
                        "ratio_off": g_off["rate"] / c["rate"], "ratio_bare": g["rate"] / bare})
        last = per[-1]

        def med(key: str, sub: str | None = None, per: list[dict] = per) -> float:
            return statistics.median(r[key][sub] if sub else r[key] for r in per)

        ratio, ratio_bare = med("ratio"), med("ratio_bare")
        out.update({
            f"bare_spawns_per_s ({n}: Popen /bin/true, 2 threads)": round(med("bare"), 1),
            f"gridbus_jobs_per_s ({n} static slots)": round(med("g", "rate"), 1),
            f"gridbus_completed_exit_0 ({n} slots)": min(r["g"]["completed_ok"] for r in per),
            f"gridbus_daemon_cpu_ms_per_job ({n} slots)": last["g"]["cpu_ms_per_job"],
            f"gridbus_daemon_messages_per_job ({n} slots)": last["g"]["messages_per_job"],
            f"gridbus_jobs_per_s ({n} slots, cgroups off)": round(med("g_off", "rate"), 1),
            f"gridbus_daemon_cpu_ms_per_job ({n} slots, cgroups off)": last["g_off"]["cpu_ms_per_job"],
            f"machine_cpu_ms_per_job ({n}: gridbus / cgroups off / celery)":
                f'{last["g"]["machine_cpu_ms_per_job"]} / {last["g_off"]["machine_cpu_ms_per_job"]} / '
                f'{last["c"]["machine_cpu_ms_per_job"]}',
            f"celery_jobs_per_s (prefork {n}, rpc backend)": round(med("c", "rate"), 1),
            f"ratio_gridbus_over_celery ({n})": round(ratio, 2),
            f"ratio_gridbus_over_celery ({n}, cgroups off)": round(med("ratio_off"), 2),
            f"ratio_gridbus_over_bare_spawn ({n})": round(ratio_bare, 3),
        })
        if rounds > 1:
            # (three decimals for the floor: a round printed 0.50 may be under half)
            out[f"each round's ratios over celery / bare spawn ({n})"] = " ".join(
                f'{r["ratio"]:.2f}/{r["ratio_bare"]:.3f}' for r in per)
        met = met and ratio >= 2 and ratio_bare >= 0.5
    out["htcondor_2011_jobs_per_s (quoted, not measured here)"] = HTCONDOR_2011_RATE
    out["goals_met (>= 2 x celery at each, >= bare spawn / 2)"] = met
    return out


def _slot_counts(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs (a smoke run)")
    parser.add_argument("--slots", type=_slot_counts, default=(2, 8), metavar="N,M",
                        help="the concurrencies to measure (default 2,8)")
    parser.add_argument("--popen", action="store_true", help="the startd spawns with Popen, not the fast spawn")
    parser.add_argument("--rounds", type=int, default=1, help="measure each figure N times; print medians")
    parser.add_argument("--jobs", type=int, default=None, help=f"jobs per figure (default {JOBS:,}; --quick: 300)")
    args = parser.parse_args()
    for key, value in run(quick=args.quick, slot_counts=args.slots, fast_spawn=not args.popen,
                          rounds=args.rounds, jobs=args.jobs).items():
        print(f"{key:56} {value}")
