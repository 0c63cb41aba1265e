"""Pool throughput on a 3-node RabbitMQ cluster beside a single node, in the same run.

The pool benchmark's gridbus run (bench_pool.gridbus_rate: one Submit of /bin/true jobs, 8 static
slots, jobs completed per second from the Submit to the last completion) twice: on the machine's
broker (one node, classic queues), and on a 3-node cluster made for the run on this machine
(tests/rabbit_cluster.py: GRIDBUS_URL lists the three nodes, so the durable queues are quorum
queues replicated on all three, and job events are confirmed). The ratio is the cost of
replication. With ``--chaos`` it also runs the cluster chaos loop with 1,000 jobs (the suite's
test runs about 150): broker nodes and daemons killed and restarted one at a time under load.

    .venv/bin/python bench/bench_cluster.py [--quick] [--chaos]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _rate_on(url: str | None, jobs: int) -> dict:
    from bench_pool import gridbus_rate

    old = os.environ.get("GRIDBUS_BENCH_AMQP_URL")
    if url is not None:
        os.environ["GRIDBUS_BENCH_AMQP_URL"] = url
    try:
        return gridbus_rate(jobs)
    finally:
        if old is None:
            os.environ.pop("GRIDBUS_BENCH_AMQP_URL", None)
        else:
            os.environ["GRIDBUS_BENCH_AMQP_URL"] = old


def chaos(cluster, jobs: int, tmp: Path) -> list[str]:  # type: ignore[no-untyped-def]
    from gridbus.bus import BrokerURL
    from gridbus.mgmt import Management
    from tests.cluster.chaos import Chaos, start_pool
    from tests.e2e.pool import Pool

    mgmt = Management(cluster.nodes[0].mgmt_url)
    vhost = f"gridbus-bench-chaos-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, "guest", ".*", ".*", ".*")
    pool = Pool(BrokerURL(cluster.url).with_vhost(vhost).url, tmp / "chaos")
    pool.mgmt, pool.vhost = mgmt, vhost  # type: ignore[attr-defined]
    try:
        start_pool(pool)
        run = Chaos(pool, cluster, tmp / "chaos.log", batch=jobs, total=jobs)
        run.run()
        return run.check()
    finally:
        pool.stop()
        cluster.heal()
        mgmt.delete_vhost(vhost)


def run(quick: bool = False, with_chaos: bool = False) -> dict:
    from tests.rabbit_cluster import RabbitCluster

    jobs = 300 if quick else 1000
    single = _rate_on(None, jobs)
    with tempfile.TemporaryDirectory() as tmp:
        cluster = RabbitCluster(Path(tmp) / "cluster").start()
        try:
            replicated = _rate_on(cluster.url, jobs)
            report = chaos(cluster, 1000, Path(tmp)) if with_chaos else None
        finally:
            cluster.stop()
    figures = {
        "jobs": jobs,
        "single_node_jobs_per_s (classic queues)": round(single["rate"], 1),
        "cluster_3_nodes_jobs_per_s (quorum queues, confirmed events)": round(replicated["rate"], 1),
        "ratio_cluster_over_single": round(replicated["rate"] / single["rate"], 2),
        "single_node_completed_exit_0": single["completed_ok"],
        "cluster_completed_exit_0": replicated["completed_ok"],
        "single_node_daemon_cpu_ms_per_job": single["cpu_ms_per_job"],
        "cluster_daemon_cpu_ms_per_job": replicated["cpu_ms_per_job"],
    }
    if report is not None:
        figures["chaos_1000_jobs"] = " | ".join(line.strip() for line in report)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs (a smoke run)")
    parser.add_argument("--chaos", action="store_true", help="also run 1,000 jobs while nodes are stopped and started")
    args = parser.parse_args()
    for key, value in run(quick=args.quick, with_chaos=args.chaos).items():
        print(f"{key:60} {value}")
