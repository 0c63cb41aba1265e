"""A pool on the 3-node RabbitMQ cluster while broker nodes and daemons are killed and restarted.

One test, bounded in time: jobs flow (BATCH kept idle ahead, about 150 in all: the suite's budget
on this 2-core machine; bench/bench_cluster.py --chaos runs 1,000) while a chaos loop kills (-9)
and restarts, one at a time, the broker node the schedd is connected to, every daemon (schedd,
startd, negotiator, collector, master) and another broker node. It asserts that no job is lost or
completed twice and that every re-execution follows an eviction, and prints how long the pool took
to complete a full round of jobs after each restart (figures, not asserted: the machine is shared).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.chaos import Chaos, start_pool
from tests.e2e.pool import Pool
from tests.rabbit_cluster import RabbitCluster

pytestmark = pytest.mark.e2e


def test_jobs_survive_killed_broker_nodes_and_daemons(rabbit_cluster: RabbitCluster, cluster_pool: Pool,
                                                      tmp_path: Path) -> None:
    start_pool(cluster_pool)
    chaos = Chaos(cluster_pool, rabbit_cluster, tmp_path / "chaos.log", batch=24)
    chaos.run()
    print("\n" + "\n".join(chaos.check()))
