"""The schedd's responsiveness under load: the latency of a Query while 500 jobs/s complete, and
while a user-log write hangs, beside the same Query on an idle schedd, in the same run.

The schedd runs in this process with its job queue on disk (SQLite, FULL sync: every JobReports
batch is committed before it is answered) and its user logs written by the owner's shadow
process; the broker is left out, so the figures are the schedd's own: a driver plays the startds,
calling JobReports with the exits of the jobs its claims run (each claim is reused at once for the
owner's next idle job, activated by a startd stand-in that answers OK), and a client calls Query
(100 jobs, three attributes) every 20 ms. Three phases:

- idle: no exits;
- exits: 500 jobs/s complete (a JobReports batch of 10 exits every 20 ms);
- exits + stalled log: the same, while the jobs' user log is a FIFO nobody reads, so the owner's
  shadow hangs in its write (as on a hung NFS mount) for the whole phase.

    .venv/bin/python bench/bench_schedd_latency.py            # 6 s per phase
    .venv/bin/python bench/bench_schedd_latency.py --quick    # 2 s per phase
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gridbus.agent.objects import Call  # noqa: E402
from gridbus.agents.schedd.agent import Schedd  # noqa: E402
from gridbus.agents.schedd.claims import RUNNING_JOB, Claim  # noqa: E402
from gridbus.agents.schedd.owner_shadow import OwnerShadows  # noqa: E402
from gridbus.agents.schedd.settings import ScheddSettings  # noqa: E402
from gridbus.agents.startd.accounts import Account  # noqa: E402
from gridbus.rpc import MethodResult  # noqa: E402

EXITS_PER_S = 500
TICK = 0.02  # seconds between two JobReports batches, and between two Queries
CLAIMS = 40
SLOT_AD = {"Name": "slot@bench", "Requirements": True, "Memory": 4096, "Cpus": 1}


class Startd:
    """The startds' side of ActivateClaims/ReleaseClaim/Alive: OK at once."""

    async def call(self, address: str, method: str, args: dict[str, Any], timeout: float = 0) -> MethodResult:
        if method == "ActivateClaims":
            return MethodResult(0, "OK", {"Results": [{"ClaimId": a["ClaimId"], "Status": 0, "Text": "OK"}
                                                      for a in args["Activations"]]})
        return MethodResult(0, "OK", {})


def _me(owner: str) -> Account:
    return Account("me", os.geteuid(), os.getegid(), (), "/")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _phase(schedd: Schedd, seconds: float, exits: bool) -> dict[str, Any]:
    query = Call("alice", schedd.address, "Query", {}, None, False)
    report = Call("startd", schedd.address, "JobReports", {}, None, False)
    latencies: list[float] = []
    completed = 0
    stop = time.monotonic() + seconds
    per_batch = int(EXITS_PER_S * TICK)

    async def driver() -> None:
        nonlocal completed
        next_tick = time.monotonic()
        while time.monotonic() < stop:
            running = [c for c in schedd.claims.by_id.values() if c.state == RUNNING_JOB and c.job][:per_batch]
            reports = [{"ClaimId": c.claim_id, "ClusterId": c.job[0], "ProcId": c.job[1], "Event": "exit",
                        "ExitCode": 0, "Time": time.time()} for c in running if c.job]
            if reports:
                await schedd.reports.JobReports(report, Reports=reports)
                completed += len(reports)
            next_tick += TICK
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))

    async def client() -> None:
        while time.monotonic() < stop:
            started = time.monotonic()
            async for _part in schedd.queries.Query(query, Constraint="true", Projection=["ClusterId", "ProcId", "JobStatus"],
                                                    Limit=100, Opts=0, Compact=False):
                pass
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(TICK)

    began = time.monotonic()
    await asyncio.gather(client(), *([driver()] if exits else []))
    took = time.monotonic() - began
    return {"queries": len(latencies), "p50_ms": _pct(latencies, 0.5) * 1000, "p99_ms": _pct(latencies, 0.99) * 1000,
            "max_ms": max(latencies) * 1000, "mean_ms": statistics.fmean(latencies) * 1000,
            "jobs_completed_per_s": completed / took}


async def _bench(seconds: float, jobs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gridbus-latency-", dir="/tmp") as tmp:
        tmpdir = Path(tmp)
        os.chmod(tmpdir, 0o755)
        fifo = tmpdir / "stalled.log"
        os.mkfifo(fifo)
        good_log = tmpdir / "jobs.log"
        schedd = Schedd("bench", "amqp://guest:guest@127.0.0.1:1/", owner_shadows=OwnerShadows(_me),
                        settings=ScheddSettings(spool=tmpdir / "spool", queue_sync="FULL", claim_worklife=1e9,
                                                lease_duration=3600.0))
        schedd._client = Startd()  # type: ignore[assignment]  # the startds, answered in process
        await schedd.setup()

        def submit(log: Path) -> int:
            cid = schedd.queue.new_cluster_id()
            ad = {"Owner": "alice", "ClusterId": cid, "Cmd": "/bin/true", "Requirements": True, "JobUniverse": 5,
                  "QDate": int(time.time()), "Iwd": str(tmpdir), "UserLog": str(log)}
            schedd.queue.add_cluster(cid, "alice", ad, None, jobs)
            return cid

        async def start_claims(cid: int) -> None:
            for i in range(CLAIMS):
                claim = Claim(f"c{cid}-{i}", "startd@bench", f"slot{i}@bench", "alice", dict(SLOT_AD), time.time() + 1e9)
                claim.job, claim.state = (cid, i), RUNNING_JOB
                schedd.claims.add(claim)
                await schedd.state.job_started(cid, i, remote_host="startd@bench", slot=claim.slot, claim_id=claim.claim_id)
            await schedd.commits.now()

        def drop_claims() -> None:
            for claim in list(schedd.claims.by_id.values()):
                schedd.claims.drop(claim)

        try:
            out: dict[str, Any] = {}
            submit(good_log)
            out["idle"] = await _phase(schedd, seconds, exits=False)
            await start_claims(submit(good_log))
            out["exits"] = await _phase(schedd, seconds, exits=True)
            drop_claims()
            await start_claims(submit(fifo))  # the owner's shadow now hangs on the FIFO
            out["exits_and_stalled_log"] = await _phase(schedd, seconds, exits=True)
            out["user_log_still_stalled"] = not await schedd.user_logs.written(["alice"], timeout=0)
            for name in ("exits", "exits_and_stalled_log"):
                out[f"p99_ratio_{name}_over_idle"] = out[name]["p99_ms"] / out["idle"]["p99_ms"]
            return out
        finally:
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # releases the shadow's write
            try:
                drop_claims()
                await schedd.commits.close()
                await schedd.user_logs.close(timeout=10)
            finally:
                os.close(reader)


def run(quick: bool = False) -> dict[str, Any]:
    return asyncio.run(_bench(2.0 if quick else 6.0, 20_000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per phase instead of 6")
    figures = run(quick=parser.parse_args().quick)
    print(f"{'phase':<24} {'queries':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'jobs/s':>8}")
    for name in ("idle", "exits", "exits_and_stalled_log"):
        f = figures[name]
        print(f"{name:<24} {f['queries']:>8} {f['p50_ms']:>8.2f} {f['p99_ms']:>8.2f} {f['max_ms']:>8.2f} "
              f"{f['jobs_completed_per_s']:>8.0f}")
    print(f"p99 under exits / idle: {figures['p99_ratio_exits_over_idle']:.2f}; "
          f"with a stalled user log / idle: {figures['p99_ratio_exits_and_stalled_log_over_idle']:.2f}; "
          f"user log still stalled at the end: {figures['user_log_still_stalled']}")


if __name__ == "__main__":
    main()
