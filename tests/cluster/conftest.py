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
def whole_cluster(rabbit_cluster: RabbitCluster) -> Iterator[RabbitCluster]:
    """The session's cluster, whole before the test and made whole again after it, whatever its
    outcome: the nodes it took down brought back, or the cluster built anew where they do not come
    back (`RabbitCluster.heal`), so no later test inherits a broken cluster."""
    rabbit_cluster.heal()
    try:
        yield rabbit_cluster
    finally:
        healed = rabbit_cluster.heal()
        if healed.startswith("built anew"):
            print(f"the test cluster was {healed}")


@pytest.fixture
def cluster_pool(whole_cluster: RabbitCluster, request: pytest.FixtureRequest,
                 tmp_path: Path) -> Iterator[Pool]:
    mgmt = Management(whole_cluster.nodes[0].mgmt_url)
    vhost = f"gridbus-cluster-{request.node.name[:30]}-{int(time.time())}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, "guest", ".*", ".*", ".*")
    url = BrokerURL(whole_cluster.url).with_vhost(vhost).url
    pool = Pool(url, tmp_path / "pool")
    pool.mgmt, pool.vhost = mgmt, vhost  # type: ignore[attr-defined]
    try:
        yield pool
    finally:
        pool.stop()
        whole_cluster.heal()  # before the vhost goes: a node the chaos left down would keep it
        Management(whole_cluster.nodes[0].mgmt_url).delete_vhost(vhost)
