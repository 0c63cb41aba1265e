"""An agent's link to the broker: one connection, its channels, gridbus's topology, publishing.

The connection is robust and moves to the next broker GRIDBUS_URL lists when the one it has goes
(a restarted broker or a closed connection is back within a second). It has two channels: one for
requests, answers and plain messages, and one with publisher confirms for the messages whose loss
would matter (job events), which are sent again until the broker confirms them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractRobustConnection

from gridbus import bus, wire
from gridbus.agent import failover

# A confirmed publish waits this long for the broker's confirm, and is sent again for this long
# (long enough for a failover to another broker node, or a restarted broker).
CONFIRM_TIMEOUT = 5.0
CONFIRM_RETRY = 30.0


class Connection:
    """The broker connection of the agent at ``address``; `open` before use, `close` at the end."""

    def __init__(self, url: bus.BrokerURL, address: str, log: logging.Logger, *, prefetch: int):
        self.url = url
        self.address = address
        self.log = log
        self.prefetch = prefetch
        self._robust: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._confirm_channel: AbstractChannel | None = None

    async def open(self, *, quorum: bool, on_reconnect: Callable[..., Awaitable[None]]) -> None:
        """Connect, open the channels and declare the topology (the dead-letter queue a quorum
        queue when ``quorum``); ``on_reconnect`` runs after each reconnection."""
        self._robust = await failover.connect(self.url, name=f"gridbus {self.address}", reconnect_interval=1)
        self._robust.reconnect_callbacks.add(on_reconnect)
        self._channel = await self._robust.channel(publisher_confirms=False)
        await self._channel.set_qos(prefetch_count=self.prefetch)
        self._confirm_channel = await self._robust.channel(publisher_confirms=True)
        await declare_topology(self._channel, quorum=quorum)

    @property
    def robust(self) -> AbstractRobustConnection | None:
        """The connection itself (None before `open`), for an agent that opens channels of its own."""
        return self._robust

    @property
    def channel(self) -> AbstractChannel:
        assert self._channel is not None, "agent not started"
        return self._channel

    @property
    def is_open(self) -> bool:
        return self._channel is not None and not self._channel.is_closed

    @property
    def broker(self) -> str:
        return str(getattr(self._robust, "broker", "?"))

    async def publish(self, exchange: str, key: str, body: Any, mtype: str, *, confirm: bool = False) -> None:
        """Publish ``body`` on ``exchange``. With ``confirm``, for messages whose loss would matter
        (job events), the broker confirms it, and a publish lost with its connection or refused is
        sent again, on the next broker if it fails over, for up to CONFIRM_RETRY seconds; a
        consumer recognises a resent message by its unchanged id (message_id, the body's EventId)."""
        channel = self.channel
        message = aio_pika.Message(wire.encode(body), content_type=wire.MSGPACK, type=mtype, app_id=self.address,
                                   message_id=body.get("EventId") if isinstance(body, dict) else None)
        if not confirm or self._confirm_channel is None:
            ex = await channel.get_exchange(exchange, ensure=False)
            await ex.publish(message, routing_key=key, mandatory=False)
            return
        deadline = time.monotonic() + CONFIRM_RETRY
        while True:
            try:
                ex = await self._confirm_channel.get_exchange(exchange, ensure=False)
                await ex.publish(message, routing_key=key, mandatory=False, timeout=CONFIRM_TIMEOUT)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # nacked, timed out, or the connection went: send it again
                if time.monotonic() >= deadline:
                    raise
                self.log.info("publish to %s (%s) not confirmed (%r); sending it again", exchange, key, exc)
                await asyncio.sleep(0.5)

    async def close(self) -> None:
        if self._robust is not None:
            await self._robust.close()


async def declare_topology(channel: AbstractChannel, *, quorum: bool = False) -> None:
    """Declare gridbus's exchanges and the dead-letter queue (a quorum queue on a cluster);
    idempotent, any order."""
    for name, kind in bus.EXCHANGES:
        await channel.declare_exchange(name, kind, durable=True)
    args = bus.DEAD_QUEUE_ARGS | ({"x-queue-type": "quorum"} if quorum else {})
    dead = await channel.declare_queue(bus.DEAD, durable=True, arguments=args)
    await dead.bind(bus.DEAD, "")
