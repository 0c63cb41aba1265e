"""An asyncio client for calling other agents' methods (schedd -> startd, negotiator -> schedd).

Replies come back through RabbitMQ's direct reply-to on the caller's channel; answers that stream
in several partial messages are folded by `gridbus.rpc.Reply`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from gridbus import bus, protocol, wire
from gridbus.rpc import (
    DEFAULT_TIMEOUT,
    CallTimeout,
    MethodResult,
    Reply,
    answer_of,
    method_body,
    new_correlation_id,
    query_body,
)

log = logging.getLogger("gridbus.client")


class AsyncClient:
    def __init__(self, channel: AbstractChannel, user: str | None, app_id: str):
        self._channel = channel
        self._user = user
        self._app_id = app_id
        self._pending: dict[str, tuple[Reply, asyncio.Future[None]]] = {}
        self._consumer_tag: str | None = None
        self._starting = asyncio.Lock()  # two requests that find the consumer gone start one

    async def start(self) -> None:
        """Consume the replies (direct reply-to needs a no-ack consumer on the pseudo-queue, on
        the channel the requests are published on, before the first request). Idempotent: it
        consumes again only where the channel under the robust one has no such consumer, as after
        a reconnection or a restore of the channel, which aio-pika does not consume it again on
        (the pseudo-queue is none of the queues it restores)."""
        async with self._starting:
            channel = cast(aiormq.Channel, await self._channel.get_underlay_channel())
            if self._consumer_tag is not None and self._consumer_tag in channel.consumers:
                return
            queue = await self._channel.get_queue(bus.REPLY_TO, ensure=False)
            self._consumer_tag = await queue.consume(self._on_reply, no_ack=True)

    async def _on_reply(self, message: AbstractIncomingMessage) -> None:
        # A coroutine, as aio-pika expects of a consumer callback (a plain function is wrapped
        # with a deprecation warning); it never awaits, so a reply costs no extra task switch.
        entry = self._pending.get(message.correlation_id or "")
        if entry is None:
            return  # a late answer to a call that timed out
        reply, done = entry
        reply.add(answer_of(message.body, message.content_type, message.headers, message.app_id or ""))
        if reply.done and not done.done():
            done.set_result(None)

    async def call(
        self,
        address: str,
        method: str,
        args: dict[str, Any] | None = None,
        *,
        obj: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> MethodResult:
        """Call ``method`` on the object ``obj`` (default: the agent's own object) at ``address``."""
        return await self._request(
            address, bus.T_METHOD_REQUEST, method_body(obj or address, method, args), method, timeout
        )

    async def get_objects(
        self, routing_key: str, class_name: str | None, filters: dict | None = None, timeout: float = 5.0
    ) -> MethodResult:
        return await self._request(
            routing_key, bus.T_QUERY_REQUEST, query_body(class_name, filters), "getObjects", timeout
        )

    async def notify(self, routing_key: str, method: str, args: dict | None = None, *, ttl: float = 30.0) -> None:
        """A method request that wants no answer (no reply-to), e.g. a broadcast on key ``all``.
        The agent's own object is addressed; the broker drops it after ``ttl`` seconds untaken."""
        message = aio_pika.Message(
            wire.encode(method_body("", method, args)),
            content_type=wire.MSGPACK,
            type=bus.T_METHOD_REQUEST,
            user_id=self._user,
            app_id=self._app_id,
            expiration=ttl,
            headers=protocol.headers(),
        )
        exchange = await self._channel.get_exchange(bus.RPC, ensure=False)
        await exchange.publish(message, routing_key=routing_key, mandatory=False)

    async def _request(self, key: str, mtype: str, body: dict, what: str, timeout: float) -> MethodResult:
        cid = new_correlation_id()
        loop = asyncio.get_running_loop()
        reply = Reply()
        done: asyncio.Future[None] = loop.create_future()
        self._pending[cid] = (reply, done)
        try:
            message = aio_pika.Message(
                wire.encode(body),
                content_type=wire.MSGPACK,
                type=mtype,
                correlation_id=cid,
                reply_to=bus.REPLY_TO,
                user_id=self._user,
                app_id=self._app_id,
                # A request nobody takes in time is useless to its caller: let the broker drop it.
                expiration=max(timeout, 0.001),
                headers=protocol.headers({"x-gridbus-timeout-ms": int(timeout * 1000)}),
            )
            # Each request checks that its answer has a consumer to come to: one that failed to
            # be consumed again after a reconnection would have every call time out for good.
            await self.start()
            exchange = await self._channel.get_exchange(bus.RPC, ensure=False)
            await exchange.publish(message, routing_key=key, mandatory=False)
            try:
                await asyncio.wait_for(asyncio.shield(done), timeout)
            except TimeoutError:
                raise CallTimeout(key, what, timeout) from None
            return reply.result()
        finally:
            self._pending.pop(cid, None)
