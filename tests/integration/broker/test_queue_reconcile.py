"""A pool whose queues were declared by another version or with other knobs still starts.

Each gridbus durable queue (gridbus.dead; a durable request queue, the schedd's) is declared
first by the test with other arguments and a few messages in it: another length limit, the other
queue type, a stream. The agent then starts: it adopts the queue or migrates it, and every message
that was in it is still there (the dead-letter queue's) or served (a request queue's, whose
undecodable messages the agent dead-letters). A queue it may not migrate stops it with a sentence.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pika
import pytest

from gridbus import bus
from gridbus.agent.reconcile import QueueConflict
from gridbus.agent.threaded import AgentThread
from gridbus.mgmt import Management
from gridbus.topology import FIX_COMMAND
from tests.helpers import wait_for
from tests.integration.framework.echoer import Echoer

MESSAGES = 3


class DurableEchoer(Echoer):
    durable_requests = True  # as the schedd's: requests wait in a durable queue while it restarts


def _predeclare(url: str, name: str, arguments: dict[str, Any], bindings: tuple[tuple[str, str], ...] = ()) -> None:
    """Declare ``name`` as another version would have, with MESSAGES messages in it."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for exchange, kind in bus.EXCHANGES:
            ch.exchange_declare(exchange, kind, durable=True)
        ch.queue_declare(name, durable=True, arguments=arguments)
        for exchange, key in bindings:
            ch.queue_bind(name, exchange, key)
        for i in range(MESSAGES):
            ch.basic_publish("", name, f"left by another version {i}".encode(),
                             pika.BasicProperties(delivery_mode=2, headers={"n": i}))


def _dead_bodies(url: str) -> list[bytes]:
    """Every message in gridbus.dead, read and put back (requeued)."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        bodies, tags = [], []
        for method, _props, body in ch.consume(bus.DEAD, inactivity_timeout=1):
            if method is None:
                break
            bodies.append(body)
            tags.append(method.delivery_tag)
        ch.cancel()
        for tag in tags:
            ch.basic_nack(tag, requeue=True)
        return bodies


def _left(bodies: list[bytes]) -> set[bytes]:
    return {b for b in bodies if b.startswith(b"left by another version")}


WANTED = {f"left by another version {i}".encode() for i in range(MESSAGES)}


@pytest.mark.parametrize("arguments", [
    pytest.param({"x-queue-type": "quorum"}, id="quorum-no-limit"),
    pytest.param({"x-max-length": 50, "x-overflow": "reject-publish"}, id="other-limits"),
    pytest.param({"x-queue-type": "stream"}, id="stream"),
])
def test_the_dead_letter_queue_declared_otherwise_keeps_its_messages(amqp_url: str, vhost: str, mgmt: Management,
                                                                     arguments: dict[str, Any]) -> None:
    _predeclare(amqp_url, bus.DEAD, arguments, ((bus.DEAD, ""),))
    with AgentThread(Echoer("dead1", amqp_url, update_interval=30)):
        queue = mgmt.queue(vhost, bus.DEAD)
        # A stream must go (nothing can take messages off it); the others are adopted as they are.
        assert queue["type"] == ("classic" if arguments.get("x-queue-type") == "stream" else
                                 arguments.get("x-queue-type", "classic"))
        assert _left(_dead_bodies(amqp_url)) == WANTED
        assert not any(q["name"].endswith(".migrating") for q in mgmt.queues(vhost))


@pytest.mark.parametrize("arguments,queue_type,after", [
    pytest.param({"x-dead-letter-exchange": bus.DEAD}, "quorum", "quorum", id="classic-to-quorum"),
    pytest.param({"x-dead-letter-exchange": bus.DEAD, "x-queue-type": "quorum"}, "classic", "quorum",
                 id="quorum-kept-for-classic"),
    pytest.param({"x-dead-letter-exchange": bus.DEAD, "x-max-length": 7}, "classic", "classic", id="other-limit"),
    pytest.param({"x-queue-type": "stream"}, "classic", "classic", id="stream"),
])
def test_a_durable_request_queue_declared_otherwise_loses_no_request(amqp_url: str, vhost: str, mgmt: Management,
                                                                     arguments: dict[str, Any], queue_type: str,
                                                                     after: str) -> None:
    agent = DurableEchoer("rq1", amqp_url, update_interval=30)
    agent.request_queue_type = queue_type
    name = bus.rpc_queue(agent.address)
    _predeclare(amqp_url, name, arguments, ((bus.RPC, agent.address),))
    with AgentThread(agent):
        assert mgmt.queue(vhost, name)["type"] == after
        # The requests left in it were undecodable: served means dead-lettered, so none is lost.
        wait_for(lambda: _left(_dead_bodies(amqp_url)) == WANTED, 20, "the old requests dead-lettered")
        assert not any(q["name"].endswith(".migrating") for q in mgmt.queues(vhost))


def test_a_queue_in_use_that_must_change_stops_the_agent_with_one_sentence(amqp_url: str, vhost: str,
                                                                          mgmt: Management) -> None:
    agent = DurableEchoer("rq2", amqp_url, update_interval=30)
    agent.request_queue_type = "quorum"
    name = bus.rpc_queue(agent.address)
    _predeclare(amqp_url, name, {"x-dead-letter-exchange": bus.DEAD}, ((bus.RPC, agent.address),))
    with _named_connection(amqp_url, "gridbus schedd@old") as conn:  # a daemon of the other version, still running
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume(name, lambda *a: None)
        with pytest.raises(QueueConflict) as refused:
            asyncio.run(agent.start())
        sentence = str(refused.value)
        assert name in sentence and "durable classic {x-dead-letter-exchange=gridbus.dead}" in sentence
        assert "durable quorum {x-dead-letter-exchange=gridbus.dead}" in sentence
        assert "1 consumer(s) still use it" in sentence and "does not own" not in sentence
        assert FIX_COMMAND in sentence and "\n" not in sentence
    assert mgmt.queue(vhost, name)["type"] == "classic"  # left as it was
    wait_for(lambda: mgmt.queue(vhost, name).get("messages") == MESSAGES, 20, "its messages still in it")


def test_a_stream_read_by_a_consumer_gridbus_does_not_own_is_not_migrated(amqp_url: str, vhost: str,
                                                                         mgmt: Management) -> None:
    # gridbus.dead made a stream by an integrator who reads it: the broker counts no consumer of a
    # stream, so only the management API tells that the migration would take it from under them.
    _predeclare(amqp_url, bus.DEAD, {"x-queue-type": "stream"}, ((bus.DEAD, ""),))
    with _named_connection(amqp_url, "integrator's audit reader") as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        read: list[bytes] = []

        def take(channel: Any, method: Any, _props: Any, body: bytes) -> None:
            read.append(body)
            channel.basic_ack(method.delivery_tag)

        ch.basic_consume(bus.DEAD, take, arguments={"x-stream-offset": "first"})
        wait_for(lambda: conn.process_data_events(0.2) or len(read) == MESSAGES, 30, "the reader reading the stream")
        assert ch.queue_declare(bus.DEAD, passive=True).method.consumer_count == 0  # what the broker says
        wait_for(lambda: mgmt.queue_consumers(vhost, bus.DEAD).named, 30, "the management API listing the reader")
        with pytest.raises(QueueConflict) as refused:
            asyncio.run(Echoer("dead2", amqp_url, update_interval=30).start())
        sentence = str(refused.value)
        assert sentence.startswith(f"queue {bus.DEAD} exists as durable stream {{"), sentence
        assert "but this version needs durable classic {" in sentence
        assert ("1 consumer(s) gridbus does not own read it (connection 'integrator's audit reader' of user "
                "guest): it is not migrated") in sentence
        assert FIX_COMMAND in sentence and "\n" not in sentence
        assert mgmt.queue_consumers(vhost, bus.DEAD).named  # its reader still reads it
    queue = mgmt.queue(vhost, bus.DEAD)
    assert queue["type"] == "stream" and queue["arguments"] == {"x-queue-type": "stream"}  # left as it was
    assert [b["source"] for b in mgmt.queue_bindings(vhost, bus.DEAD) if b["source"]] == [bus.DEAD]
    assert not any(q["name"].endswith(".migrating") for q in mgmt.queues(vhost))


def _named_connection(url: str, name: str) -> pika.BlockingConnection:
    params = pika.URLParameters(url)
    params.client_properties = {"connection_name": name}
    return pika.BlockingConnection(params)
