"""An agent's link to the broker: one connection, its channels, gridbus's topology, publishing.

The connection is robust and moves to the next broker GRIDBUS_URL lists when the one it has goes
(a restarted broker or a closed connection is back within a second). It has three channels: one for
requests and plain messages, one for the answers to requests, and one with publisher confirms for
the messages whose loss would matter (job events), which are sent again until the broker confirms
them. A channel sends one publish at a time and each waits until its frames are written to the
socket, so under the broker's flow control a busy agent's publishes queue on their channel: a schedd
claiming thousands of slots had its `q -totals` answers wait seconds behind its own RequestClaims.
Answers on a channel of their own wait behind no more than one frame of each other channel.

The queues the agent consumes from are checked every QUEUE_CHECK_INTERVAL: a queue can vanish with
no word to its consumer (on a cluster, the clean-up of a dead node's queues can delete the queue
an agent had just declared again on another node), and an agent that kept waiting on it would be
deaf for good; and a queue can stay with the agent's consumer gone (a channel the broker closed and
aio-pika failed to restore). A queue missing, or unserved at two checks in a row, makes the
connection reconnect, which declares and consumes everything again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractRobustConnection
from aio_pika.exceptions import CONNECTION_EXCEPTIONS

from gridbus import bus, protocol, topology, wire
from gridbus.agent import failover, reconcile
from gridbus.mgmt import Management, ManagementError

# A confirmed publish waits this long for the broker's confirm, and is sent again for this long
# (long enough for a failover to another broker node, or a restarted broker).
CONFIRM_TIMEOUT = 5.0
CONFIRM_RETRY = 30.0
# How often the queues an agent consumes from are checked, and how long one check may take (a
# queue whose node just died can keep a declaration waiting for many seconds).
QUEUE_CHECK_INTERVAL = 5.0
QUEUE_CHECK_TIMEOUT = 30.0
# Checks in a row a consumed queue may be found without a consumer (or an own channel closed)
# before the agent reconnects.
UNSERVED_CHECKS = 2
# Seconds the robust connection's restore of the channels on a new transport may take.
RESTORE_WAIT = 30.0


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
        self._answer_channel: AbstractChannel | None = None
        self._watched: dict[str, bool] = {}  # queue -> consumed by this agent
        self._strikes: dict[str, int] = {}  # queue or channel -> checks in a row found unserved
        # The transport whose restore (every channel declared and consumed again) has finished, and
        # the one a check first found still restoring, with when.
        self._restored: aiormq.abc.AbstractConnection | None = None
        self._restoring: tuple[aiormq.abc.AbstractConnection, float] | None = None
        self._checking: asyncio.Future[tuple[list[str], list[str]]] | None = None  # the queue check under way
        self._probe: aiormq.abc.AbstractChannel | None = None  # queue_length's plain channel

    async def open(self, *, quorum: bool, on_reconnect: Callable[..., Awaitable[None]]) -> None:
        """Connect, open the channels and declare the topology (the dead-letter queue a quorum
        queue when ``quorum``); ``on_reconnect`` runs after each reconnection."""
        self._robust = await failover.connect(self.url, name=f"gridbus {self.address}", reconnect_interval=1)
        self._robust.reconnect_callbacks.add(self._on_restored)  # (before the agent's: it may consume)
        self._robust.reconnect_callbacks.add(on_reconnect)
        self._channel = await self._robust.channel(publisher_confirms=False)
        await self._channel.set_qos(prefetch_count=self.prefetch)
        self._confirm_channel = await self._robust.channel(publisher_confirms=True)
        self._answer_channel = await self._robust.channel(publisher_confirms=False)
        await declare_topology(self._channel, quorum=quorum, reconcile_on=self._plain_connection(), log=self.log,
                               members=self.quorum_members, consumers=self.queue_consumers)
        self._restored = self._plain_connection()

    async def _on_restored(self, *_: Any) -> None:
        """The robust connection has declared and consumed everything again on its new transport."""
        self._restored = self._plain_connection()

    async def reconciled(self, spec: topology.QueueSpec) -> tuple[bool, dict[str, Any]]:
        """(durable, arguments) to declare ``spec``'s queue with, once it is found compatible or
        migrated (see `gridbus.agent.reconcile`; raises QueueConflict with the sentence to stop with)."""
        connection = self._plain_connection()
        if connection is None:
            return spec.durable, spec.arguments  # reconnecting: the queue was reconciled at the start
        return await reconcile.ensure_waiting(connection, spec, self.log, self.quorum_members, self.queue_consumers)

    async def quorum_members(self, queue: str) -> tuple[list[str], list[str]] | None:
        """(online, members) of a quorum queue, from the management API; None where it does not
        say (unreachable, or not a quorum queue)."""
        try:
            info = await asyncio.to_thread(Management.for_broker(self.url).queue, self.url.vhost, queue)
        except ManagementError as exc:
            self.log.info("could not ask the management API about queue %s: %s", queue, exc)
            return None
        online, members = info.get("online"), info.get("members")
        if not isinstance(online, list) or not isinstance(members, list) or not members:
            return None
        return [str(n) for n in online], [str(n) for n in members]

    async def queue_consumers(self, queue: str) -> topology.Consumers | None:
        """Who consumes ``queue``, from the management API (the only one that sees a stream's
        consumers); None where it does not answer."""
        try:
            return await asyncio.to_thread(Management.for_broker(self.url).queue_consumers, self.url.vhost, queue)
        except ManagementError as exc:
            self.log.info("could not ask the management API who consumes queue %s: %s", queue, exc)
            return None

    @property
    def robust(self) -> AbstractRobustConnection | None:
        """The connection itself (None before `open`), for an agent that opens channels of its own."""
        return self._robust

    @property
    def channel(self) -> AbstractChannel:
        assert self._channel is not None, "agent not started"
        return self._channel

    @property
    def answer_channel(self) -> AbstractChannel:
        """The channel the answers to requests are published on (see the module's note)."""
        assert self._answer_channel is not None, "agent not started"
        return self._answer_channel

    @property
    def is_open(self) -> bool:
        return self._channel is not None and not self._channel.is_closed

    @property
    def broker(self) -> str:
        return str(getattr(self._robust, "broker", "?"))

    async def publish(self, exchange: str, key: str, body: Any, mtype: str, *, confirm: bool = False) -> None:
        """Publish ``body`` on ``exchange``. With ``confirm``, for messages whose loss would matter
        (job events), the message is persistent (a durable queue keeps it through a broker restart),
        the broker confirms it, and a publish lost with its connection or refused is
        sent again, on the next broker if it fails over, for up to CONFIRM_RETRY seconds; a
        consumer recognises a resent message by its unchanged id (message_id, the body's EventId)."""
        channel = self.channel
        message = aio_pika.Message(wire.encode(body), content_type=wire.MSGPACK, type=mtype, app_id=self.address,
                                   headers=protocol.headers(),
                                   message_id=body.get("EventId") if isinstance(body, dict) else None,
                                   delivery_mode=aio_pika.DeliveryMode.PERSISTENT if confirm else None)
        if not confirm or self._confirm_channel is None:
            ex = await channel.get_exchange(exchange, ensure=False)
            await ex.publish(message, routing_key=key, mandatory=False)
            return
        deadline = time.monotonic() + CONFIRM_RETRY
        while True:
            try:
                # The whole attempt is bounded, not only the confirm: a robust channel that was not
                # restored after a reconnection waits for it without end, and holds every event
                # behind this one.
                async with asyncio.timeout(CONFIRM_TIMEOUT):
                    ex = await self._confirm_channel.get_exchange(exchange, ensure=False)
                    await ex.publish(message, routing_key=key, mandatory=False)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # nacked, timed out, or the connection went: send it again
                if time.monotonic() >= deadline:
                    raise
                self.log.info("publish to %s (%s) not confirmed (%r); sending it again", exchange, key, exc)
                await asyncio.sleep(0.5)
                if isinstance(exc, TimeoutError) or self._confirm_channel.is_closed:
                    await self._fresh_confirm_channel()

    async def _fresh_confirm_channel(self) -> None:
        """A new publisher-confirms channel in place of one that is closed or stuck while the
        connection is up (else the next attempt meets the same channel); kept as it is when the
        connection itself is away (the robust connection restores its channels when it is back)."""
        if self._robust is None or self._robust.is_closed:
            return
        old = self._confirm_channel
        try:
            async with asyncio.timeout(CONFIRM_TIMEOUT):
                self._confirm_channel = await self._robust.channel(publisher_confirms=True)
        except Exception as exc:
            self.log.info("no new channel for confirmed publishes yet (%r)", exc)
            return
        self.log.warning("publishes with confirms go on a new channel (the last one was closed or stuck)")
        if old is not None:
            try:
                async with asyncio.timeout(1.0):
                    await old.close()
            except Exception:
                pass  # (gone with its connection, or stuck: dropped)

    async def close(self) -> None:
        if self._robust is not None:
            await self._robust.close()

    # ------------------------------------------------------------------ queues that must stay
    def watch(self, queue: str, *, consumed: bool = True) -> None:
        """Check in `keep_queues` that the broker still has ``queue`` and, when ``consumed`` (a
        queue this agent consumes from), that it has a consumer."""
        self._watched[queue] = consumed

    def unwatch(self, queue: str) -> None:
        self._watched.pop(queue, None)

    async def lost_queues(self, connection: aiormq.abc.AbstractConnection) -> tuple[list[str], list[str]]:
        """(missing, unserved): the watched queues the broker no longer has, and the consumed ones
        it has with no consumer at all. Asked with passive declarations on a plain channel (a new
        one after each "not found": the broker closes the channel it answers on)."""
        missing, unserved = [], []
        channel = None
        try:
            for name, consumed in sorted(self._watched.items()):
                if channel is None or channel.is_closed:
                    channel = await connection.channel(publisher_confirms=False)
                try:
                    ok = await channel.queue_declare(name, passive=True)
                except aiormq.exceptions.ChannelNotFoundEntity:
                    missing.append(name)
                    continue
                if consumed and not ok.consumer_count:
                    unserved.append(name)
        finally:
            if channel is not None and not channel.is_closed:
                await channel.close()
        return missing, unserved

    def _closed_channels(self) -> list[str]:
        """The agent's own channels that are closed while the connection is up: a robust channel
        the broker closed (a channel error) whose restore then failed stays closed, and nothing
        restores it until the connection itself goes."""
        channels = (("requests", self._channel), ("answers", self._answer_channel))
        return [f"the {what} channel" for what, channel in channels if channel is not None and channel.is_closed]

    async def keep_queues(self) -> None:
        """For ever: every QUEUE_CHECK_INTERVAL, reconnect if a watched queue is gone or unserved."""
        while True:
            await asyncio.sleep(QUEUE_CHECK_INTERVAL)
            await self.check_queues()

    async def check_queues(self) -> list[str]:
        """One check: what was found lost (and, if anything, the connection is closed so that the
        robust connection reconnects and declares and consumes everything again). Lost are: a
        watched queue the broker no longer has; a consumed one without a consumer, or one of the
        agent's channels closed, at UNSERVED_CHECKS checks in a row (a consumer the broker
        cancelled is restored within a second or two, and a check may fall in between), once the
        robust connection has restored everything on its transport (until then nothing is lost
        but a restore that has not finished in RESTORE_WAIT).

        A consumer can go while its connection stays: on a 3-node cluster whose node had just
        been killed, a negotiator's request queue stayed without a consumer and every publish on
        its requests' channel failed, with its process and its connection up: no cycle ran again.

        A check the broker is slow to answer (a loaded broker can take many seconds) is left to
        finish, never cancelled: cancelling a channel's open or a declaration half way left
        aiormq and the broker disagreeing about the channel, and the broker closed the whole
        connection (CHANNEL_ERROR), which cost a 200,000-slot pool's collector its ads queue."""
        connection = self._plain_connection()
        if connection is None:
            self._strikes.clear()
            return []  # reconnecting already: it declares everything again
        if connection is not self._restored:
            return await self._restore_overdue(connection)
        if self._checking is not None and not self._checking.done():
            self.log.info("the last queue check on broker %s is still unanswered", self.broker)
            return []
        self._checking = checking = asyncio.ensure_future(self.lost_queues(connection))
        checking.add_done_callback(_retrieved)
        try:
            missing, unserved = await asyncio.wait_for(asyncio.shield(checking), QUEUE_CHECK_TIMEOUT)
        except (TimeoutError, *CONNECTION_EXCEPTIONS) as exc:  # the connection's own trouble: it sees to it
            self.log.info("could not check the queues on broker %s: %r", self.broker, exc)
            return []
        if self._plain_connection() is not connection:
            return []  # it reconnected meanwhile: what was found is of the last connection
        self._restoring = None
        self._strikes = {name: self._strikes.get(name, 0) + 1 for name in [*unserved, *self._closed_channels()]}
        stale = [name for name, count in self._strikes.items() if count >= UNSERVED_CHECKS]
        if missing:
            self.log.warning("broker %s no longer has %s: reconnecting to declare it again",
                             self.broker, ", ".join(missing))
        if stale:
            self.log.warning("no consumer of this agent's on %s at broker %s, or it is closed, %d checks in a "
                             "row: reconnecting to consume again", ", ".join(stale), self.broker, UNSERVED_CHECKS)
        return await self._reconnect(connection, [*missing, *stale])

    async def _restore_overdue(self, connection: aiormq.abc.AbstractConnection) -> list[str]:
        """A check while the robust connection still restores its channels on ``connection``:
        nothing counts as lost yet (its consumers and channels are not all back, a queue may not
        be declared again yet, and a restore may take seconds on a loaded cluster), unless the
        restore has not finished in RESTORE_WAIT: it waits on a declaration that will not be
        answered (aio-pika gives it no timeout)."""
        self._strikes.clear()
        if self._restoring is None or self._restoring[0] is not connection:
            self._restoring = (connection, time.monotonic())
        if time.monotonic() - self._restoring[1] < RESTORE_WAIT:
            return []
        self.log.warning("the restore of this agent's channels on broker %s has not finished in %.0f s: "
                         "reconnecting", self.broker, RESTORE_WAIT)
        return await self._reconnect(connection, ["the restore of its channels"])

    async def _reconnect(self, connection: aiormq.abc.AbstractConnection, lost: list[str]) -> list[str]:
        """Close ``connection`` when something is ``lost`` (the robust connection then reconnects
        and declares and consumes everything again); returns ``lost``."""
        if lost:
            self._strikes.clear()
            await connection.close(ConnectionError(f"lost: {', '.join(lost)}"))
        return lost

    def _plain_connection(self) -> aiormq.abc.AbstractConnection | None:
        """The open aiormq connection under the robust one, for plain channels of passive
        declarations; None while it is down or reconnecting."""
        robust = self._robust
        transport = robust.transport if robust is not None else None
        if robust is None or transport is None or transport.connection.is_closed or robust.reconnecting:
            return None
        return transport.connection

    async def queue_length(self, queue: str) -> int | None:
        """The messages ready in ``queue``, or None when the broker did not say (reconnecting, or
        no such queue). Asked with a passive declaration on a plain channel of its own, kept
        between calls: the "not found" of a queue not (yet) declared closes only that channel."""
        connection = self._plain_connection()
        if connection is None:
            return None
        try:
            if self._probe is None or self._probe.is_closed:
                self._probe = await connection.channel(publisher_confirms=False)
            ok = await self._probe.queue_declare(queue, passive=True)
        except (aiormq.exceptions.AMQPError, *CONNECTION_EXCEPTIONS):
            return None
        return int(ok.message_count or 0)


def _retrieved(done: asyncio.Future) -> None:
    """A check that ended after its caller stopped waiting: its failure is not an error to report."""
    if not done.cancelled():
        done.exception()


async def declare_event_stream(connection: AbstractRobustConnection, max_age: str, log: logging.Logger) -> bool:
    """Declare the job events' stream queue (bus.EVENT_STREAM: x-queue-type stream, x-max-age
    ``max_age``, e.g. "24h") bound to gridbus.events, on a channel of its own: a broker that refuses
    it (one declared before with other arguments, a broker without streams) closes only that channel,
    and the agent goes on without it (logged). True if declared."""
    channel = await connection.channel(publisher_confirms=False)
    spec = topology.QueueSpec(bus.EVENT_STREAM, True, {"x-queue-type": "stream", "x-max-age": max_age},
                              ((bus.EVENTS, bus.EVENT_STREAM_KEY),))
    try:
        # Looked at first (gridbus.agent.reconcile): a stream of another x-max-age is adopted, a
        # queue of another type migrated. Bounded: a cluster whose stream leader just died must
        # not hold the agent's start.
        durable, args = spec.durable, spec.arguments
        plain = connection.transport.connection if connection.transport is not None else None
        if plain is not None:
            durable, args = await asyncio.wait_for(reconcile.ensure(plain, spec, log), QUEUE_CHECK_TIMEOUT)
        queue = await channel.declare_queue(bus.EVENT_STREAM, durable=durable, timeout=QUEUE_CHECK_TIMEOUT,
                                            arguments=args)
        await queue.bind(bus.EVENTS, bus.EVENT_STREAM_KEY, timeout=QUEUE_CHECK_TIMEOUT)
        return True
    except Exception as exc:
        log.warning("the job events' stream queue %s was not declared: %s", bus.EVENT_STREAM, exc)
        return False
    finally:
        if not channel.is_closed:
            await channel.close()


async def declare_topology(channel: AbstractChannel, *, quorum: bool = False,
                           reconcile_on: aiormq.abc.AbstractConnection | None = None,
                           log: logging.Logger | None = None, members: reconcile.Members | None = None,
                           consumers: reconcile.ConsumersOf | None = None) -> None:
    """Declare gridbus's exchanges and the dead-letter queue (a quorum queue on a cluster);
    idempotent, any order. With ``reconcile_on`` (the plain connection under ``channel``'s), the
    dead-letter queue is looked at first and adopted or migrated as `gridbus.agent.reconcile` says."""
    for name, kind in bus.EXCHANGES:
        await channel.declare_exchange(name, kind, durable=True)
    spec = topology.dead_queue_spec(quorum=quorum)
    durable, args = spec.durable, spec.arguments
    if reconcile_on is not None:
        durable, args = await reconcile.ensure_waiting(reconcile_on, spec, log or logging.getLogger("gridbus"), members,
                                                       consumers)
    dead = await channel.declare_queue(bus.DEAD, durable=durable, arguments=args)
    await dead.bind(bus.DEAD, "")
