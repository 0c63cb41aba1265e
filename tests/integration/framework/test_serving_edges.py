"""The edges of serving requests: a malformed query is answered, and a stopping agent takes no
new request."""

from __future__ import annotations

import asyncio
import threading

import pika
import pytest

from gridbus import bus, wire
from gridbus.agent.threaded import AgentThread
from gridbus.console import CallTimeout, Session
from gridbus.status import Status
from tests.helpers import wait_for
from tests.integration.framework.echoer import Echoer
from tests.integration.framework.test_agent_calls import _plain_channel, _wait


@pytest.mark.parametrize("body", [{"class": 5}, {"class": "echoer", "filters": ["Name"]}])
def test_a_malformed_query_is_answered_invalid(amqp_url, body):
    with AgentThread(Echoer("q1", amqp_url, update_interval=5)):
        conn, ch, replies = _plain_channel(amqp_url)
        try:
            props = pika.BasicProperties(content_type=wire.MSGPACK, type=bus.T_QUERY_REQUEST, reply_to=bus.REPLY_TO,
                                         correlation_id="q")
            ch.basic_publish(bus.RPC, "echoer@q1", wire.encode(body), props)
            (p, b), = _wait(conn, replies)
            reply = wire.decode(b, p.content_type)
            assert reply["status"] == Status.INVALID_PARAMETER, reply
        finally:
            conn.close()


class SlowStop(Echoer):
    """An echoer whose on_stop waits until the test lets it finish."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.stopping = threading.Event()
        self.finish: asyncio.Event | None = None

    async def on_start(self) -> None:
        self.finish = asyncio.Event()

    async def on_stop(self) -> None:
        self.stopping.set()
        assert self.finish is not None
        await self.finish.wait()


def test_a_stopping_agent_serves_no_new_request(amqp_url):
    """What arrives while an agent stops (a startd killing its jobs) is left to its next
    instance: a handler run then would act on a half-stopped agent."""
    agent = SlowStop("s1", amqp_url, update_interval=5)
    thread = AgentThread(agent).start()
    stopper = threading.Thread(target=thread.stop)
    try:
        with Session(amqp_url, timeout=10) as session:
            assert session.call("echoer@s1", "Add", {"A": 1, "B": 2}).Sum == 3
            # The count goes up after the answer is sent: wait for it before taking it.
            served = wait_for(lambda: agent.stats["RequestsServed"], 10, "the first call counted")
            stopper.start()
            assert agent.stopping.wait(10)
            with pytest.raises(CallTimeout):
                session.call("echoer@s1", "Add", {"A": 1, "B": 2}, timeout=1.0)
            assert agent.stats["RequestsServed"] == served
    finally:
        assert agent.finish is not None
        thread.loop.call_soon_threadsafe(agent.finish.set)
        if stopper.is_alive() or stopper.ident is not None:
            stopper.join(15)
        else:
            thread.stop()


def test_a_second_agent_of_one_address_refuses_to_start_and_the_first_serves_alone(amqp_url, monkeypatch):
    """Two agents of one address would split its requests (a second personal pool on the same
    vhost, named after the same host, had its startd answer half of the first pool's calls): the
    second refuses to start, saying why, and the first serves every request; once the first has
    stopped, an agent of that address starts."""
    from gridbus.agent import dispatcher

    monkeypatch.setattr(dispatcher, "ADDRESS_FREE_WAIT", 1.0)
    first = AgentThread(Echoer("twin", amqp_url, update_interval=5)).start()
    try:
        with pytest.raises(RuntimeError, match="another agent already serves echoer@twin"):
            AgentThread(Echoer("twin", amqp_url, update_interval=5)).start()
        with Session(amqp_url, timeout=10) as session:
            served = {session.call("echoer@twin", "Echo", {"Value": i}).outArgs["Value"] for i in range(6)}
        assert served == set(range(6))
        conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
        try:
            declared = conn.channel().queue_declare(bus.rpc_queue("echoer@twin"), passive=True)
            assert declared.method.consumer_count == 1
        finally:
            conn.close()
    finally:
        first.stop()
    AgentThread(Echoer("twin", amqp_url, update_interval=5)).start().stop()
