"""A consumer in another language: tests/node/consumer.mjs (Node.js, amqplib, @msgpack/msgpack)
finds a schedd with getObjects and submits with Submit, both in JSON, then follows its jobs'
events on a durable queue of its own. Its answers are checked against docs/asyncapi.yaml, and the
events it saw (EventIds deduped) against the jobs' user logs, HTCondor's own record: every event
seen once, in each job's order. The second test restarts the broker while events wait in the
consumer's queue, on a RabbitMQ node of the test's own (tests/rabbit_cluster.py), never the
machine's: it needs events published persistent."""

from __future__ import annotations

import json
import queue
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
from htcondor2 import JobEventLog

from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from tests import rabbit_cluster
from tests.asyncapi_contract import payload_validator
from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "consumer.mjs"
SLOTS = {"GRIDBUS_NUM_CPUS": "2", "GRIDBUS_NUM_SLOTS": "2", "GRIDBUS_MEMORY": "512"}
# HTCondor's event types by the names of the bus's job events.
LOG_NAMES = {"SUBMIT": "submit", "EXECUTE": "execute", "JOB_TERMINATED": "terminated", "JOB_EVICTED": "evicted",
             "IMAGE_SIZE": "image_size", "JOB_ABORTED": "aborted", "JOB_HELD": "held", "JOB_RELEASED": "released",
             "JOB_SUSPENDED": "suspended", "JOB_UNSUSPENDED": "unsuspended"}


def _missing() -> str | None:
    if not shutil.which("node"):
        return "node is not installed (Debian: apt-get install nodejs npm), so the Node.js consumer cannot run"
    for package in ("amqplib", "@msgpack/msgpack"):
        if not (HERE / "node_modules" / package).is_dir():
            return f"the npm package {package} is not installed in tests/node: run `make node-deps`"
    return None


@pytest.fixture(autouse=True)
def _node() -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)


class Consumer:
    """consumer.mjs running, its JSON lines read on a thread of their own."""

    def __init__(self, url: str, workdir: Path, **env: str):
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr = workdir / "consumer.stderr"
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(["node", str(SCRIPT)], cwd=str(HERE), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True,
                                         env={"PATH": "/usr/bin:/bin", "GRIDBUS_URL": url, **env})
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self, step: str, timeout: float) -> dict[str, Any]:
        """The next line of ``step``; the lines before it are kept in ``seen``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the consumer said no {step!r} within {timeout:g} s; it said "
                                     f"{self.seen[-5:]}; stderr: {self.stderr.read_text()[-2000:]}") from None
            self.seen.append(line)
            assert line["step"] != "error", line
            if line["step"] == step:
                return line

    def say(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def start_pool(url: str, workdir: Path) -> Pool:
    pool = Pool(url, workdir)
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "a", **SLOTS)
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n", timeout=60)
    pool.wait_slots(2, timeout=60)
    return pool


def check_answers(consumer: Consumer) -> int:
    """The getObjects and Submit answers, in JSON as asked and as the document describes them;
    the cluster submitted."""
    found = next(line for line in consumer.seen if line["step"] == "getObjects")
    submitted = next(line for line in consumer.seen if line["step"] == "submit")
    assert found["contentType"] == submitted["contentType"] == "application/json"
    payload_validator("getObjects.reply").validate(found["reply"])
    assert found["reply"]["out"]["objects"][0]["agent"] == "schedd@s"
    payload_validator("scheduler.Submit.reply").validate(submitted["reply"])
    assert submitted["reply"]["status"] == 0, submitted
    return submitted["reply"]["out"]["ClusterId"]


def logged_events(log: Path, cluster: int, jobs: int, timeout: float) -> dict[str, list[str]]:
    """Each proc's events in its user log, by the bus's names, once every proc's end is there."""
    def read() -> dict[str, list[str]] | None:
        out: dict[str, list[str]] = {}
        for e in JobEventLog(str(log)).events(0):
            if e.cluster == cluster and e.type.name in LOG_NAMES:
                out.setdefault(str(e.proc), []).append(LOG_NAMES[e.type.name])
        ended = [p for p, names in out.items() if "terminated" in names]
        return out if len(ended) == jobs else None

    return wait_for(f"the {jobs} jobs' ends in {log}", read, timeout)


def test_a_node_consumer_submits_in_json_and_sees_each_event_of_its_jobs_once(broker_url: BrokerURL,
                                                                              mgmt: Management, tmp_path: Path):
    vhost = f"gridbus-test-node-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    url = broker_url.with_vhost(vhost).url
    pool = start_pool(url, tmp_path / "pool")
    log = tmp_path / "jobs.log"
    consumer = Consumer(url, tmp_path, JOBS="4", JOB_IWD=str(tmp_path), JOB_LOG=str(log), QUEUE="node-consumer")
    try:
        done = consumer.next("done", 90)
        cluster = check_answers(consumer)
        assert done["events"] == logged_events(log, cluster, 4, 30)
        assert set(done["events"]) == {"0", "1", "2", "3"}
        assert all(names[0] == "submit" and names[-1] == "terminated" for names in done["events"].values())
        queues = {q["name"]: q for q in mgmt.request("GET", f"/queues/{mgmt.q(vhost)}")}
        assert queues["node-consumer"]["durable"] is True
    finally:
        consumer.stop()
        pool.stop()
        mgmt.delete_vhost(vhost)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnNode(rabbit_cluster.Node):
    """A RabbitMQ node of this test's own, on ports free when it was made (other tests and
    clusters may run on this machine at the same time)."""

    ports: tuple[int, int, int]

    @property
    def amqp_port(self) -> int:
        return self.ports[0]

    @property
    def mgmt_port(self) -> int:
        return self.ports[1]

    @property
    def dist_port(self) -> int:
        return self.ports[2]


@pytest.fixture
def own_node() -> Iterator[OwnNode]:
    reason = rabbit_cluster.missing()
    if reason:
        pytest.skip(f"no RabbitMQ node of the test's own: {reason}")
    base = Path(f"/tmp/gridbus-node-{uuid.uuid4().hex[:8]}")
    base.mkdir(mode=0o755)
    cookie = base / ".erlang.cookie"
    cookie.write_text(rabbit_cluster.COOKIE)
    cookie.chmod(0o400)
    node = OwnNode(1, base, f"gbnode{uuid.uuid4().hex[:6]}")
    node.ports = (_free_port(), _free_port(), _free_port())
    try:
        node.start()
        yield node
    finally:
        node.kill()
        shutil.rmtree(base, ignore_errors=True)


def waiting(url: str, queue_name: str) -> int:
    """Messages ready in a queue, as the broker tells a passive declaration."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        return conn.channel().queue_declare(queue_name, passive=True).method.message_count


def test_a_node_consumer_sees_each_event_once_across_a_broker_restart(own_node: OwnNode, tmp_path: Path):
    # A thousand short jobs: the restart comes while most of them are still to run or to end.
    jobs = 1000
    pool = start_pool(own_node.url, tmp_path / "pool")
    log = tmp_path / "jobs.log"
    consumer = Consumer(own_node.url, tmp_path, JOBS=str(jobs), JOB_CMD="/bin/true", JOB_ARGS="",
                        JOB_IWD=str(tmp_path), JOB_LOG=str(log), QUEUE="node-consumer")
    try:
        consumer.next("following", 60)
        consumer.next("event", 60)
        consumer.say("away")  # the consumer leaves; its durable queue keeps what comes meanwhile
        consumer.next("away", 30)
        if pool.session is not None:  # the test's own console connection would not outlive the restart
            pool.session.close()
            pool.session = None
        wait_for("events waiting in the consumer's queue", lambda: waiting(own_node.url, "node-consumer") >= 2, 60)
        # Mid-stream: jobs run, the schedd publishes, the queue holds events. A crash (kill -9),
        # not a stop: what the broker confirmed is on its disk.
        own_node.kill()
        own_node.start()
        consumer.say("back")
        cluster = check_answers(consumer)
        logged = logged_events(log, cluster, jobs, 300)  # every job ended, as HTCondor's record tells
        try:
            done = consumer.next("done", 60)
        except AssertionError:  # some events never came: what did it see?
            consumer.say("report")
            done = consumer.next("report", 10)
        events = [line for line in consumer.seen if line["step"] == "event"]
        # The contract the restart depends on: events are persistent messages (delivery mode 2),
        # so the broker keeps those in a durable queue across its restart.
        transient = [e["event"] for e in events if not e["persistent"]]
        assert not transient, f"events published transient (delivery mode 1), lost by a restart: {transient[:5]}"
        # None lost, none twice: what the consumer saw of each job (repeated EventIds dropped) is
        # what the job's user log tells, in the same order.
        assert done["events"] == logged
        assert sorted(done["events"], key=int) == [str(p) for p in range(jobs)]
        assert done["unique"] + done["duplicates"] == done["messages"]
    finally:
        consumer.stop()
        pool.stop()
