"""Answers are published on a channel of their own: an agent whose other publishes are stuck (a
channel sends one publish at a time, each waiting until the socket takes it, so under the broker's
flow control a schedd's RequestClaims queue up on their channel) still answers its requests."""

from __future__ import annotations

import asyncio

from gridbus.agent.threaded import AgentThread
from gridbus.console import Session
from tests.integration.framework.echoer import Echoer


async def _hold_publishes(agent: Echoer, release: asyncio.Event) -> asyncio.Task:
    """Keep the agent's main channel from publishing anything until ``release`` is set."""
    underlay = await agent.connection.channel.get_underlay_channel()
    lock = underlay.lock  # the aiormq channel's lock around each publish
    held = asyncio.Event()

    async def hold() -> None:
        async with lock:
            held.set()
            await release.wait()

    task = asyncio.get_running_loop().create_task(hold())
    await held.wait()
    return task


def test_an_agent_whose_other_publishes_are_stuck_still_answers(amqp_url: str) -> None:
    agent = Echoer("answers1", amqp_url, update_interval=5)
    with AgentThread(agent) as thread:
        release = thread.call(_make_event())
        holder = thread.call(_hold_publishes(agent, release))
        try:
            stuck = asyncio.run_coroutine_threadsafe(
                agent.publish("gridbus.events", "test.stuck", {"x": 1}, "event"), thread.loop)
            with Session(amqp_url, timeout=5) as session:
                assert session.call("echoer@answers1", "Add", {"A": 2, "B": 3}).outArgs == {"Sum": 5}
                assert session.getObjects("echoer")  # a getObjects query too
            assert not stuck.done()  # the main channel really was held meanwhile
        finally:
            thread.loop.call_soon_threadsafe(release.set)
        thread.call(asyncio.wait_for(holder, 5))
        stuck.result(5)


async def _make_event() -> asyncio.Event:
    return asyncio.Event()
