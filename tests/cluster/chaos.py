"""The chaos loop of the cluster test and of bench/bench_cluster.py: a pool on the 3-node cluster
keeps jobs flowing while broker nodes and daemons are killed (-9) and restarted one at a time;
then every job must have completed exactly once, every re-execution after an eviction."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

from htcondor2 import JobEventLog, JobEventType

from gridbus.classad import ExprTree
from tests.e2e.pool import Pool, wait_for
from tests.rabbit_cluster import RabbitCluster

STARTD = {"GRIDBUS_NUM_CPUS": "4", "GRIDBUS_NUM_SLOTS": "4", "GRIDBUS_MEMORY": "4096"}


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


class Chaos:
    """Jobs of ``job_seconds`` kept ``batch`` idle ahead (up to ``total`` jobs, if given), and one
    kill and restart per step: the schedd's broker node, each daemon, another broker node."""

    def __init__(self, p: Pool, cluster: RabbitCluster, log: Path, *, job_seconds: str = "0.5",
                 batch: int = 24, total: int | None = None):
        self.p, self.cluster, self.log = p, cluster, log
        self.job_seconds, self.batch, self.total = job_seconds, batch, total
        self.submitted: dict[str, int] = {}  # SubmissionId -> jobs: a Submit resent after a failover is one
        self.figures: list[tuple[str, float, float]] = []

    def top_up(self) -> None:
        """Keep ``batch`` jobs idle, so the pool is busy whenever it is hit (tolerates a daemon down)."""
        p = self.p
        count = self.batch
        if self.total is not None:
            count = min(count, self.total - sum(self.submitted.values()))
            if count <= 0:
                return
        try:
            if len(p.jobs("schedd@s", "JobStatus == 1", ["ProcId"])) >= self.batch:
                return
            sid = uuid.uuid4().hex
            ad = {"Cmd": "/bin/sleep", "Arguments": self.job_seconds, "Iwd": str(p.workdir), "JobUniverse": 5,
                  "Requirements": ExprTree("true"), "RequestCpus": 1, "RequestMemory": 16, "RequestDisk": 64,
                  "UserLog": str(self.log)}
            p.call("schedd@s", "Submit", {"Ad": ad, "Count": count, "SubmissionId": sid}, timeout=30)
            self.submitted[sid] = count
        except Exception:
            p._drop_session()

    def progressed(self, since: int, by: int) -> bool:
        self.top_up()
        n = done_count(self.p)
        return n is not None and n >= since + by

    def run(self) -> None:
        p, cluster = self.p, self.cluster
        first = node_of(p, cluster, "schedd@s")
        steps: list[tuple[str, str | int]] = [
            ("broker", first), ("daemon", "schedd@s"), ("daemon", "startd@a"), ("daemon", "negotiator@n"),
            ("daemon", "collector@c"), ("daemon", "master@m"), ("broker", (first + 1) % 3),
        ]
        for kind, victim in steps:
            before = wait_for("the pool serving", lambda: (n := done_count(p)) is not None and (n,), 60)[0]
            wait_for("jobs completing before the kill", lambda b=before: self.progressed(b, 3), 60)
            if kind == "broker":
                node = cluster.nodes[int(victim)]
                label = f"broker {node.name}"
                node.kill()
                down = time.monotonic()
                node.start()
            else:
                label = str(victim)
                kind_, _, name = str(victim).partition("@")
                p.kill(str(victim))
                p._drop_session()
                down = time.monotonic()
                p.start(kind_, name, **(STARTD if kind_ == "startd" else {}),
                        **({"GRIDBUS_DAEMON_LIST": "MASTER"} if kind_ == "master" else {}))
            restarted = time.monotonic()
            at_restart = done_count(p) or 0
            try:
                # Back at speed: a full round of the 4 slots completed after the restart.
                wait_for(f"jobs completing after {label} restarted", lambda r=at_restart: self.progressed(r, 4), 90)
            except AssertionError:
                for q in p.mgmt.queues(p.vhost):  # type: ignore[attr-defined]
                    print(f"  queue {q['name']}: {q.get('type')} on {q.get('node') or q.get('leader')}, "
                          f"{q.get('consumers')} consumers, {q.get('messages')} messages")
                for c in p.mgmt.connections(p.vhost):  # type: ignore[attr-defined]
                    print(f"  connection {c.get('client_properties', {}).get('connection_name')!r} on {c.get('node')}: "
                          f"{c.get('state')}, {c.get('channels')} channels, port {c.get('peer_port')}")
                print(p.diagnosis())
                raise
            self.figures.append((label, restarted - down, time.monotonic() - restarted))

    def check(self) -> list[str]:
        """Wait for every job; assert each completed once and re-ran only after an eviction;
        the report's lines."""
        p = self.p
        if self.total is not None:
            wait_for("every job submitted", lambda: (self.top_up(), sum(self.submitted.values()) >= self.total)[1],
                     120, interval=1)
        top = sum(self.submitted.values())
        hist = wait_for(f"all {top} jobs completed",
                        lambda: (h := p.history("schedd@s", "true", ["ClusterId", "ProcId"])) and len(h) >= top and h,
                        max(180, top), interval=1)
        ids = Counter((j["ClusterId"], j["ProcId"]) for j in hist)
        assert len(ids) == top and set(ids.values()) == {1}, "a job lost or completed twice"
        assert p.jobs("schedd@s", "true", ["ProcId"]) == []
        per_job: dict[tuple[int, int], list[JobEventType]] = {}
        for e in JobEventLog(str(self.log)).events(0):
            per_job.setdefault((e.cluster, e.proc), []).append(e.type)
        terminated = Counter(j for j, ev in per_job.items() for t in ev if t == JobEventType.JOB_TERMINATED)
        assert set(terminated) == set(ids) and set(terminated.values()) == {1}, "a job terminated twice in the log"
        reruns = 0
        for job, events in per_job.items():
            starts = [i for i, t in enumerate(events) if t == JobEventType.EXECUTE]
            for a, b in zip(starts, starts[1:], strict=False):
                reruns += 1
                assert JobEventType.JOB_EVICTED in events[a + 1:b], (job, events)
        lines = [f"chaos on a 3-node cluster: {top} jobs of {self.job_seconds} s, 4 slots"]
        for label, restart_s, back_s in self.figures:
            lines.append(f"  {label:24s} restarted in {restart_s:5.1f} s; 4 jobs completed {back_s:5.1f} s after "
                         f"the restart ({'within' if back_s <= 10 else 'OVER'} 10 s)")
        lines.append(f"  {reruns} re-executions, each after an eviction; 0 lost, 0 completed twice")
        return lines
