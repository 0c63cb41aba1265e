"""A Submit sent while the only schedd is down and the broker node leading its request queue is
being replaced: the console's publish is confirmed by the surviving majority of the quorum
queue, the schedd serves it when it is back, and the cluster is made exactly once."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from gridbus.classad import ExprTree
from gridbus.console import Schedd
from tests.cluster.chaos import STARTD
from tests.e2e.pool import Pool, wait_for
from tests.rabbit_cluster import RabbitCluster

pytestmark = pytest.mark.e2e


def test_submit_while_the_schedd_is_down_and_its_queue_leader_is_replaced(
        rabbit_cluster: RabbitCluster, cluster_pool: Pool, tmp_path: Path) -> None:
    p = cluster_pool
    p.start("collector", "c")
    p.start("negotiator", "n")
    p.start("schedd", "s")
    p.start("startd", "a", **STARTD)
    p.wait_serving("collector@c", "schedd@s", "negotiator@n", timeout=60)
    queue = p.mgmt.queue(p.vhost, "gridbus.rpc.schedd@s")  # type: ignore[attr-defined]
    assert queue["type"] == "quorum", queue  # GRIDBUS_URL lists three brokers: the default
    leader = next(n for n in rabbit_cluster.nodes if n.name == queue["leader"])

    p.kill("schedd@s")
    leader.kill()
    sid = uuid.uuid4().hex
    answer: dict = {}

    def submit() -> None:
        try:
            with Schedd("s", url=p.url, timeout=60) as schedd:
                ad = {"Cmd": "/bin/true", "Iwd": str(tmp_path), "JobUniverse": 5, "RequestCpus": 1,
                      "Requirements": ExprTree("true"),
                      "RequestMemory": 16, "RequestDisk": 64}
                answer["result"] = schedd.submit(ad, count=3, submission_id=sid)
        except Exception as exc:  # reported by the assertion below
            answer["error"] = exc

    sender = threading.Thread(target=submit)
    sender.start()
    leader.start()  # the node comes back (replaced) while the Submit waits in the queue
    p.session = None
    p.start("schedd", "s")
    sender.join(150)
    assert not sender.is_alive() and "error" not in answer, answer
    cluster = answer["result"].cluster()
    try:
        hist = wait_for("the 3 jobs completed", lambda: len(h := p.history("schedd@s", "true")) >= 3 and h, 90)
    except AssertionError:
        print(p.diagnosis())
        raise
    assert sorted((j["ClusterId"], j["ProcId"]) for j in hist) == [(cluster, 0), (cluster, 1), (cluster, 2)]
    assert p.jobs("schedd@s", "true") == []  # served once: no second cluster from a resent request
