"""A pool on the 3-node RabbitMQ cluster while broker nodes and daemons are killed and restarted.

One test, bounded in time: jobs flow while a chaos loop kills (-9) and restarts, one at a time,
the broker node the schedd is connected to, every daemon (schedd, startd, negotiator, collector,
master) and another broker node. It asserts that no job is lost or completed twice and that every
re-execution follows an eviction, and prints how long the pool took to complete jobs again after
each restart (figures, not asserted: this machine is shared).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from htcondor2 import JobEventLog, JobEventType

from gridbus.classad import ExprTree
from tests.e2e.pool import Pool, wait_for
from tests.rabbit_cluster import RabbitCluster

pytestmark = pytest.mark.e2e

STARTD = {"GRIDBUS_NUM_CPUS": "4", "GRIDBUS_NUM_SLOTS": "4", "GRIDBUS_MEMORY": "4096"}
JOB_SECONDS = "0.5"
BATCH = 24  # jobs kept queued ahead of each chaos step, so the pool is busy when it is hit


def start_pool(p: Pool) -> None:
    p.start("collector", "c")
    p.start("negotiator", "n")
    p.start("schedd", "s")
    p.start("startd", "a", **STARTD)
    p.start("master", "m", GRIDBUS_DAEMON_LIST="MASTER")
    p.wait_serving("collector@c", "schedd@s", "negotiator@n", timeout=60)
    p.wait_slots(4, timeout=60)


def node_of(p: Pool, cluster: RabbitCluster, address: str) -> int:
    """Index (0-based) of the broker node the daemon at ``address`` is connected to."""
    def find() -> int | None:
        for conn in p.mgmt.connections(p.vhost):  # type: ignore[attr-defined]
            if conn.get("client_properties", {}).get("connection_name") == f"gridbus {address}":
                return [n.name for n in cluster.nodes].index(conn["node"])
        return None
    return wait_for(f"the broker connection of {address}", lambda: (n := find()) is not None and (n,), 30)[0]


def done_count(p: Pool) -> int | None:
    try:
        return len(p.history("schedd@s", "true", ["ProcId"]))
    except Exception:
        p._drop_session()
        return None


def test_jobs_survive_killed_broker_nodes_and_daemons(rabbit_cluster: RabbitCluster, cluster_pool: Pool,
                                                      tmp_path: Path) -> None:
    p = cluster_pool
    start_pool(p)
    log = tmp_path / "chaos.log"
    submitted = 0

    submitted: dict[str, int] = {}  # SubmissionId -> jobs: a Submit retried after a failover is one

    def top_up() -> None:
        """Keep BATCH jobs idle, so the pool is busy whenever it is hit (tolerates a daemon down)."""
        try:
            if len(p.jobs("schedd@s", "JobStatus == 1", ["ProcId"])) >= BATCH:
                return
            sid = uuid.uuid4().hex
            ad = {"Cmd": "/bin/sleep", "Arguments": JOB_SECONDS, "Iwd": str(p.workdir), "JobUniverse": 5,
                  "Requirements": ExprTree("true"), "RequestCpus": 1, "RequestMemory": 16, "RequestDisk": 64,
                  "UserLog": str(log)}
            p.call("schedd@s", "Submit", {"Ad": ad, "Count": BATCH, "SubmissionId": sid}, timeout=10)
            submitted[sid] = BATCH
        except Exception:
            p._drop_session()

    def progressed(since: int, by: int) -> bool:
        top_up()
        n = done_count(p)
        return n is not None and n >= since + by

    first = node_of(p, rabbit_cluster, "schedd@s")
    steps: list[tuple[str, str | int]] = [
        ("broker", first), ("daemon", "schedd@s"), ("daemon", "startd@a"), ("daemon", "negotiator@n"),
        ("daemon", "collector@c"), ("daemon", "master@m"), ("broker", (first + 1) % 3),
    ]
    figures = []
    for kind, victim in steps:
        before = wait_for("the pool serving", lambda: (n := done_count(p)) is not None and (n,), 60)[0]
        wait_for("jobs completing before the kill", lambda b=before: progressed(b, 3), 60)
        if kind == "broker":
            node = rabbit_cluster.nodes[int(victim)]
            label = f"broker {node.name}"
            node.kill()
            down = time.monotonic()
            node.start()
        else:
            label = str(victim)
            kind_, _, name = str(victim).partition("@")
            p.kill(str(victim))
            if str(victim) in ("schedd@s", "collector@c"):
                p._drop_session()
            down = time.monotonic()
            p.start(kind_, name, **(STARTD if kind_ == "startd" else {}),
                    **({"GRIDBUS_DAEMON_LIST": "MASTER"} if kind_ == "master" else {}))
        restarted = time.monotonic()
        print(f"{time.strftime('%H:%M:%S')} {label} restarted", flush=True)
        at_restart = done_count(p) or 0
        try:
            wait_for(f"jobs completing after {label} restarted",
                     lambda r=at_restart: progressed(r, 4), 90)
        except AssertionError:
            for q in p.mgmt.queues(p.vhost):  # type: ignore[attr-defined]
                print(f"  queue {q['name']}: {q.get('type')} on {q.get('node') or q.get('leader')}, "
                      f"{q.get('consumers')} consumers, {q.get('messages')} messages")
            raise
        back = time.monotonic()
        figures.append((label, restarted - down, back - restarted))
    top = sum(submitted.values())
    hist = wait_for(f"all {top} jobs completed", lambda: (h := p.history("schedd@s", "true", ["ClusterId", "ProcId"]))
                    and len(h) >= top and h, 180, interval=1)
    print(f"\nchaos on a 3-node cluster: {top} jobs of {JOB_SECONDS} s, 4 slots")
    for label, restart_s, back_s in figures:
        print(f"  {label:24s} restarted after {restart_s:5.1f} s; 4 jobs completed {back_s:5.1f} s after the restart")
    ids = Counter((j["ClusterId"], j["ProcId"]) for j in hist)
    assert len(ids) == top and set(ids.values()) == {1}, "a job lost or completed twice"
    assert p.jobs("schedd@s", "true", ["ProcId"]) == []
    per_job: dict[tuple[int, int], list[JobEventType]] = {}
    for e in JobEventLog(str(log)).events(0):
        per_job.setdefault((e.cluster, e.proc), []).append(e.type)
    terminated = Counter(j for j, ev in per_job.items() for t in ev if t == JobEventType.JOB_TERMINATED)
    assert set(terminated) == set(ids) and set(terminated.values()) == {1}, "a job terminated twice in the log"
    reruns = 0
    for job, events in per_job.items():
        starts = [i for i, t in enumerate(events) if t == JobEventType.EXECUTE]
        for a, b in zip(starts, starts[1:], strict=False):
            reruns += 1
            between = events[a + 1:b]
            assert JobEventType.JOB_EVICTED in between or JobEventType.JOB_RELEASED in between, (job, events)
    print(f"  {reruns} re-executions, each after an eviction; 0 lost, 0 completed twice")

