"""An agent whose queue vanishes declares it again: deleted in the management UI (the broker tells
the consumer), or gone without a word to the consumer (on a cluster, the clean-up of a dead node's
queues can delete the queue an agent had just declared again on another node): the agent's
periodic check finds it missing and reconnects, which declares everything again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pika

from gridbus import bus
from gridbus.agent.threaded import AgentThread
from gridbus.console import Session
from gridbus.mgmt import Management
from tests.helpers import wait_for
from tests.integration.framework.echoer import Echoer


def _answers(url: str, address: str) -> bool:
    try:
        with Session(url, timeout=2) as session:
            return session.call(address, "Add", {"A": 2, "B": 3}).outArgs.get("Sum") == 5
    except Exception:
        return False


def test_a_request_queue_deleted_in_the_management_ui_comes_back(amqp_url: str, vhost: str,
                                                                  mgmt: Management) -> None:
    with AgentThread(Echoer("lost1", amqp_url, update_interval=5)):
        assert _answers(amqp_url, "echoer@lost1")
        mgmt.delete_queue(vhost, bus.rpc_queue("echoer@lost1"))
        wait_for(lambda: _answers(amqp_url, "echoer@lost1"), 30, "the agent serving again")
        assert any(q["name"] == bus.rpc_queue("echoer@lost1") for q in mgmt.queues(vhost))


def test_a_queue_gone_without_a_word_makes_the_agent_reconnect(amqp_url: str, vhost: str,
                                                                mgmt: Management) -> None:
    # A queue no consumer of the agent's is on: its deletion reaches the agent only through the check.
    name = "gridbus.test.vanishing"
    with pika.BlockingConnection(pika.URLParameters(amqp_url)) as conn:
        conn.channel().queue_declare(name)
    agent = Echoer("lost2", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        reconnected = _reconnections(thread, agent)
        agent.connection.watch(name, consumed=False)
        assert thread.call(agent.connection.check_queues()) == []  # present: nothing happens
        assert not reconnected.is_set()
        mgmt.delete_queue(vhost, name)
        assert thread.call(agent.connection.check_queues()) == [name]
        assert reconnected.wait(20), "the agent did not reconnect"
        agent.connection.unwatch(name)
        wait_for(lambda: _answers(amqp_url, "echoer@lost2"), 30, "the agent serving after reconnecting")


def _reconnections(thread: AgentThread, agent: Echoer) -> threading.Event:
    """An event set when ``agent`` reconnects; the queue checks are the test's own from here (the
    agent's every-5-s one would race with them)."""
    event = threading.Event()

    async def hook() -> None:
        assert agent.connection.robust is not None
        agent.connection.robust.reconnect_callbacks.add(lambda *_: event.set())
        for task in list(agent._tasks):
            if task.get_name() == "keep queues":
                task.cancel()

    thread.call(hook())
    return event


def test_an_agent_whose_request_consumer_is_gone_with_its_connection_up_reconnects(amqp_url: str) -> None:
    # The broker sees no consumer on the request queue while aio-pika believes it consumes (as
    # after a restore that failed half way): the agent is deaf until a check finds it twice.
    agent = Echoer("unserved", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        reconnected = _reconnections(thread, agent)
        thread.call(_cancel_on_the_broker(agent.connection.channel, agent.dispatcher._consumer_tag))
        assert not _answers(amqp_url, "echoer@unserved")
        _the_second_check_reconnects(amqp_url, thread, agent, reconnected, bus.rpc_queue("echoer@unserved"))


def test_an_agent_whose_answer_channel_stayed_closed_reconnects(amqp_url: str) -> None:
    # A channel the broker closed is restored by aio-pika; one whose restore failed stays closed
    # (no answer leaves the agent) until a check finds it closed twice and the agent reconnects.
    agent = Echoer("closed", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        reconnected = _reconnections(thread, agent)
        answers = agent.connection.answer_channel
        thread.call(_close_unrestored(answers))
        assert answers.is_closed and not _answers(amqp_url, "echoer@closed")
        # (Between the checks: the next restore, the reconnection's, works.)
        _the_second_check_reconnects(amqp_url, thread, agent, reconnected, "the answers channel",
                                     between=lambda: delattr(answers, "reopen"))


def _the_second_check_reconnects(url: str, thread: AgentThread, agent: Echoer, reconnected: threading.Event,
                                 lost: str, between: Callable[[], None] = lambda: None) -> None:
    """The first check lets ``lost`` be (a restore may be under way), the second finds it; the
    agent reconnects and answers again."""
    assert thread.call(agent.connection.check_queues()) == []
    between()
    assert thread.call(agent.connection.check_queues()) == [lost]
    assert reconnected.wait(20), "the agent did not reconnect"
    wait_for(lambda: _answers(url, agent.address), 30, "the agent answering after reconnecting")


def test_a_restore_that_does_not_finish_makes_the_agent_reconnect(amqp_url: str) -> None:
    # While the robust connection restores its channels on a new transport, a queue not declared
    # again yet is not lost; a restore still unfinished after RESTORE_WAIT (a declaration the
    # broker never answers: aio-pika gives it no timeout) is, and the agent reconnects.
    from gridbus.agent import connection as connection_module

    agent = Echoer("restoring", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        reconnected = _reconnections(thread, agent)
        conn = agent.connection
        conn._restored = None  # as if this transport's restore had not finished
        conn.watch("gridbus.test.not-declared-yet", consumed=False)
        assert thread.call(conn.check_queues()) == []
        assert not reconnected.is_set()

        async def much_later() -> list[str]:
            assert conn._restoring is not None
            conn._restoring = (conn._restoring[0], time.monotonic() - connection_module.RESTORE_WAIT)
            return await conn.check_queues()

        assert thread.call(much_later()) == ["the restore of its channels"]
        assert reconnected.wait(20), "the agent did not reconnect"
        conn.unwatch("gridbus.test.not-declared-yet")
        wait_for(lambda: _answers(amqp_url, "echoer@restoring"), 30, "the agent serving after reconnecting")
        assert conn._restored is not None and conn._restored is conn._plain_connection()


def test_a_client_whose_reply_consumer_is_gone_consumes_again_at_its_next_call(amqp_url: str) -> None:
    agent = Echoer("replies", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        tag = agent.client._consumer_tag
        thread.call(_cancel_on_the_broker(agent.connection.channel, tag))
        result = thread.call(agent.client.call("echoer@replies", "Add", {"A": 1, "B": 2}, timeout=10))
        assert result.outArgs["Sum"] == 3 and agent.client._consumer_tag != tag


async def _cancel_on_the_broker(channel, tag) -> None:
    underlay = await channel.get_underlay_channel()
    await underlay.basic_cancel(tag)


async def _close_unrestored(channel) -> None:
    async def fails() -> None:
        raise ConnectionError("a restore that failed")

    channel.reopen = fails
    underlay = await channel.get_underlay_channel()
    await underlay.close()


def test_a_check_the_broker_is_slow_to_answer_is_left_to_finish(amqp_url: str, monkeypatch) -> None:
    # Cancelling a channel's open or a declaration half way made a loaded broker close the whole
    # connection: a check past its time is given up on, not cancelled, and not started again meanwhile.
    from gridbus.agent import connection as connection_module

    monkeypatch.setattr(connection_module, "QUEUE_CHECK_TIMEOUT", 0.2)
    agent = Echoer("lost3", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        gate = thread.call(_event())
        real = agent.connection.lost_queues
        started: list[int] = []

        async def slow(conn):  # a broker slow to answer the passive declarations
            started.append(1)
            await gate.wait()
            return await real(conn)

        agent.connection.lost_queues = slow  # type: ignore[method-assign]
        assert thread.call(agent.connection.check_queues()) == []  # given up on after 0.2 s
        pending = agent.connection._checking
        assert pending is not None and not pending.done()
        assert thread.call(agent.connection.check_queues()) == []  # none started while it waits
        assert started == [1]
        thread.loop.call_soon_threadsafe(gate.set)
        wait_for(pending.done, 10, "the slow check to finish")
        assert not pending.cancelled() and pending.result() == ([], [])
        assert _answers(amqp_url, "echoer@lost3")


async def _event():
    import asyncio

    return asyncio.Event()


def test_a_queues_length_is_asked_without_harm_when_it_is_not_there(amqp_url: str) -> None:
    name = "gridbus.test.counted"
    agent = Echoer("counted", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        assert thread.call(agent.connection.queue_length(name)) is None  # no such queue (yet)
        with pika.BlockingConnection(pika.URLParameters(amqp_url)) as conn:
            ch = conn.channel()
            ch.queue_declare(name)
            for i in range(3):
                ch.basic_publish("", name, b"x%d" % i)
        # The "not found" closed only the probe's own channel: asked again, it says.
        wait_for(lambda: thread.call(agent.connection.queue_length(name)) == 3, 10, "the queue's three messages")
        assert _answers(amqp_url, "echoer@counted")  # the agent's own channels were not touched
        with pika.BlockingConnection(pika.URLParameters(amqp_url)) as conn:
            conn.channel().queue_delete(name)
