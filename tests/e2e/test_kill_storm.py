"""No job event lost through crashes: a kill storm of real processes while jobs end.

The schedd is SIGKILLed again and again (and started again at once, as the master would), the
owner's shadow and the startd are killed between, while a cluster of short jobs with one user log
runs; a durable queue bound to `gridbus.events` listens throughout. Afterwards every job has exactly
one submit event and at least one execute and one terminated event in the log, the terminated
events agree with the history, no job ran twice at once (the jobs' own marks), and the queue got
every job's terminated event at least once. A second test runs a DAG of 500 nodes under a schedd
kill storm: each node is submitted, run and ended once.

Sizes: GRIDBUS_STORM_JOBS (default 10,000) jobs and GRIDBUS_STORM_KILLS (default 10) schedd kills
(bench/RESULTS.md has the figures of a run).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path

import pika
import pytest
from htcondor2 import JobEventLog, JobEventType

from gridbus import bus, wire
from gridbus.classad import ExprTree
from tests.e2e.dagman.helpers import gridbus, node_events, submits_per_node, write_script, write_sub
from tests.e2e.pool import Pool, wait_for
from tests.e2e.storm import Storm, overlapping_runs, runs_per_job, write_mark_script

pytestmark = pytest.mark.e2e

JOBS = int(os.environ.get("GRIDBUS_STORM_JOBS", "10000"))
SCHEDD_KILLS = int(os.environ.get("GRIDBUS_STORM_KILLS", "10"))
SLOTS = {"GRIDBUS_NUM_CPUS": "8", "GRIDBUS_NUM_SLOTS": "8", "GRIDBUS_MEMORY": "8192"}
EVENTS_QUEUE = "storm.events"


def start_pool(p: Pool, **schedd_env: str) -> Pool:
    p.start("collector", "c")
    p.start("negotiator", "n")
    p.start("schedd", "s", **schedd_env)
    p.start("startd", "a", **SLOTS)
    p.wait_serving("collector@c", "schedd@s", "negotiator@n")
    p.wait_slots(8)
    return p


def bind_events_queue(url: str) -> None:
    """A durable queue of the job events, as an integrator's service would bind one."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.queue_declare(EVENTS_QUEUE, durable=True)
        ch.queue_bind(EVENTS_QUEUE, bus.EVENTS, routing_key="job.#")


def drain_events(url: str, into: dict[str, list[dict]]) -> int:
    """Every message in the queue now, by event name (a batched message's events one by one)."""
    got = 0
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        while True:
            method, props, body = ch.basic_get(EVENTS_QUEUE, auto_ack=True)
            if method is None:
                return got
            message = wire.decode(body, props.content_type)
            for event in message.get("Events", [message]):
                into[message["event"]].append(event)
                got += 1


@pytest.mark.timeout(900)
def test_no_user_log_event_lost_through_a_kill_storm(make_pool, tmp_path: Path):
    pool = start_pool(make_pool())
    bind_events_queue(pool.url)
    log, marks = tmp_path / "storm.log", tmp_path / "marks"
    script = write_mark_script(tmp_path)
    ad = {"Cmd": str(script), "Iwd": str(tmp_path), "JobUniverse": 5, "Requirements": ExprTree("true"),
          "RequestCpus": 1, "RequestMemory": 16, "RequestDisk": 64, "UserLog": str(log)}
    procs = [{"Arguments": f"{p} {marks}"} for p in range(JOBS)]
    cluster = pool.call("schedd@s", "Submit", {"Ad": ad, "Procs": procs}, timeout=120).ClusterId

    def all_done() -> bool:
        try:
            return len(pool.history("schedd@s", f"ClusterId == {cluster}", ["ProcId"])) >= JOBS
        except Exception:
            pool.session = None
            return False

    storm = Storm(pool, log, JOBS, schedd_kills=SCHEDD_KILLS, shadow_kills=3, startd_kills=2, startd_env=SLOTS)
    storm.run(all_done, timeout=300 + JOBS * 0.05)

    history = {j["ProcId"]: j for j in pool.history("schedd@s", f"ClusterId == {cluster}",
                                                    ["ProcId", "ExitCode", "NumJobStarts"])}
    assert sorted(history) == list(range(JOBS))
    assert pool.jobs("schedd@s", f"ClusterId == {cluster}") == []

    def log_complete() -> list | None:
        events = list(JobEventLog(str(log)).events(0))
        ended = {e.proc for e in events if e.type == JobEventType.JOB_TERMINATED}
        return events if len(ended) >= JOBS else None

    events = wait_for(f"a terminated event of each of the {JOBS} jobs in the log", log_complete, 60)
    per_job: dict[int, Counter] = defaultdict(Counter)
    for e in events:
        assert e.cluster == cluster
        per_job[e.proc][e.type] += 1
    submits = Counter(c[JobEventType.SUBMIT] for c in per_job.values())
    executes = sum(c[JobEventType.EXECUTE] for c in per_job.values())
    terminated = sum(c[JobEventType.JOB_TERMINATED] for c in per_job.values())
    twice_ended = sum(1 for c in per_job.values() if c[JobEventType.JOB_TERMINATED] > 1)
    runs = runs_per_job(marks)
    twice = overlapping_runs(marks)

    consumed: dict[str, list[dict]] = defaultdict(list)

    def every_terminated_received() -> bool:
        drain_events(pool.url, consumed)
        return {(e["ClusterId"], e["ProcId"]) for e in consumed["terminated"]} >= {(cluster, p) for p in range(JOBS)}

    wait_for("every job's terminated event on the bus", every_terminated_received, 60, interval=1)
    bus_terminated = consumed["terminated"]
    bus_ids = Counter(e["EventId"] for e in bus_terminated)

    print(f"\nkill storm: {JOBS} jobs; kills {dict(storm.done)}; user log: submit events per job {dict(submits)}, "
          f"{executes} execute, {terminated} terminated ({twice_ended} jobs with more than one); "
          f"jobs started {sum(runs.values())} times ({sum(1 for n in runs.values() if n > 1)} more than once), "
          f"{len(twice)} ran twice at once; NumJobStarts in the history "
          f"{dict(Counter(j.get('NumJobStarts') for j in history.values()))}; bus: {len(bus_terminated)} terminated events received, "
          f"{len(bus_ids)} distinct EventIds ({sum(n - 1 for n in bus_ids.values())} repeats)")

    assert storm.done["schedd"] == SCHEDD_KILLS and storm.done["shadow"] >= 1 and storm.done["startd"] == 2
    assert sorted(per_job) == list(range(JOBS))
    assert submits == {1: JOBS}, "every job has exactly one submit event"
    assert all(c[JobEventType.EXECUTE] >= 1 and c[JobEventType.JOB_TERMINATED] >= 1 for c in per_job.values())
    # The terminated events agree with the history: each job's says what its history ad says.
    for e in events:
        if e.type == JobEventType.JOB_TERMINATED:
            assert e.get("ReturnValue") == history[e.proc]["ExitCode"], (e.proc, history[e.proc])
    assert twice == {}, f"jobs run twice at once: {twice}"
    assert all(runs.get(str(p), 0) >= 1 for p in range(JOBS))
    # A terminated event received twice is the same event: one EventId per job's end (a job ends
    # once in the queue's record), however often it came.
    ids_per_job: dict[int, set[str]] = defaultdict(set)
    for e in bus_terminated:
        if e["ClusterId"] == cluster:
            ids_per_job[e["ProcId"]].add(e["EventId"])
    assert {len(ids) for ids in ids_per_job.values()} == {1}


@pytest.mark.timeout(900)
def test_a_dag_of_500_nodes_completes_under_a_schedd_kill_storm(make_pool, tmp_path: Path):
    nodes = int(os.environ.get("GRIDBUS_STORM_DAG_NODES", "500"))
    # The claim lease outlasts a schedd's restart on a loaded machine (the pools' 6 s did not
    # always: a startd whose lease runs out kills the claim's job, which then runs again, as
    # HTCondor's does). HTCondor's JOB_LEASE_DURATION is 2400 s.
    schedd_env = {"GRIDBUS_SCHEDD_RUN_LOCAL_JOBS_AS_SELF": "true", "GRIDBUS_JOB_LEASE_DURATION": "60"}
    pool = start_pool(make_pool(), **schedd_env)
    saved = {k: os.environ.get(k) for k in ("GRIDBUS_URL", "GRIDBUS_DAGMAN_USER_LOG_SCAN_INTERVAL")}
    os.environ["GRIDBUS_URL"] = pool.url  # submit_dag's and DAGMan's broker
    os.environ["GRIDBUS_DAGMAN_USER_LOG_SCAN_INTERVAL"] = "1"
    try:
        write_script(tmp_path, "node.sh", 'echo "$1" >> ran.txt')
        write_sub(tmp_path, "node.sub", "node.sh", "$(name)")
        text = "".join(f'JOB N{i} node.sub\nVARS N{i} name="N{i}"\n' for i in range(nodes))
        # A few chains, so the DAG is more than one wide layer: N<i> waits for N<i-100>.
        text += "".join(f"PARENT N{i - 100} CHILD N{i}\n" for i in range(100, nodes))
        dag = tmp_path / "storm.dag"
        dag.write_text(text)
        done = gridbus("submit_dag", dag.name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        cluster = int(done.stdout.split("submitted to cluster ")[1].split(".")[0])

        def dag_gone() -> bool:
            try:
                return not pool.jobs("schedd@s", f"ClusterId == {cluster}") and bool(
                    pool.history("schedd@s", f"ClusterId == {cluster}"))
            except Exception:
                pool.session = None
                return False

        storm = Storm(pool, Path(f"{dag}.nodes.log"), nodes, schedd_kills=SCHEDD_KILLS,
                      schedd_env=schedd_env)
        storm.run(dag_gone, timeout=600)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = Path(f"{dag}.dagman.out").read_text()
    ad = pool.history("schedd@s", f"ClusterId == {cluster}")[0]
    ran = Counter((tmp_path / "ran.txt").read_text().split())
    ended = Counter(name for name, e in node_events(dag) if e.type == JobEventType.JOB_TERMINATED)
    again = sorted(n for n, k in ran.items() if k > 1)
    print(f"\nDAG kill storm: {nodes} nodes; kills {dict(storm.done)}; DAGMan started {ad.get('NumJobStarts')} "
          f"times; node jobs run {sum(ran.values())} times ({len(again)} more than once: {again[:10]}); "
          f"terminated events in the nodes log {sum(ended.values())}")
    assert storm.done["schedd"] == SCHEDD_KILLS
    assert ad["ExitCode"] == 0, out[-3000:]
    every = {f"N{i}": 1 for i in range(nodes)}
    # Each node run once: submitted once, its job run once (its own mark) and ended once. A
    # restarted schedd asks the startds again, as repeats, about the activations it had sent, and
    # a DAGMan started again after a kill reads its nodes log only once the owed text is in it.
    assert submits_per_node(dag) == every, "each node submitted once"
    assert dict(ended) == every, "each node's job ended once in the nodes log"
    assert dict(ran) == every, f"each node's job run once (its own mark): run again {again}"
