"""Real messages of a running pool against docs/asyncapi.yaml: every event and every ad (public,
private and invalidation) that a collector, negotiator, schedd, startd and master publish while jobs run,
is held and released, and a Submit's answer, each validated with jsonschema against the payload
schema of its message in the document."""

from __future__ import annotations

import uuid
from pathlib import Path

import pika
import pytest

from gridbus import bus, wire
from gridbus.bus import BrokerURL
from gridbus.classad import ExprTree
from gridbus.mgmt import Management
from tests.asyncapi_contract import as_json, payload_validator
from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.e2e


def message_of(exchange: str, key: str, body: dict) -> str:
    """The document's message for a captured one."""
    if exchange == bus.EVENTS:
        family, event, _who = key.split(".", 2)
        return f"{family}.{event}"
    if "mytype" in body:
        return "invalidate"
    if key.startswith("private.machine."):
        return "ad.MachinePrivate"
    return f"ad.{body['ads'][0]['MyType']}"


def test_captured_events_ads_and_answers_match_the_document(broker_url: BrokerURL, mgmt: Management,
                                                             tmp_path: Path):
    vhost = f"gridbus-test-contract-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    url = broker_url.with_vhost(vhost).url
    pool = Pool(url, tmp_path / "pool")
    conn = None
    try:
        pool.start("collector", "c", GRIDBUS_COLLECTOR_UPDATE_INTERVAL="1")  # its own ad every second
        pool.wait_serving("collector@c", timeout=60)  # it declares the exchanges
        conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, bus.EVENTS, "#")
        ch.queue_bind(q, bus.ADS, "#")
        pool.start("negotiator", "n")
        pool.start("schedd", "s")
        pool.start("startd", "a", GRIDBUS_NUM_CPUS="2", GRIDBUS_NUM_SLOTS="2", GRIDBUS_MEMORY="512")
        pool.start("master", "m", GRIDBUS_DAEMON_LIST="MASTER")  # a master of no daemons: its ad
        pool.wait_serving("schedd@s", "negotiator@n", timeout=60)
        pool.wait_slots(2, timeout=60)
        ad = {"Cmd": "/bin/true", "Iwd": str(tmp_path), "JobUniverse": 5, "Requirements": ExprTree("true"),
              "RequestCpus": 1, "RequestMemory": 16, "RequestDisk": 64}
        answer = pool.call("schedd@s", "Submit", {"Ad": ad, "Count": 2})
        payload_validator("scheduler.Submit.reply").validate(
            as_json({"status": answer.status, "text": answer.text, "out": answer.outArgs, "partial": False}))
        held = pool.submit("schedd@s", 1, cmd="/bin/sleep", args="30")
        pool.call("schedd@s", "Hold", {"Ids": [str(held)]})
        pool.call("schedd@s", "Release", {"Ids": [str(held)]})
        pool.call("schedd@s", "Remove", {"Ids": [str(held)]})
        wait_for("the jobs to leave the queue", lambda: not pool.jobs("schedd@s"), 60)

        captured: dict[str, int] = {}
        bad = []

        def take() -> bool:
            while True:
                method, props, body = ch.basic_get(q, auto_ack=True)
                if method is None:
                    return {"job.submit", "job.terminated", "job.held", "job.released", "job.aborted",
                            "daemon.start", "ad.Machine", "ad.MachinePrivate", "ad.Scheduler",
                            "ad.Negotiator", "ad.Collector", "ad.Master"} <= set(captured)
                decoded = as_json(wire.decode(body, props.content_type))
                name = message_of(method.exchange, method.routing_key, decoded)
                captured[name] = captured.get(name, 0) + 1
                errors = list(payload_validator(name).iter_errors(decoded))
                if errors:
                    bad.append((name, [f"{list(e.absolute_path)}: {e.message[:150]}" for e in errors[:3]]))

        try:
            wait_for("every kind of event and ad captured", take, 60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; captured: {captured}") from None
        assert not bad, bad[:5]
    finally:
        if conn is not None and conn.is_open:
            conn.close()
        pool.stop()
        mgmt.delete_vhost(vhost)
