"""The dispatcher: an agent's request queue, and every request on it served and answered.

An agent's request queue is named for its address ``<kind>@<name>`` and bound on ``gridbus.rpc``
to that address, to the broadcast key and to the keys of the classes it serves. Every request is
decoded and is either a query (getObjects: the records of the agent's objects) or a method call:
the object is resolved to its class, the caller checked against the method's access rule, the
arguments validated against the schema, and the handler run; its answer (or its stream of partial
answers) goes to the caller's reply-to with the request's correlation id. A message that cannot be
processed is answered with the reason when a reply is possible, logged, and dead-lettered to
``gridbus.dead``; the agent keeps serving. A request is acknowledged only after its answer is
published, so nothing acknowledged is lost.

What the agent serves is the agent's (`Host`: its objects, who may call, its handlers); the
dispatcher owns the path of a message from the queue to its answer.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue

from gridbus import bus, protocol, wire
from gridbus.agent import access
from gridbus.agent.common import COMMON_CLASS
from gridbus.agent.objects import Call
from gridbus.classad.limits import EvaluationLimitExceeded
from gridbus.schema import DEFAULT_MAX_BYTES, Method, Schema, validate_args
from gridbus.status import CANNED_TEXT, MethodError, Status, cap_text
from gridbus.topology import QueueSpec

# Statuses the framework gives a malformed request: those requests go to the dead-letter queue.
_DEAD_LETTER_STATUSES = {Status.UNKNOWN_OBJECT, Status.UNKNOWN_METHOD, Status.INVALID_PARAMETER}



class Host(access.Authorizer, Protocol):
    """What the dispatcher asks of the agent it serves."""

    address: str

    def resolve_object(self, name: str) -> str | None: ...
    async def find_objects(self, class_name: str | None, filters: dict[str, Any], user: str | None) -> list[dict]: ...
    def spawn(self, coro: Any, name: str | None = None) -> Any: ...


ADDRESS_FREE_WAIT = 5.0  # seconds a starting agent waits for another consumer of its address to go


Reconciler = Callable[[QueueSpec], Awaitable[tuple[bool, dict[str, Any]]]]


class AddressInUse(RuntimeError):
    """Another agent consumes the requests of this agent's address."""


class Dispatcher:
    def __init__(self, host: Host, schema: Schema, classes: tuple[str, ...],
                 handlers: Mapping[tuple[str, str], Any], log: logging.Logger, stats: dict[str, Any]):
        self.host = host
        self.schema = schema
        self.classes = classes  # the first is the agent's own object's, which has the common methods
        self.handlers = handlers
        self.log = log
        self.stats = stats  # the agent's statistics: requests served, failed, in flight are counted here
        # RequestsRuntime: seconds spent serving method calls, answered or failed (a Prometheus
        # summary's sum, with RequestsServed + RequestsFailed its count: the mean RPC latency).
        stats.update({"RequestsServed": 0, "RequestsFailed": 0, "RequestsInFlight": 0, "AnswersAbandoned": 0,
                      "RequestsRuntime": 0.0})
        # The largest request any method takes (checked before decoding).
        sizes = [m.max_bytes for c in schema.classes.values() for m in c.methods.values()]
        self.largest_request = max(sizes, default=DEFAULT_MAX_BYTES)
        self._channel: AbstractChannel | None = None
        self._answers: AbstractChannel | None = None
        self._queue: AbstractQueue | None = None
        self._consumer_tag: str | None = None
        self._stopped = False

    # ------------------------------------------------------------------ the queue
    async def consume(self, channel: AbstractChannel, *, durable: bool, arguments: dict[str, Any],
                      answers: AbstractChannel | None = None, reconciled: Reconciler | None = None) -> None:
        """Declare and bind the request queue on ``channel`` and serve what comes on it; answers go
        on ``answers`` (a channel of their own, so they never wait behind the agent's other
        publishes), or on ``channel``. ``reconciled`` looks at a queue left by an earlier start
        first (adopted as it is, or migrated: `gridbus.agent.reconcile`)."""
        self._channel = channel
        self._answers = answers or channel
        self._stopped = False
        address = self.host.address
        keys = sorted({address, bus.BROADCAST_KEY, *(bus.class_key(c) for c in self.classes)})
        if reconciled is not None:
            spec = QueueSpec(bus.rpc_queue(address), durable, arguments, tuple((bus.RPC, k) for k in keys))
            durable, arguments = await reconciled(spec)
        queue = await channel.declare_queue(bus.rpc_queue(address), durable=durable, arguments=arguments)
        await self._check_address_free(queue, address)
        for key in keys:
            await queue.bind(bus.RPC, key)
        self._queue = queue
        self._consumer_tag = await queue.consume(self._on_message)

    async def _check_address_free(self, queue: AbstractQueue, address: str) -> None:
        """Refuse to start while another agent consumes this address's requests: two agents of one
        address (a second personal pool on the same vhost, named after the same host) would split
        its requests between them, each answering for claims and jobs it does not hold. A
        predecessor that died a moment ago is waited for: the broker drops its consumer when it
        sees its connection closed."""
        deadline = time.monotonic() + ADDRESS_FREE_WAIT
        while queue.declaration_result.consumer_count:
            if time.monotonic() >= deadline:
                message = (f"another agent already serves {address} on this broker vhost (its request queue "
                           f"{queue.name} has {queue.declaration_result.consumer_count} consumer(s)); stop it, "
                           "or give this one another name or a vhost of its own")
                self.log.error("%s", message)
                raise AddressInUse(message)
            await asyncio.sleep(0.25)
            await queue.declare()

    async def stop(self) -> None:
        """Take no new request: what is left in the queue is served by the next instance, or expires."""
        self._stopped = True
        if self._queue is not None and self._consumer_tag is not None:
            try:
                await self._queue.cancel(self._consumer_tag)
            except Exception:
                self.log.warning("could not stop consuming requests", exc_info=True)
            self._consumer_tag = None

    # ------------------------------------------------------------------ methods of the schema
    def schema_methods(self, class_name: str) -> dict[str, Method]:
        """The methods of ``class_name``; the agent's own object (its first class) also has the
        common ones, which its class may override by name."""
        try:
            own = self.schema.cls(class_name).methods
        except KeyError:
            own = {}
        if not self.classes or class_name != self.classes[0]:
            return dict(own)
        try:
            common = self.schema.cls(COMMON_CLASS).methods
        except KeyError:  # a schema of its own without the common class
            common = {}
        return {**common, **own}

    def handler_key(self, class_name: str, name: str) -> tuple[str, str]:
        if (class_name, name) not in self.handlers and self.classes and class_name == self.classes[0]:
            if (COMMON_CLASS, name) in self.handlers:
                return (COMMON_CLASS, name)
        return (class_name, name)

    def method_names(self, class_name: str) -> dict[str, list[str]]:
        """Method name -> its input argument names, so a console can map positional arguments."""
        return {m.name: [a.name for a in m.inputs] for m in self.schema_methods(class_name).values()}

    # ------------------------------------------------------------------ serving
    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        if self._stopped:  # delivered before the consumer was cancelled: back to the queue
            await message.nack(requeue=True)
            return
        self.host.spawn(self._serve(message), "request")

    async def _serve(self, message: AbstractIncomingMessage) -> None:
        self.stats["RequestsInFlight"] += 1
        dead = False
        try:
            size = len(message.body)
            if size > self.largest_request:
                self.log.warning("refusing a request of %d bytes from %s", size, message.user_id)
                text = (f"a request of {size:,} bytes is over the largest {self.host.address} takes "
                        f"({self.largest_request:,} bytes)")
                await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": text}, wire.JSON)
                return
            refused = protocol.refusal(message.headers, message.app_id or message.user_id or "")
            if refused is not None:
                self.log.warning("dead-lettering a request: %s", refused)
                await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": refused}, wire.JSON)
                dead = True
                return
            try:
                body = wire.decode(message.body, message.content_type)
            except wire.DecodeError as exc:
                self.log.warning("dead-lettering undecodable message from %s: %s", message.user_id, exc)
                await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": str(exc)}, wire.JSON)
                dead = True
                return
            ctype = message.content_type if message.content_type in wire.CONTENT_TYPES else wire.MSGPACK
            is_query = message.type == bus.T_QUERY_REQUEST or (
                isinstance(body, dict) and "method" not in body and "class" in body
            )
            if is_query:
                dead = await self._serve_query(message, body, ctype)
            else:
                dead = await self._serve_method(message, body, ctype)
        except Exception:  # never die on a message
            self.log.exception("unexpected failure serving a request")
        finally:
            self.stats["RequestsInFlight"] -= 1
            try:
                if dead:
                    await message.reject(requeue=False)
                else:
                    await message.ack()
            except Exception:
                self.log.warning("could not settle a request (connection lost?)", exc_info=True)

    async def _serve_query(self, message: AbstractIncomingMessage, body: Any, ctype: str) -> bool:
        if not isinstance(body, dict):
            await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": "a query must be a map"}, ctype)
            return True
        class_name = body.get("class") or None
        filters = body.get("filters") or {}
        if not (class_name is None or isinstance(class_name, str)) or not isinstance(filters, dict):
            text = "a query's class must be a class name (a string) and its filters a map of property values"
            await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": text}, ctype, bus.T_QUERY_RESPONSE)
            self.stats["RequestsFailed"] += 1
            return True
        try:
            records = await self.host.find_objects(class_name.lower() if class_name else None, filters, message.user_id)
            reply = {"status": 0, "text": "OK", "out": {"objects": records}}
        except MethodError as exc:
            reply = {"status": exc.status, "text": exc.text}
        except Exception as exc:
            self.log.exception("getObjects failed")
            reply = {"status": Status.EXCEPTION, "text": f"getObjects failed: {type(exc).__name__}: {exc}"}
        await self._answer(message, reply, ctype, bus.T_QUERY_RESPONSE)
        self.stats["RequestsServed"] += 1
        return False

    async def _serve_method(self, message: AbstractIncomingMessage, body: Any, ctype: str) -> bool:
        started = time.monotonic()
        user = message.user_id or None
        try:
            call = self.make_call(body, user, message.correlation_id, len(message.body))
        except MethodError as exc:
            self.log.warning("dead-lettering a bad request from %s: %s", user, cap_text(exc.text, 300))
            await self._answer(message, {"status": exc.status, "text": exc.text}, ctype)
            self.stats["RequestsFailed"] += 1
            return exc.status in _DEAD_LETTER_STATUSES
        class_name = self.host.resolve_object(call.object) or ""
        handler = self.handlers[self.handler_key(class_name, call.method)]
        try:
            result = handler(call, **call.args)
            if inspect.isasyncgen(result):
                await self._stream(message, result, ctype)
            else:
                out = await result
                await self._answer(message, {"status": 0, "text": "OK", "out": out or {}}, ctype)
            self.stats["RequestsServed"] += 1
        except MethodError as exc:
            self.stats["RequestsFailed"] += 1
            await self._answer(message, {"status": exc.status, "text": exc.text, "out": exc.out}, ctype)
        except EvaluationLimitExceeded as exc:  # an expression the caller sent went past a bound
            self.stats["RequestsFailed"] += 1
            await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": f"{call.method}: {exc}"}, ctype)
        except Exception as exc:
            self.stats["RequestsFailed"] += 1
            self.log.error("%s.%s raised:\n%s", class_name, call.method, cap_text(traceback.format_exc(), 4000))
            text = f"internal error in {call.method}: {type(exc).__name__}: {exc}"
            await self._answer(message, {"status": Status.EXCEPTION, "text": text}, ctype)
        elapsed = time.monotonic() - started
        self.stats["RequestsRuntime"] += elapsed
        if elapsed > 1.0:
            self.log.info("%s took %.2f s", call.method, elapsed)
        return False

    def make_call(self, body: Any, user: str | None, correlation_id: str | None, size: int = 0) -> Call:
        """The call a request body makes, checked: the object exists, the method is in the
        schema and implemented, the request is within the method's size, the caller may call it,
        and the arguments are valid. MethodError (with the status to answer) if not."""
        if not isinstance(body, dict):
            raise MethodError(Status.INVALID_PARAMETER, f"a request must be a map, not {type(body).__name__}")
        obj = body.get("object") or self.host.address
        name = body.get("method")
        if not isinstance(obj, str):
            raise MethodError(Status.INVALID_PARAMETER, "'object' must be a string naming the object")
        if not isinstance(name, str) or not name:
            raise MethodError(Status.INVALID_PARAMETER, "the request names no 'method'")
        class_name = self.host.resolve_object(obj)
        if class_name is None:
            raise MethodError(Status.UNKNOWN_OBJECT, f"{self.host.address} has no object {obj!r}")
        schema_method = self.schema_methods(class_name).get(name)
        if schema_method is None:
            known = ", ".join(self.method_names(class_name)) or "none"
            raise MethodError(Status.UNKNOWN_METHOD, f"class {class_name} has no method {name!r} (methods: {known})")
        if self.handler_key(class_name, name) not in self.handlers:
            raise MethodError(Status.NOT_IMPLEMENTED, f"{class_name}.{name} is not implemented by {self.host.address}")
        if size > schema_method.max_bytes:
            raise MethodError(
                Status.INVALID_PARAMETER,
                f"{name}: a request of {size:,} bytes is over the method's bound of {schema_method.max_bytes:,} bytes",
            )
        access.check(self.host, schema_method, class_name, obj, user)  # before the arguments: nothing of
        args = validate_args(schema_method, body.get("args"))  # a refused call is looked at
        return Call(user, obj, name, args, correlation_id, self.host.is_admin(user))

    async def _stream(self, message: AbstractIncomingMessage, gen: Any, ctype: str) -> None:
        # The caller's timeout (x-gridbus-timeout-ms) is for the whole answer: past it, counted
        # from the delivery, the caller has given up and the rest would be made for nobody. (A
        # collector of 200,000 slots kept streaming the Query of a negotiator that had timed out
        # and tried again, each a stream of 400 chunks, while its ads queue overflowed.)
        header = (message.headers or {}).get("x-gridbus-timeout-ms")
        timeout_ms = header if type(header) is int and header > 0 else 0
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        chunks = 0
        try:
            async for chunk in gen:
                if deadline is not None and time.monotonic() > deadline:
                    await gen.aclose()
                    self.stats["AnswersAbandoned"] += 1
                    self.log.info("the rest of an answer was dropped after %d chunk(s): its caller's timeout of "
                                  "%.3g s has passed", chunks, timeout_ms / 1000)
                    return
                await self._answer(message, {"status": 0, "text": "OK", "out": chunk, "partial": True}, ctype)
                chunks += 1
        except MethodError as exc:
            await self._answer(message, {"status": exc.status, "text": exc.text}, ctype)
            raise
        await self._answer(message, {"status": 0, "text": "OK", "out": {}}, ctype)

    async def _answer(self, message: AbstractIncomingMessage, reply: dict, ctype: str,
                      mtype: str = bus.T_METHOD_RESPONSE) -> None:
        if not message.reply_to:
            return
        reply.setdefault("text", CANNED_TEXT.get(reply.get("status", 0), ""))
        reply["text"] = cap_text(reply["text"])  # an answer never repeats a huge argument whole
        reply.setdefault("partial", False)
        try:
            body = wire.encode(reply, ctype)
        except TypeError as exc:
            body = wire.encode({"status": Status.EXCEPTION, "text": f"unencodable answer: {exc}", "partial": False}, ctype)
        assert self._answers is not None
        # mandatory=False: RabbitMQ 3.10 returns a delivered direct reply-to message as unroutable.
        await self._answers.default_exchange.publish(
            aio_pika.Message(body, content_type=ctype, correlation_id=message.correlation_id, type=mtype,
                             app_id=self.host.address, headers=protocol.headers()),
            routing_key=message.reply_to,
            mandatory=False,
        )

