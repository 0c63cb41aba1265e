"""A pool that ran on a 3-node cluster (its durable queues quorum queues, requests waiting in the
schedd-like agent's) is started again while only one node is up: the agent says the cluster has
lost its majority and waits; when a second node returns it starts, and no request is lost."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from gridbus import bus
from gridbus.agent.threaded import AgentThread
from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from tests.helpers import wait_for
from tests.integration.broker.test_queue_reconcile import (
    WANTED,
    DurableEchoer,
    _dead_bodies,
    _left,
    _predeclare,
)
from tests.rabbit_cluster import RabbitCluster

pytestmark = [
    pytest.mark.e2e,  # a cluster of real broker nodes, as the other cluster tests
    # Opt-in: on a loaded machine the killed node's restart outlasted its 120 s while the lone node
    # paused, and the session's cluster was left broken for the tests after it. Until the test has
    # a cluster of its own and a restart it can wait out, it runs with GRIDBUS_CLUSTER_MAJORITY=1.
    pytest.mark.skipif(os.environ.get("GRIDBUS_CLUSTER_MAJORITY") != "1",
                       reason="the majority-loss restart runs with GRIDBUS_CLUSTER_MAJORITY=1 (it can leave "
                              "the shared test cluster broken on a loaded machine)"),
]


def test_a_restart_on_one_node_of_three_waits_for_the_majority(rabbit_cluster: RabbitCluster,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    first, second, third = rabbit_cluster.nodes
    mgmt = Management(first.mgmt_url)
    vhost = f"gridbus-cluster-majority-{int(time.time())}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, "guest", ".*", ".*", ".*")
    url = BrokerURL(first.url).with_vhost(vhost).url  # GRIDBUS_URL naming the one node left
    agent = DurableEchoer("mj", url, update_interval=30)
    quorum = {"x-queue-type": "quorum"}
    _predeclare(url, bus.DEAD, {**quorum, "x-max-length": 10_000, "x-overflow": "drop-head"}, ((bus.DEAD, ""),))
    _predeclare(url, bus.rpc_queue(agent.address), {**quorum, "x-dead-letter-exchange": bus.DEAD},
                ((bus.RPC, agent.address),))
    runner = AgentThread(agent)
    try:
        second.kill()
        third.kill()
        caplog.set_level(logging.ERROR, logger="gridbus.echoer")
        starting = threading.Thread(target=runner.start, kwargs={"timeout": 300})
        starting.start()
        wait_for(lambda: "lost the majority of its nodes" in caplog.text, 60, "the agent saying the majority is lost")
        assert "of its 3 nodes online" in caplog.text
        assert agent.ready is not None and not agent.ready.is_set()  # waiting, not serving, not exited
        second.start()
        starting.join(300)
        assert agent.ready.is_set(), "the agent did not start once a second node was back"
        # The requests left in its queue were undecodable: served means dead-lettered, none lost.
        wait_for(lambda: _left(_dead_bodies(url)) >= WANTED, 60, "the waiting requests served")
    finally:
        runner.stop()
        for node in (second, third):
            if not node.running():
                node.start()
        mgmt.delete_vhost(vhost)
