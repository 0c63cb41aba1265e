"""A pool that ran on a 3-node cluster (its durable queues quorum queues, requests waiting in the
schedd-like agent's) is started again while only one node is up: the agent says the cluster has
lost its majority and waits; when a second node returns it starts, and no request is lost."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

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
from tests.rabbit_cluster import Node, RabbitCluster

pytestmark = pytest.mark.e2e  # a cluster of real broker nodes, as the other cluster tests


def test_a_restart_on_one_node_of_three_waits_for_the_majority(whole_cluster: RabbitCluster,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    first, second, third = whole_cluster.nodes
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
    starting = threading.Thread(target=runner.start, kwargs={"timeout": 300})
    try:
        # The other two nodes down, RabbitMQ stopped on them (their VMs kept): a start_app brings
        # one back in seconds, where a killed node's boot of a new VM took minutes on a loaded
        # machine. For the queues' members it is the same: two of three are gone.
        with ThreadPoolExecutor(2) as stopping:
            list(stopping.map(Node.stop_app, (second, third)))
        # A pool started again after its nodes went down, not in the same instant: the agent asks
        # the management API which members are online, and that answer lags the nodes' stop (an
        # agent started a moment after it saw three members online; its consume then waited for a
        # leader the queue no longer had, and its connection was closed).
        queues = (bus.DEAD, bus.rpc_queue(agent.address))
        wait_for(lambda: all(mgmt.queue(vhost, q).get("online") == [first.name] for q in queues), 60,
                 "the management API listing one member of three online", interval=0.5)
        caplog.set_level(logging.ERROR, logger="gridbus.echoer")
        starting.start()
        wait_for(lambda: "lost the majority of its nodes" in caplog.text, 120, "the agent saying the majority is lost")
        assert "of its 3 nodes online" in caplog.text
        assert agent.ready is not None and not agent.ready.is_set()  # waiting, not serving, not exited
        second.start_app()
        # The agent tries again every few seconds, each try bounded: a wait on a condition.
        wait_for(lambda: agent.ready is not None and agent.ready.is_set(), 120,
                 "the agent starting once a second node was back")
        # The requests left in its queue were undecodable: served means dead-lettered, none lost.
        wait_for(lambda: _left(_dead_bodies(url)) >= WANTED, 60, "the waiting requests served")
    finally:
        runner.stop()
        starting.join(30)
        whole_cluster.heal()  # (the fixture heals it too) before the vhost goes, so its queues go with it
        mgmt.delete_vhost(vhost)
