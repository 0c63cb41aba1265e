"""DAGMan node turnover: a chain DAG and a wide DAG of /bin/true nodes, beside the pool's plain jobs/s.

One personal pool (a collector, a negotiator, a schedd, one startd with 8 static slots), in the
same run: (1) plain jobs: one Submit of JOBS procs of /bin/true, jobs completed per second;
(2) a chain of CHAIN nodes (each the child of the one before), nodes completed per second from
`gridbus submit_dag` to the DAGMan job leaving the queue — latency-bound: every node waits for
its parent's terminated event, a submit and a match; (3) a wide DAG of WIDE independent nodes with
HTCondor's default -maxidle (1000) — throughput-bound: DAGMan submits one cluster per node.
A DAG that does not finish within its time limit is reported with the nodes it completed.

    .venv/bin/python bench/bench_dagman.py [--quick] [--chain N] [--wide N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SLOTS = 8
SUB = "executable = /bin/true\nrequest_memory = 16\nrequest_disk = 64\nqueue\n"


def _vhost() -> tuple[object, str, str]:
    from bench_pool import _vhost as make  # the pool benchmark's vhost helper

    return make("dagman")


def _dag_rate(pool, workdir: Path, name: str, text: str, nodes: int, limit: float) -> dict:
    from gridbus.eventlog import JobEventLog, JobEventType

    d = workdir / name
    d.mkdir()
    (d / "true.sub").write_text(SUB)
    dag = d / f"{name}.dag"
    dag.write_text(text)
    gridbus = str(Path(sys.executable).with_name("gridbus"))
    started = time.monotonic()
    out = subprocess.run([gridbus, "submit_dag", dag.name], cwd=d, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    cluster = int(out.stdout.split("submitted to cluster ")[1].split(".")[0])
    deadline = started + limit
    while time.monotonic() < deadline:
        args = {"Constraint": f"ClusterId == {cluster}", "Projection": ["ClusterId"], "Limit": 1}
        if not pool.call("schedd@s", "Query", args).outArgs.get("Jobs", []):
            break
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    log = Path(f"{dag}.nodes.log")
    done = 0
    if log.exists():
        done = sum(1 for e in JobEventLog(log).events(0)
                   if e.type == JobEventType.JOB_TERMINATED and e.get("ReturnValue") == 0)
    finished = done == nodes
    return {"nodes": nodes, "completed": done, "seconds": elapsed, "finished": finished,
            "nodes_per_s": done / elapsed}


def measure(jobs: int, chain: int, wide: int) -> dict:
    from tests.e2e.pool import Pool, wait_for

    mgmt, vhost, url = _vhost()
    saved = os.environ.get("GRIDBUS_URL")
    os.environ["GRIDBUS_URL"] = url
    os.environ["GRIDBUS_DAGMAN_USER_LOG_SCAN_INTERVAL"] = "1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pool = Pool(url, Path(tmp) / "pool", GRIDBUS_STARTER_UPDATE_INTERVAL="300",
                        GRIDBUS_JOB_LEASE_DURATION="60")
            try:
                pool.start("collector", "c")
                pool.start("negotiator", "n")
                pool.start("schedd", "s", GRIDBUS_SCHEDD_RUN_LOCAL_JOBS_AS_SELF="true")
                pool.start("startd", "a", GRIDBUS_NUM_CPUS=str(SLOTS), GRIDBUS_NUM_SLOTS=str(SLOTS),
                           GRIDBUS_MEMORY="8192")
                pool.wait_slots(SLOTS, timeout=60)
                started = time.monotonic()
                cluster = pool.submit("schedd@s", jobs)

                def left() -> bool:
                    args = {"Constraint": f"ClusterId == {cluster}", "Projection": ["ProcId"], "Limit": 1}
                    return not pool.call("schedd@s", "Query", args).outArgs.get("Jobs", [])

                wait_for(f"{jobs} jobs", left, timeout=600, interval=0.1)
                plain = jobs / (time.monotonic() - started)
                text = "".join(f"JOB N{i} true.sub\n" for i in range(chain))
                text += "".join(f"PARENT N{i} CHILD N{i + 1}\n" for i in range(chain - 1))
                c = _dag_rate(pool, Path(tmp), "chain", text, chain, limit=max(120.0, chain * 1.6))
                w = _dag_rate(pool, Path(tmp), "wide", "".join(f"JOB N{i} true.sub\n" for i in range(wide)),
                              wide, limit=max(120.0, wide / 15.0))
            finally:
                pool.stop()
    finally:
        mgmt.delete_vhost(vhost)  # type: ignore[attr-defined]
        if saved is None:
            os.environ.pop("GRIDBUS_URL", None)
        else:
            os.environ["GRIDBUS_URL"] = saved
    return {
        "slots": SLOTS,
        "plain_jobs": jobs,
        "plain_jobs_per_s": plain,
        "chain_nodes": chain,
        "chain_nodes_per_s": c["nodes_per_s"],
        "chain_completed": c["completed"],
        "chain_finished": c["finished"],
        "wide_nodes": wide,
        "wide_nodes_per_s": w["nodes_per_s"],
        "wide_completed": w["completed"],
        "wide_finished": w["finished"],
        "wide_over_plain": w["nodes_per_s"] / plain,
    }


def run(quick: bool = False) -> dict:
    return measure(300 if quick else 1000, 50 if quick else 1000, 500 if quick else 10000)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--chain", type=int)
    parser.add_argument("--wide", type=int)
    a = parser.parse_args()
    base = {"jobs": 300, "chain": 50, "wide": 500} if a.quick else {"jobs": 1000, "chain": 1000, "wide": 10000}
    figures = measure(a.jobs or base["jobs"], a.chain or base["chain"], a.wide or base["wide"])
    for k, v in figures.items():
        print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
