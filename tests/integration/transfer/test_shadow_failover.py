"""The owner's shadow's broker connection fails over through the broker URL list, as every daemon
does: the first broker that answers is taken, and after a lost connection the one after it."""

from __future__ import annotations

import asyncio

from gridbus.agents.schedd import shadow_child


def test_the_shadow_connects_to_the_first_broker_of_the_list_that_answers(amqp_url):
    dead = "amqp://guest:guest@127.0.0.1:1/"  # nothing listens there

    async def main() -> None:
        try:
            answer = await shadow_child._handle({"op": "connect", "url": dead, "urls": [dead, amqp_url], "name": "t"})
            assert answer["ok"] and answer["queue"].startswith("amq.gen-"), answer
            assert shadow_child._bus["index"] == 1
            # Its connection lost, the next connect starts from the broker after the one it had
            # (here the list wraps around to the dead one, which fails over to the live one again).
            await shadow_child._bus["connection"].close()
            shadow_child._bus["closed"] = True
            answer = await shadow_child._handle({"op": "connect", "url": dead, "urls": [dead, amqp_url], "name": "t"})
            assert answer["ok"] and shadow_child._bus["index"] == 1
            # None answers: a sentence naming the brokers, never their credentials.
            await shadow_child._bus["connection"].close()
            shadow_child._bus["closed"] = True
            answer = await shadow_child._handle({"op": "connect", "url": dead, "urls": [dead], "name": "t"})
            assert not answer["ok"] and "no broker answered: 127.0.0.1:1/" in answer["error"], answer
            assert "guest" not in answer["error"]
        finally:
            if shadow_child._bus.get("connection") is not None:
                await shadow_child._bus["connection"].close()
            shadow_child._bus.clear()

    asyncio.run(main())
