"""The 3-node RabbitMQ cluster the cluster tests share: started once per session, torn down at the
end (tests/rabbit_cluster.py). Skipped, saying why, where RabbitMQ's server scripts are missing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rabbit_cluster import ClusterUnavailable, RabbitCluster, missing


@pytest.fixture(scope="session")
def rabbit_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitCluster]:
    reason = missing()
    if reason:
        pytest.skip(f"no RabbitMQ cluster on this machine: {reason}")
    reuse = os.environ.get("GRIDBUS_TEST_CLUSTER_DIR")  # a cluster `make cluster` left running
    if reuse:
        running = RabbitCluster(reuse)
        if all(n.running() for n in running.nodes):
            yield running
            return
    base = Path(tmp_path_factory.mktemp("rabbit-cluster"))
    cluster = RabbitCluster(base)
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        cluster.stop()
        pytest.fail(f"the 3-node RabbitMQ cluster did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
