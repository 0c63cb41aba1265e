"""The 3-node RabbitMQ cluster the cluster tests share: started once per session, torn down at the
end (tests/rabbit_cluster.py). Skipped, saying why, where RabbitMQ's server scripts are missing."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from tests.e2e.pool import Pool
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


@pytest.fixture
def cluster_pool(rabbit_cluster: RabbitCluster, request: pytest.FixtureRequest,
                 tmp_path: Path) -> Iterator[Pool]:
    mgmt = Management(rabbit_cluster.nodes[0].mgmt_url)
    vhost = f"gridbus-cluster-{request.node.name[:30]}-{int(time.time())}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, "guest", ".*", ".*", ".*")
    url = BrokerURL(rabbit_cluster.url).with_vhost(vhost).url
    pool = Pool(url, tmp_path / "pool")
    pool.mgmt, pool.vhost = mgmt, vhost  # type: ignore[attr-defined]
    try:
        yield pool
    finally:
        pool.stop()
        for node in rabbit_cluster.nodes:  # a node the chaos left down would fail the next test
            if not node.running():
                node.start()
        Management(rabbit_cluster.nodes[0].mgmt_url).delete_vhost(vhost)
