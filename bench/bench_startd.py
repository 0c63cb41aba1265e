"""Startd benchmark: from activation to reported exit of /bin/true on a reused claim.

Figures, all measured in the same run on this machine:

- peer, bare asyncio spawn: ``await asyncio.create_subprocess_exec("/bin/true")`` then ``wait()``,
  one after another (Python 3.11's default child watcher) -- the floor for running a process;
- starter, in process: the startd's `Starter` runs /bin/true and hands back its exit (pidfd on the
  loop), one after another (latency) and 32 at a time (spawns per second);
- end to end on the broker: a test schedd agent calls ActivateClaim on a claim it holds, the startd
  runs /bin/true and its JobReports exit report reaches the schedd, which activates the next job on
  the same claim at once; per job, one after another (ActivateClaim, one round trip per job);
- the same with the next activation riding in the answer to the exit report (what the schedd does
  for a startd whose RequestClaim answered ReportActivations): per job, the time from one exit
  report to the next at the schedd. This is the claim-reuse loop of the pool without a prefetch;
- the same with 4 jobs queued ahead on the claim (the answers' ``Ahead``, what the schedd does with
  CLAIM_PREFETCH_JOBS): the startd starts the next job at each exit, with no round trip.

The ratio printed is end-to-end per job over the bare spawn (how much the protocol adds).
Run: ``.venv/bin/python bench/bench_startd.py [--quick]``; ``run(quick)`` returns the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridbus.agent import Agent, Call, method  # noqa: E402
from gridbus.schema import Schema, builtin  # noqa: E402

BENCH_SCHEMA = builtin().merge(Schema.from_toml("""
package = "gridbus"
version = 1
[classes.benchschedd]
agent = "schedd"
desc = "The schedd side of the startd benchmark."
[classes.benchschedd.properties]
Name = { type = "sstr", index = true }
[classes.benchschedd.methods.JobReports]
desc = "exit reports"
args = [ { name = "Reports", dir = "I", type = "list" }, { name = "Unknown", dir = "O", type = "list" },
         { name = "Activations", dir = "O", type = "list" }, { name = "Ahead", dir = "O", type = "list" } ]
""", "bench_startd"))


AHEAD_DEPTH = 4  # jobs queued ahead on the claim (CLAIM_PREFETCH_JOBS' default)


class BenchSchedd(Agent):
    kind = "schedd"
    classes = ("benchschedd",)
    my_type = "Scheduler"

    def __init__(self, name: str, url: str):
        super().__init__(name, url, schema=BENCH_SCHEMA, update_interval=60)
        self.exited: asyncio.Event | None = None
        self.exit_codes: list[int] = []
        self.chain: tuple[str, int] | None = None  # (claim, jobs left) while chaining in answers
        self.exit_times: list[float] = []
        self.ahead: tuple[str, int, int, int] | None = None  # (claim, jobs to queue, queued, started)

    @method("benchschedd")
    async def JobReports(self, call: Call, Reports: list) -> dict:
        activations = []
        ahead = []
        for r in Reports:
            if self.ahead is not None and r.get("Event") == "activated" and r.get("Ahead"):
                claim, total, queued, started = self.ahead
                self.ahead = (claim, total, queued, started + 1)
            if r.get("Event") == "exit":
                self.exit_codes.append(r.get("ExitCode", -1))
                self.exit_times.append(time.perf_counter())
                if self.chain is not None and self.chain[1] > 0:
                    claim, left = self.chain
                    self.chain = (claim, left - 1)
                    activations.append({"ClaimId": claim, "JobAd": {"ClusterId": 2, "ProcId": left, "Owner": "bench",
                                                                    "Cmd": "/bin/true"}})
                if self.exited is not None:
                    self.exited.set()
        if self.ahead is not None:  # topped up to AHEAD_DEPTH queued on the claim
            claim, total, queued, started = self.ahead
            while queued < total and queued - started < AHEAD_DEPTH:
                queued += 1
                ahead.append({"ClaimId": claim, "Seq": queued, "JobAd": {"ClusterId": 3, "ProcId": queued,
                                                                         "Owner": "bench", "Cmd": "/bin/true"}})
            self.ahead = (claim, total, queued, started)
        return {"Unknown": [], **({"Activations": activations} if activations else {}), **({"Ahead": ahead} if ahead else {})}

    async def ahead_loop(self, startd: str, claim: str, n: int) -> list[float]:
        """n jobs on one claim queued ahead, AHEAD_DEPTH at a time, behind a first activation."""
        self.ahead = (claim, n, 0, 0)
        self.exit_times = []
        self.exited = asyncio.Event()
        r = await self.client.call(startd, "ActivateClaim", {"ClaimId": claim, "JobAd": {
            "ClusterId": 3, "ProcId": 0, "Owner": "bench", "Cmd": "/bin/true"}})
        if r.status:
            raise RuntimeError(f"ActivateClaim failed: {r.text}")
        deadline = time.monotonic() + 600
        while len(self.exit_times) < n + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(self.exit_times)} of {n + 1} queued jobs reported an exit")
            self.exited.clear()
            await asyncio.wait_for(self.exited.wait(), 10)
        self.ahead = None
        return [b - a for a, b in zip(self.exit_times, self.exit_times[1:], strict=False)]

    async def answer_loop(self, startd: str, claim: str, n: int) -> list[float]:
        """n jobs on one claim, each activated in the answer to the previous one's exit report."""
        self.chain = (claim, n)
        self.exit_times = []
        self.exited = asyncio.Event()
        r = await self.client.call(startd, "ActivateClaim", {"ClaimId": claim, "JobAd": {
            "ClusterId": 2, "ProcId": n + 1, "Owner": "bench", "Cmd": "/bin/true"}})
        if r.status:
            raise RuntimeError(f"ActivateClaim failed: {r.text}")
        deadline = time.monotonic() + 600
        while len(self.exit_times) < n + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(self.exit_times)} of {n + 1} chained jobs reported an exit")
            self.exited.clear()
            await asyncio.wait_for(self.exited.wait(), 10)
        self.chain = None
        return [b - a for a, b in zip(self.exit_times, self.exit_times[1:], strict=False)]

    async def reuse_loop(self, startd: str, claim: str, n: int) -> list[float]:
        """Activate /bin/true n times on one claim, each as soon as the last exit is reported."""
        job = {"ClusterId": 1, "ProcId": 0, "Owner": "bench", "Cmd": "/bin/true"}
        times = []
        for i in range(n):
            self.exited = asyncio.Event()
            t0 = time.perf_counter()
            r = await self.client.call(startd, "ActivateClaim", {"ClaimId": claim, "JobAd": {**job, "ProcId": i}})
            if r.status:
                raise RuntimeError(f"ActivateClaim failed: {r.text}")
            await asyncio.wait_for(self.exited.wait(), 10)
            times.append(time.perf_counter() - t0)
        return times


async def bare_spawn(n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec("/bin/true")
        await proc.wait()
        times.append(time.perf_counter() - t0)
    return times


async def starter_runs(execute: str, n: int, concurrency: int) -> tuple[list[float], float]:
    """Per-job latency (concurrency 1) or throughput; returns (latencies, jobs per second)."""
    from gridbus.agents.startd.accounts import RunAsPolicy, UserMap
    from gridbus.agents.startd.starter import Starter

    done: dict[str, asyncio.Future] = {}
    starter = Starter(execute, RunAsPolicy(allow_runas_owner=False, allow_root_jobs=True, user_map=UserMap.parse("*=root")),
                      on_exit=lambda job: done[job.key].set_result(time.perf_counter()))
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            key = f"c{i}"
            done[key] = loop.create_future()
            t0 = time.perf_counter()
            starter.start(key, {"Cmd": "/bin/true"}, "slot1@bench", {}, None)
            latencies.append(await done[key] - t0)
            del done[key]

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - t0
    await starter.shutdown()
    return latencies, n / elapsed


def _vhost() -> tuple[str, Any, str]:
    from gridbus.bus import BrokerURL, default_url
    from gridbus.mgmt import Management

    base = BrokerURL(os.environ.get("GRIDBUS_TEST_AMQP_URL") or default_url())
    name = f"gridbus-bench-startd-{uuid.uuid4().hex[:8]}"
    mgmt = Management.for_broker(base)
    mgmt.put_vhost(name)
    mgmt.put_permissions(name, base.user, ".*", ".*", ".*")
    return base.with_vhost(name).url, mgmt, name


def end_to_end(execute: str, n: int) -> tuple[list[float], list[float], list[float]]:
    from gridbus.agent.threaded import AgentThread
    from gridbus.agents.startd import Startd, StartdSettings

    url, mgmt, vhost = _vhost()
    try:
        settings = StartdSettings(execute=execute, num_slots=1, allow_runas_owner=False, allow_root_jobs=True,
                                 user_map=("*=root",))
        startd = Startd("bench", url, settings=settings, update_interval=60)
        schedd = BenchSchedd("bench", url)
        with AgentThread(startd), AgentThread(schedd) as st:
            slot = next(iter(startd.table.slots.values()))

            async def claim() -> str:
                r = await schedd.client.call(startd.address, "RequestClaim", {
                    "ClaimId": slot.claim_id, "JobAd": {"Owner": "bench"}, "Schedd": schedd.address, "LeaseDuration": 600})
                if r.status:
                    raise RuntimeError(f"RequestClaim failed: {r.text}")
                return r.ClaimId

            claim_id = st.call(claim())
            st.call(schedd.reuse_loop(startd.address, claim_id, min(20, n)), timeout=120)  # warm up
            times = st.call(schedd.reuse_loop(startd.address, claim_id, n), timeout=600)
            chained = st.call(schedd.answer_loop(startd.address, claim_id, n), timeout=600)
            queued = st.call(schedd.ahead_loop(startd.address, claim_id, n), timeout=600)
            if any(code != 0 for code in schedd.exit_codes):
                raise RuntimeError("a /bin/true reported a non-zero exit")
            return times, chained, queued
    finally:
        mgmt.delete_vhost(vhost)


def _ms(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"mean_ms": round(1000 * statistics.fmean(xs), 3), "p50_ms": round(1000 * xs[len(xs) // 2], 3),
            "p95_ms": round(1000 * xs[int(len(xs) * 0.95)], 3)}


def run(quick: bool = False) -> dict[str, Any]:
    n = 150 if quick else 600
    execute = tempfile.mkdtemp(prefix="gridbus-bench-startd-")
    try:
        bare = asyncio.run(bare_spawn(n))
        starter_seq, _ = asyncio.run(starter_runs(execute, n, 1))
        _, starter_rate = asyncio.run(starter_runs(execute, n * 3, 32))
        e2e, chained, queued = end_to_end(execute, n)
    finally:
        shutil.rmtree(execute, ignore_errors=True)
    bare_ms, e2e_ms, chained_ms, queued_ms = _ms(bare), _ms(e2e), _ms(chained), _ms(queued)
    return {
        "jobs": n,
        "peer_bare_asyncio_spawn": bare_ms,
        "starter_in_process": _ms(starter_seq),
        "starter_spawns_per_s_32_in_flight": round(starter_rate, 1),
        "activation_to_reported_exit_reused_claim": e2e_ms,
        "e2e_jobs_per_s_one_claim": round(1000 / e2e_ms["mean_ms"], 1),
        "ratio_e2e_over_bare_spawn": round(e2e_ms["mean_ms"] / bare_ms["mean_ms"], 2),
        "exit_to_exit_activation_in_answer_reused_claim": chained_ms,
        "answer_chained_jobs_per_s_one_claim": round(1000 / chained_ms["mean_ms"], 1),
        "ratio_answer_chained_over_bare_spawn": round(chained_ms["mean_ms"] / bare_ms["mean_ms"], 2),
        "exit_to_exit_4_queued_ahead_reused_claim": queued_ms,
        "queued_ahead_jobs_per_s_one_claim": round(1000 / queued_ms["mean_ms"], 1),
        "ratio_queued_ahead_over_bare_spawn": round(queued_ms["mean_ms"] / bare_ms["mean_ms"], 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer jobs")
    figures = run(p.parse_args().quick)
    print(f"jobs per measurement: {figures['jobs']}")
    for key in ("peer_bare_asyncio_spawn", "starter_in_process", "activation_to_reported_exit_reused_claim",
                "exit_to_exit_activation_in_answer_reused_claim", "exit_to_exit_4_queued_ahead_reused_claim"):
        f = figures[key]
        print(f"{key:45s} mean {f['mean_ms']:7.3f} ms  p50 {f['p50_ms']:7.3f} ms  p95 {f['p95_ms']:7.3f} ms")
    print(f"{'starter spawns/s (32 in flight)':45s} {figures['starter_spawns_per_s_32_in_flight']}")
    print(f"{'end-to-end jobs/s on one reused claim':45s} {figures['e2e_jobs_per_s_one_claim']}")
    print(f"{'ratio end-to-end / bare asyncio spawn':45s} {figures['ratio_e2e_over_bare_spawn']}")
    print(f"{'jobs/s on one claim, activation in answer':45s} {figures['answer_chained_jobs_per_s_one_claim']}")
    print(f"{'ratio in-answer loop / bare asyncio spawn':45s} {figures['ratio_answer_chained_over_bare_spawn']}")
    print(f"{'jobs/s on one claim, 4 queued ahead':45s} {figures['queued_ahead_jobs_per_s_one_claim']}")
    print(f"{'ratio queued-ahead loop / bare asyncio spawn':45s} {figures['ratio_queued_ahead_over_bare_spawn']}")


if __name__ == "__main__":
    main()
