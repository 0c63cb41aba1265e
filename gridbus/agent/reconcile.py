"""A queue looked at before it is declared: found, judged (`gridbus.topology`), then declared,
adopted, migrated, or refused with a sentence.

Everything here speaks plain AMQP on channels of its own (a refused declaration closes the channel
it was sent on), so a daemon needs no management API. A queue's arguments are learnt by declaring
it again: the broker names the first argument that differs and its current value, and the
declaration is tried again with that value until the broker accepts it.

A queue is migrated only while nothing consumes it: the broker's count (which misses a stream's
consumers) and the management API's list (``consumers``, which names them) must both be empty, and
a stream nobody can say that of is not migrated either. Otherwise the daemon stops with a sentence
naming the consumers (`gridbus.topology.refusal`): a migration would take the messages from under
them, gridbus's own (a daemon of another version still running) or not (an integrator's reader).

A migration never loses a message. The queue's bindings move to a holding queue
(``<name>.migrating``) first, so that what is published meanwhile goes there; every message is
moved to it (published with confirms before it is acknowledged); the queue is deleted and declared
anew; then the holding queue's messages come back and it is deleted. A migration cut short is
finished by the next start, which finds the holding queue.

A quorum queue without a majority of its nodes online (a cluster restarted with one node of
three) is still declared at once, but nothing can be published to it or consumed from it: its
members are asked first (the management API's ``online`` and ``members``), and the daemon says
that the cluster has lost its majority and tries again until it is back (`ClusterUnavailable`),
as for a declaration the broker does not answer in time; it does not exit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiormq
from aiormq.abc import AbstractChannel, AbstractConnection, DeliveredMessage
from pamqp.commands import Basic

from gridbus.errors import NoRestart
from gridbus.topology import (
    MIGRATING_SUFFIX,
    Consumers,
    Found,
    QueueSpec,
    current_of_refusal,
    describe,
    judge,
    refusal,
    unseen_readers,
)

DECLARE_TIMEOUT = 15.0  # a declaration unanswered this long: the cluster has lost its majority
RETRY_INTERVAL = 5.0
_MAX_PROBES = 16  # arguments told apart one by one; no gridbus queue has half as many


class QueueConflict(NoRestart):
    """A queue this daemon may not use nor migrate; the message is the sentence to stop with."""


class ClusterUnavailable(RuntimeError):
    """The broker does not answer for a queue (a quorum queue without a majority)."""


# (online, members): the nodes of a quorum queue, None where the broker does not say.
Members = Callable[[str], Awaitable[tuple[list[str], list[str]] | None]]
# Who consumes a queue, from the management API; None where it does not answer.
ConsumersOf = Callable[[str], Awaitable[Consumers | None]]


async def _channel(connection: AbstractConnection) -> AbstractChannel:
    return await connection.channel(publisher_confirms=True)


async def find(connection: AbstractConnection, name: str, *, durable: bool, arguments: dict[str, Any]) -> Found | None:
    """The queue ``name`` as the broker has it, None if there is none. ``durable`` and
    ``arguments`` are the first guess at its declaration (what this version wants)."""
    channel = await _channel(connection)
    try:
        ok = await channel.queue_declare(name, passive=True, timeout=DECLARE_TIMEOUT)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return None
    except TimeoutError as exc:
        raise ClusterUnavailable(name) from exc
    messages, consumers = int(ok.message_count or 0), int(ok.consumer_count or 0)
    if not channel.is_closed:
        await channel.close()
    args = dict(arguments)
    for _ in range(_MAX_PROBES):
        channel = await _channel(connection)
        try:
            await channel.queue_declare(name, durable=durable, arguments=args, timeout=DECLARE_TIMEOUT)
        except aiormq.exceptions.ChannelPreconditionFailed as exc:
            told = current_of_refusal(str(exc), args)
            if told is None:
                raise QueueConflict(f"the broker refuses to declare queue {name} ({exc}); run `gridbus broker check`") from exc
            arg, value = told
            if arg == "durable":
                durable = bool(value)
            elif value is None:
                args.pop(arg, None)
            else:
                args[arg] = value
            continue
        except TimeoutError as exc:
            raise ClusterUnavailable(name) from exc
        if not channel.is_closed:
            await channel.close()
        return Found(durable, args, messages, consumers)
    raise QueueConflict(f"could not learn the arguments of queue {name}; run `gridbus broker check`")


async def ensure(connection: AbstractConnection, spec: QueueSpec, log: logging.Logger,
                 members: Members | None = None, consumers: ConsumersOf | None = None) -> tuple[bool, dict[str, Any]]:
    """Make ``spec.name`` usable: (durable, arguments) to declare it with from now on (those it has
    when adopted). Raises QueueConflict with the sentence to stop with (a queue to migrate that
    something consumes, by the broker's count or ``consumers``), ClusterUnavailable when
    ``members`` says the (quorum) queue has lost its majority."""
    durable, arguments = await _ensure(connection, spec, log, consumers)
    if members is not None and arguments.get("x-queue-type") == "quorum":
        nodes = await members(spec.name)
        if nodes is not None and len(nodes[0]) * 2 <= len(nodes[1]):
            online, every = nodes
            raise ClusterUnavailable(f"queue {spec.name} has {len(online)} of its {len(every)} nodes online "
                                     f"({', '.join(online) or 'none'})")
    return durable, arguments


async def _ensure(connection: AbstractConnection, spec: QueueSpec, log: logging.Logger,
                  consumers: ConsumersOf | None) -> tuple[bool, dict[str, Any]]:
    holding = await find(connection, spec.name + MIGRATING_SUFFIX, durable=True, arguments={})
    found = await find(connection, spec.name, durable=spec.durable, arguments=spec.arguments)
    if holding is not None:  # a migration cut short: finish it
        log.warning("queue %s%s holds messages of a migration cut short; finishing it", spec.name, MIGRATING_SUFFIX)
        await _finish(connection, spec, found, log, consumers)
        return spec.durable, spec.arguments
    verdict = judge(spec, found)
    if verdict.action == "declare":
        channel = await _channel(connection)
        await channel.queue_declare(spec.name, durable=spec.durable, arguments=spec.arguments, timeout=DECLARE_TIMEOUT)
        await channel.close()
        return spec.durable, spec.arguments
    assert found is not None
    if verdict.action == "same":
        return spec.durable, spec.arguments
    if verdict.action == "adopt":
        log.warning("queue %s exists as %s where this version declares %s (%s): used as it is; `gridbus broker "
                    "check --fix` declares it anew", spec.name, describe(found.durable, found.arguments),
                    describe(spec.durable, spec.arguments), "; ".join(verdict.differences))
        return found.durable, found.arguments
    # "refuse" (the broker counts consumers) and "migrate" alike: `migrate` asks who consumes it
    # first, and refuses with their names.
    await migrate(connection, spec, found, log, consumers)
    log.warning("queue %s existed as %s; this version needs %s: its %d message(s) moved to the queue declared anew",
                spec.name, describe(found.durable, found.arguments), describe(spec.durable, spec.arguments),
                found.messages)
    return spec.durable, spec.arguments


async def ensure_waiting(connection: AbstractConnection, spec: QueueSpec, log: logging.Logger,
                         members: Members | None = None,
                         consumers: ConsumersOf | None = None) -> tuple[bool, dict[str, Any]]:
    """`ensure`, tried again every RETRY_INTERVAL while the cluster cannot serve the queue."""
    while True:
        try:
            return await ensure(connection, spec, log, members, consumers)
        except ClusterUnavailable as exc:
            why = str(exc) if str(exc) != spec.name else f"the broker does not answer for queue {spec.name} within {DECLARE_TIMEOUT:.0f} s"
            log.error("the RabbitMQ cluster has lost the majority of its nodes: %s; start the nodes that are down "
                      "(trying again in %.0f s)", why, RETRY_INTERVAL)
            await asyncio.sleep(RETRY_INTERVAL)


async def refuse_if_consumed(spec: QueueSpec, found: Found, consumers: ConsumersOf | None) -> None:
    """Raise QueueConflict, with the sentence naming them, if anything consumes the queue ``found``
    (the broker's count, or ``consumers``); also for a stream when ``consumers`` cannot say (the
    broker does not count a stream's consumers)."""
    seen = await consumers(spec.name) if consumers is not None else None
    if found.consumers or (seen is not None and seen.any):
        raise QueueConflict(refusal(spec, found, seen))
    if seen is None and found.queue_type == "stream":
        raise QueueConflict(unseen_readers(spec, found))


async def migrate(connection: AbstractConnection, spec: QueueSpec, found: Found, log: logging.Logger,
                  consumers: ConsumersOf | None = None) -> None:
    """Declare ``spec.name`` anew as ``spec`` says, keeping every message of the queue ``found``;
    refused (QueueConflict) while anything consumes it (`refuse_if_consumed`)."""
    await refuse_if_consumed(spec, found, consumers)
    holding = spec.name + MIGRATING_SUFFIX
    channel = await _channel(connection)
    # The holding queue takes any message: no limit, the wanted type (replicated on a cluster).
    await channel.queue_declare(holding, durable=True, arguments=_type_only(spec.arguments))
    for exchange, key in spec.bindings:
        await channel.queue_bind(holding, exchange, routing_key=key)
        await channel.queue_unbind(spec.name, exchange, routing_key=key)
    moved = await _move(channel, spec.name, holding, stream=found.queue_type == "stream")
    log.info("queue %s: %d message(s) moved to %s", spec.name, moved, holding)
    await channel.queue_delete(spec.name)
    await channel.close()
    await _finish(connection, spec, None, log)


async def _finish(connection: AbstractConnection, spec: QueueSpec, found: Found | None, log: logging.Logger,
                  consumers: ConsumersOf | None = None) -> None:
    """The second half of a migration: the queue declared as wanted, bound, and the holding queue's
    messages back in it."""
    holding = spec.name + MIGRATING_SUFFIX
    # The queue still (or again) declared otherwise: its messages join the holding queue first.
    stale = found if found is not None and judge(spec, found).action not in ("same", "adopt") else None
    if stale is not None:
        await refuse_if_consumed(spec, stale, consumers)
    channel = await _channel(connection)
    if stale is not None:
        moved = await _move(channel, spec.name, holding, stream=stale.queue_type == "stream")
        log.info("queue %s: %d more message(s) moved to %s", spec.name, moved, holding)
        await channel.queue_delete(spec.name)
        found = None
    declared = (spec.durable, spec.arguments) if found is None else (found.durable, found.arguments)
    await channel.queue_declare(spec.name, durable=declared[0], arguments=declared[1])
    for exchange, key in spec.bindings:
        await channel.queue_bind(spec.name, exchange, routing_key=key)
        await channel.queue_unbind(holding, exchange, routing_key=key)
    moved = await _move(channel, holding, spec.name, stream=False)
    # Unbound and emptied, nothing reaches it any more (a quorum queue has no if-empty delete).
    await channel.queue_delete(holding)
    log.info("queue %s declared anew as %s; %d message(s) back in it", spec.name,
             describe(declared[0], declared[1]), moved)
    await channel.close()


def _type_only(arguments: dict[str, Any]) -> dict[str, Any]:
    # Replicated where the queue is; never a stream, which basic.get cannot empty.
    return {"x-queue-type": "quorum"} if arguments.get("x-queue-type") == "quorum" else {}


async def _move(channel: AbstractChannel, source: str, target: str, *, stream: bool) -> int:
    """Move every message of ``source`` to ``target``: each published with a confirm before it is
    acknowledged, so a message is in one queue or in both, never in neither."""
    if stream:
        return await _move_stream(channel, source, target)
    moved = 0
    while True:
        message = await channel.basic_get(source)
        if message.delivery_tag is None:  # Basic.GetEmpty
            return moved
        await _republish(channel, message, target)
        await channel.basic_ack(_tag(message))
        moved += 1


async def _republish(channel: AbstractChannel, message: DeliveredMessage, target: str) -> None:
    properties = message.header.properties
    if properties.headers:
        properties.headers = {k: v for k, v in properties.headers.items() if k != "x-stream-offset"} or None
    confirm = await channel.basic_publish(message.body, exchange="", routing_key=target, properties=properties)
    if not isinstance(confirm, Basic.Ack):
        raise QueueConflict(f"the broker did not take a message moved to queue {target} ({confirm!r}); "
                            f"the message is still in its queue: run `gridbus broker check --fix` again")


_END_MARK = "gridbus-migration-end"


async def _move_stream(channel: AbstractChannel, source: str, target: str) -> int:
    """A stream is read from its first offset; a mark published to it (once nothing else can
    reach it: its bindings are gone) says where it ends, since a stream has no "empty"."""
    mark = Basic.Properties(headers={_END_MARK: True})
    await channel.basic_publish(b"", exchange="", routing_key=source, properties=mark)
    await channel.basic_qos(prefetch_count=100)
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    moved = 0

    async def on_message(message: DeliveredMessage) -> None:
        nonlocal moved
        if (message.header.properties.headers or {}).get(_END_MARK):
            await channel.basic_ack(_tag(message))
            if not done.done():
                done.set_result(moved)
            return
        try:
            await _republish(channel, message, target)
        except Exception as exc:
            if not done.done():
                done.set_exception(exc)
            return
        await channel.basic_ack(_tag(message))
        moved += 1

    ok = await channel.basic_consume(source, on_message, arguments={"x-stream-offset": "first"})
    try:
        return await done
    finally:
        if ok.consumer_tag:
            await channel.basic_cancel(ok.consumer_tag)


def _tag(message: DeliveredMessage) -> int:
    """A consumed message's delivery tag (aiormq types it optional; a delivery always has one)."""
    tag = message.delivery_tag
    if tag is None:
        raise RuntimeError("a delivered message without a delivery tag")
    return tag
