"""A request of a protocol version the agent does not take is answered with the sentence that
says so (and dead-lettered); one of the previous minor version, or without the header (gridbus
0.1.0), is served. Answers carry the agent's version."""

from __future__ import annotations

from typing import Any

import pika

from gridbus import bus, protocol, wire
from gridbus.agent.threaded import AgentThread
from gridbus.rpc import method_body
from gridbus.status import Status
from tests.integration.framework.echoer import Echoer


def _call(url: str, headers: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        answers = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish(bus.RPC, "echoer@pv", wire.encode(method_body("", "Add", {"A": 2, "B": 3})),
                         pika.BasicProperties(content_type=wire.MSGPACK, type=bus.T_METHOD_REQUEST, reply_to=answers,
                                              correlation_id="c1", headers=headers))
        for method, props, body in ch.consume(answers, inactivity_timeout=15):
            assert method is not None, "no answer"
            return wire.decode(body, props.content_type), dict(props.headers or {})
    raise AssertionError("unreachable")


def test_requests_of_each_protocol_version(amqp_url: str) -> None:
    major, minor = protocol.VERSION
    with AgentThread(Echoer("pv", amqp_url, update_interval=30)):
        answer, headers = _call(amqp_url, None)  # gridbus 0.1.0 sent no version
        assert answer["status"] == Status.OK and answer["out"]["Sum"] == 5
        assert headers[protocol.HEADER] == f"{major}.{minor}"
        answer, _ = _call(amqp_url, {protocol.HEADER: f"{major}.{minor - 1}"})
        assert answer["status"] == Status.OK
        answer, _ = _call(amqp_url, {protocol.HEADER: f"{major + 1}.0"})
        assert answer["status"] == Status.INVALID_PARAMETER
        assert answer["text"].startswith(f"message refused: gridbus protocol {major + 1}.0, but this daemon speaks")
