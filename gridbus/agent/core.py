"""The agent: one gridbus daemon on the broker.

An agent has an address ``<kind>@<name>``, which is its routing key on ``gridbus.rpc`` and the name
of its request queue. It serves the management classes the schema declares for it: every request
is decoded, its arguments are validated against the schema, the handler runs, and the answer goes
back to the caller's reply-to with the request's correlation id. A message that cannot be
processed is answered with the reason when a reply is possible, logged, and dead-lettered to
``gridbus.dead``; the agent keeps serving. A request is acknowledged only after its answer is
published, so nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import time
import traceback
import uuid
from collections.abc import Iterable
from typing import Any

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from gridbus import bus, wire
from gridbus.agent import access, failover
from gridbus.agent.advertising import ADS_PER_MESSAGE as ADS_PER_MESSAGE  # re-exported
from gridbus.agent.advertising import Advertising
from gridbus.agent.client import AsyncClient
from gridbus.agent.common import CommonMethods
from gridbus.agent.objects import Call, ManagedObject
from gridbus.classad.limits import EvaluationLimitExceeded
from gridbus.schema import DEFAULT_MAX_BYTES, Schema, builtin, validate_args
from gridbus.status import CANNED_TEXT, MethodError, Status, cap_text

# Statuses the framework gives a malformed request: those requests go to the dead-letter queue.
_DEAD_LETTER_STATUSES = {Status.UNKNOWN_OBJECT, Status.UNKNOWN_METHOD, Status.INVALID_PARAMETER}


# A confirmed publish waits this long for the broker's confirm, and is sent again for this long
# (long enough for a failover to another broker node, or a restarted broker).
CONFIRM_TIMEOUT = 5.0
CONFIRM_RETRY = 30.0


class Agent(Advertising, CommonMethods):
    """Base class of every gridbus daemon. Subclasses set `kind` and `classes` and add handlers."""

    kind = "agent"
    classes: tuple[str, ...] = ()  # management classes this agent serves (schema names)
    my_type = "Generic"  # MyType of its daemon ad
    durable_requests = False  # the schedd keeps requests sent while it restarts
    # "quorum" makes the durable queues (a durable request queue, the dead-letter queue) replicated
    # quorum queues, which survive the loss of a broker node (and a classic durable queue whose node
    # is down cannot even be re-declared elsewhere); "classic" lives on one node; "auto" is quorum
    # when GRIDBUS_URL lists several brokers (a cluster) and classic for one.
    request_queue_type = "auto"

    def __init__(
        self,
        name: str | None = None,
        url: str | None = None,
        *,
        schema: Schema | None = None,
        update_interval: float = 300.0,
        lifetime: float | None = None,
        admins: Iterable[str] = (),
        prefetch: int = 64,
    ):
        self.name = name or f"{os.getpid()}@{socket.gethostname()}"
        self.address = f"{self.kind}@{self.name}"
        self.url = bus.BrokerURL(url or bus.default_url())
        self.schema = schema or builtin()
        self.update_interval = float(update_interval)
        self.lifetime = float(lifetime if lifetime is not None else 3 * self.update_interval)
        self.admins = set(admins) | {self.url.user}
        self.prefetch = prefetch
        self.log = logging.getLogger(f"gridbus.{self.kind}")
        started = time.time()
        self.start_time = int(started)  # DaemonStartTime: whole seconds, as HTCondor's
        self.objects: dict[str, ManagedObject] = {}
        self.stats: dict[str, int] = {"RequestsServed": 0, "RequestsFailed": 0, "RequestsInFlight": 0}
        self._handlers = self._collect_handlers()
        # UpdateSequenceNumber counts from the microsecond of the start within its second, so a
        # daemon restarted within the same DaemonStartTime second outranks its predecessor's
        # updates in the collector (which keeps the newest (DaemonStartTime, sequence) per ad).
        self._sequence = int((started - self.start_time) * 1_000_000)
        self._connection: AbstractRobustConnection | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self._confirm_channel: aio_pika.abc.AbstractChannel | None = None  # publisher confirms
        self._client: AsyncClient | None = None
        self._tasks: set[asyncio.Task] = set()
        self._ads_wanted: asyncio.Event | None = None  # made in start(), on the agent's loop
        self._advertiser: asyncio.Task | None = None
        self._published: dict[str, set[str]] = {}  # MyType -> names sent in the last round
        self._stopping = False
        self.ready: asyncio.Event | None = None
        self._stop_requested: asyncio.Event | None = None  # set by run(); request_stop sets it
        for class_name in self.classes:
            self.add_object(ManagedObject(class_name, self.address, self.object_properties, self.object_statistics))

    # ------------------------------------------------------------------ declaration helpers
    @classmethod
    def _collect_handlers(cls) -> dict[tuple[str, str], Any]:
        handlers = {}
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                key = getattr(attr, "_gridbus_method", None)
                if key:
                    handlers[key] = attr
        return handlers

    def add_object(self, obj: ManagedObject) -> None:
        self.objects[obj.name] = obj

    def object_properties(self) -> dict[str, Any]:
        return {"Name": self.name, "MyAddress": self.address, "DaemonStartTime": self.start_time}

    def object_statistics(self) -> dict[str, Any]:
        return dict(self.stats)

    # ------------------------------------------------------------------ ads
    def daemon_ad(self) -> dict[str, Any]:
        """The agent's own ad; subclasses extend it with what they advertise."""
        return {
            "MyType": self.my_type,
            "Name": self.name,
            "MyAddress": self.address,
            "Machine": socket.gethostname(),
            "DaemonStartTime": self.start_time,
            "UpdateInterval": self.update_interval,
            **self.stats,
        }

    # ------------------------------------------------------------------ events and calls
    async def publish(self, exchange: str, key: str, body: Any, mtype: str, *, confirm: bool = False) -> None:
        """Publish ``body`` on ``exchange``. With ``confirm``, for messages whose loss would matter
        (job events), the broker confirms it, and a publish lost with its connection or refused is
        sent again, on the next broker if it fails over, for up to CONFIRM_RETRY seconds; a
        consumer recognises a resent message by its unchanged id (message_id, the body's EventId)."""
        assert self._channel is not None, "agent not started"
        message = aio_pika.Message(wire.encode(body), content_type=wire.MSGPACK, type=mtype, app_id=self.address,
                                   message_id=body.get("EventId") if isinstance(body, dict) else None)
        if not confirm or self._confirm_channel is None:
            ex = await self._channel.get_exchange(exchange, ensure=False)
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

    async def publish_event(self, kind: str, event: str, who: str, body: dict[str, Any]) -> None:
        """Publish a job or daemon event on gridbus.events (``job.<event>.<owner>``), confirmed."""
        payload = {"event": event, "time": time.time(), "source": self.address,
                   "EventId": uuid.uuid4().hex, **body}
        await self.publish(bus.EVENTS, bus.event_key(kind, event, who), payload, bus.T_EVENT, confirm=True)

    @property
    def client(self) -> AsyncClient:
        assert self._client is not None, "agent not started"
        return self._client

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        """Hook: runs after the connection is up and before requests are consumed."""

    async def on_start(self) -> None:
        """Hook: runs once the agent serves requests (start background work here)."""

    async def on_stop(self) -> None:
        """Hook: runs before the connection closes on a graceful stop."""

    def spawn(self, coro: Any, name: str | None = None) -> asyncio.Task:
        """Run a background task that is cancelled on stop and whose failure is logged."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.log.error("task %s failed: %r", task.get_name(), exc, exc_info=exc)

    async def start(self) -> None:
        self._ads_wanted = asyncio.Event()
        self.ready = asyncio.Event()
        self._config_baseline()
        self.start_duty_cycle()
        # Every broker GRIDBUS_URL lists, in turn: a lost connection moves to the next that answers
        # (a restarted broker or a closed connection is back within a second).
        self._connection = await failover.connect(self.url, name=f"gridbus {self.address}", reconnect_interval=1)
        self._connection.reconnect_callbacks.add(self._on_reconnect)
        self._channel = await self._connection.channel(publisher_confirms=False)
        await self._channel.set_qos(prefetch_count=self.prefetch)
        self._confirm_channel = await self._connection.channel(publisher_confirms=True)
        await self.declare_topology(self._channel, quorum=self.durable_queue_type() == "quorum")
        self._client = AsyncClient(self._channel, self.url.user, self.address)
        await self._client.start()
        await self.setup()
        queue = await self._channel.declare_queue(
            bus.rpc_queue(self.address), durable=self.durable_requests, arguments=self.request_queue_arguments()
        )
        for key in {self.address, bus.BROADCAST_KEY, *(bus.class_key(c) for c in self.classes)}:
            await queue.bind(bus.RPC, key)
        await queue.consume(self._on_message)
        await self.on_start()
        # Who held claims or state with this address's predecessor hears that it is a new process
        # (a schedd asks a restarted startd about its claims at once, not at its next Alive round).
        try:
            await self.publish_event("daemon", "start", self.kind,
                                     {"address": self.address, "DaemonStartTime": self.start_time})
        except Exception:  # an event is a hint; the periodic checks still come
            self.log.warning("could not publish the start event", exc_info=True)
        self._advertiser = self.spawn(self._advertise_loop(), "advertise")
        self.log.info("%s serving on %s", self.address, self.url.redacted())
        self.ready.set()

    def request_queue_arguments(self) -> dict[str, Any]:
        """Arguments of the request queue: dead-lettering always; a transient agent's queue expires
        ten minutes after it is gone; a durable one may be a quorum queue."""
        args: dict[str, Any] = {"x-dead-letter-exchange": bus.DEAD}
        if not self.durable_requests:
            return args | {"x-expires": 600_000}
        # A classic queue is declared without the argument, as before it existed: the broker refuses
        # a re-declaration whose arguments differ from the existing queue's.
        return args | {"x-queue-type": "quorum"} if self.durable_queue_type() == "quorum" else args

    def durable_queue_type(self) -> str:
        """classic or quorum: the type of this agent's durable queues (see request_queue_type)."""
        kind = str(self.request_queue_type).lower()
        if kind == "auto":
            return "quorum" if self.url.is_cluster else "classic"
        if kind not in ("classic", "quorum"):
            raise ValueError(f"queue type must be auto, classic or quorum, not {self.request_queue_type!r}")
        return kind

    @staticmethod
    async def declare_topology(channel: aio_pika.abc.AbstractChannel, *, quorum: bool = False) -> None:
        """Declare gridbus's exchanges and the dead-letter queue (a quorum queue on a cluster);
        idempotent, any order."""
        for name, kind in bus.EXCHANGES:
            await channel.declare_exchange(name, kind, durable=True)
        args = bus.DEAD_QUEUE_ARGS | ({"x-queue-type": "quorum"} if quorum else {})
        dead = await channel.declare_queue(bus.DEAD, durable=True, arguments=args)
        await dead.bind(bus.DEAD, "")

    async def _on_reconnect(self, *_: Any) -> None:
        # The robust connection restores exchanges, queues, bindings and consumers it declared;
        # the direct reply-to consumer is a pseudo-queue it does not know about.
        self.log.warning("reconnected to the broker %s", getattr(self._connection, "broker", "?"))
        if self._client is not None:
            try:
                await self._client.start()
            except Exception:
                self.log.exception("restoring the reply consumer failed")
        self.ads_changed()

    async def stop(self) -> None:
        """Graceful stop: invalidate the ads, stop background work, close the connection."""
        if self._stopping:
            return
        self._stopping = True
        try:
            await self.on_stop()
        except Exception:
            self.log.exception("on_stop failed")
        if self._advertiser is not None:
            # Stop advertising first: a round in flight must not re-add ads after their invalidation.
            self._advertiser.cancel()
            await asyncio.gather(self._advertiser, return_exceptions=True)
        try:
            if self._channel is not None and not self._channel.is_closed:
                await self.invalidate_ads()
        except Exception:
            self.log.warning("could not invalidate ads", exc_info=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()

    def request_stop(self, delay: float = 0.0) -> bool:
        """Stop as a signal would, ``delay`` seconds from now (time to send an answer first);
        False if the agent was not started by run()."""
        event = self._stop_requested
        if event is None:
            return False
        asyncio.get_running_loop().call_later(delay, event.set)
        return True

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Start, serve until ``stop`` is set (or forever, or until ``request_stop``), then stop gracefully."""
        self._stop_requested = stop or asyncio.Event()
        await self.start()
        try:
            await self._stop_requested.wait()
        finally:
            await self.stop()

    # ------------------------------------------------------------------ reconfiguration
    # The configuration the agent runs with (gridbus.config.Config); a daemon's build() may set
    # it, else start() loads the daemon's section, so a later reconfig knows what changed.
    config: Any = None

    def _config_baseline(self) -> None:
        if self.config is None:
            from gridbus.config import Config

            try:
                self.config = Config.load(daemon=self.kind)
            except Exception:  # an agent built from arguments runs on without a readable file
                self.log.warning("no configuration baseline for reconfig", exc_info=True)

    async def reconfig(self) -> list[str]:
        """Re-read the configuration (SIGHUP, the master's Reconfig); return the changed knob names.

        The base applies UPDATE_INTERVAL (and a lifetime of three intervals follows it). A daemon
        with knobs of its own overrides this, calls ``await super().reconfig()`` and applies the
        names it gets back that it can change without a restart.
        """
        from gridbus.config import Config

        old = self.config
        new = self.apply_runtime(old.reload() if old is not None else Config.load(daemon=self.kind))
        changed = old.changed(new) if old is not None else []
        self.config = new
        if "UPDATE_INTERVAL" in changed:
            was_default_lifetime = self.lifetime == 3 * self.update_interval
            self.update_interval = float(new.get("UPDATE_INTERVAL"))
            if was_default_lifetime:
                self.lifetime = 3 * self.update_interval
            self.ads_changed()
        return changed

    # ------------------------------------------------------------------ requests
    def is_admin(self, user: str | None) -> bool:
        return bool(user) and user in self.admins

    def is_daemon(self, user: str | None) -> bool:
        """A daemon of the pool: the agent's own broker account, or one named in ALLOW_DAEMON."""
        if not user:
            return False
        if user == self.url.user:
            return True
        cfg = getattr(self, "config", None)
        try:
            return user in (cfg.get("ALLOW_DAEMON") if cfg is not None else ())
        except Exception:  # a configuration without the knob (an agent built from arguments)
            return False

    def is_super(self, user: str | None) -> bool:
        """A queue super user (the schedd has them); elsewhere the administrators."""
        return self.is_admin(user)

    def object_owner(self, class_name: str, name: str) -> str | None:
        """The owner of object ``name`` for the ``owner`` access rule; None: the object has no
        single owner (the handler checks each object it touches). Agents with owned objects
        (the schedd's jobs) override this."""
        return None

    def _largest_request(self) -> int:
        """The largest request any method of this agent takes (checked before decoding)."""
        largest = getattr(self, "_largest_request_bytes", None)
        if largest is None:
            sizes = [m.max_bytes for c in self.schema.classes.values() for m in c.methods.values()]
            largest = self._largest_request_bytes = max(sizes, default=DEFAULT_MAX_BYTES)
        return largest

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        self.spawn(self._serve(message), "request")

    async def _serve(self, message: AbstractIncomingMessage) -> None:
        self.stats["RequestsInFlight"] += 1
        dead = False
        try:
            size = len(message.body)
            if size > self._largest_request():
                self.log.warning("refusing a request of %d bytes from %s", size, message.user_id)
                text = f"a request of {size:,} bytes is over the largest {self.address} takes ({self._largest_request():,} bytes)"
                await self._answer(message, {"status": Status.INVALID_PARAMETER, "text": text}, wire.JSON)
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
        class_name = (body.get("class") or "") or None
        filters = body.get("filters") or {}
        try:
            records = await self.find_objects(class_name.lower() if class_name else None, filters, message.user_id)
            reply = {"status": 0, "text": "OK", "out": {"objects": records}}
        except MethodError as exc:
            reply = {"status": exc.status, "text": exc.text}
        except Exception as exc:
            self.log.exception("getObjects failed")
            reply = {"status": Status.EXCEPTION, "text": f"getObjects failed: {type(exc).__name__}: {exc}"}
        await self._answer(message, reply, ctype, bus.T_QUERY_RESPONSE)
        self.stats["RequestsServed"] += 1
        return False

    async def find_objects(self, class_name: str | None, filters: dict[str, Any], user: str | None) -> list[dict]:
        """Records of the objects of ``class_name`` whose properties equal ``filters``.

        Agents with objects made on demand (the schedd's jobs) override this.
        """
        out = []
        for obj in self.objects.values():
            if class_name and obj.class_name != class_name:
                continue
            record = obj.record(self.address, self._method_names(obj.class_name))
            props = {**record["properties"], **record["statistics"]}
            if all(props.get(k) == v for k, v in filters.items()):
                out.append(record)
        return out

    def _method_names(self, class_name: str) -> dict[str, list[str]]:
        """Method name -> its input argument names, so a console can map positional arguments."""
        return {m.name: [a.name for a in m.inputs] for m in self.schema_methods(class_name).values()}

    def resolve_object(self, name: str) -> str | None:
        """The class of the object called ``name``, or None. Override for on-demand objects."""
        obj = self.objects.get(name)
        return obj.class_name if obj else None

    async def _serve_method(self, message: AbstractIncomingMessage, body: Any, ctype: str) -> bool:
        started = time.monotonic()
        user = message.user_id or None
        try:
            call = self._make_call(body, user, message.correlation_id, len(message.body))
        except MethodError as exc:
            self.log.warning("dead-lettering a bad request from %s: %s", user, cap_text(exc.text, 300))
            await self._answer(message, {"status": exc.status, "text": exc.text}, ctype)
            self.stats["RequestsFailed"] += 1
            return exc.status in _DEAD_LETTER_STATUSES
        class_name = self.resolve_object(call.object) or ""
        handler = self._handlers[self.handler_key(class_name, call.method)]
        try:
            result = handler(self, call, **call.args)
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
        if elapsed > 1.0:
            self.log.info("%s took %.2f s", call.method, elapsed)
        return False

    def _make_call(self, body: Any, user: str | None, correlation_id: str | None, size: int = 0) -> Call:
        if not isinstance(body, dict):
            raise MethodError(Status.INVALID_PARAMETER, f"a request must be a map, not {type(body).__name__}")
        obj = body.get("object") or self.address
        name = body.get("method")
        if not isinstance(obj, str):
            raise MethodError(Status.INVALID_PARAMETER, "'object' must be a string naming the object")
        if not isinstance(name, str) or not name:
            raise MethodError(Status.INVALID_PARAMETER, "the request names no 'method'")
        class_name = self.resolve_object(obj)
        if class_name is None:
            raise MethodError(Status.UNKNOWN_OBJECT, f"{self.address} has no object {obj!r}")
        schema_method = self.schema_methods(class_name).get(name)
        if schema_method is None:
            known = ", ".join(self._method_names(class_name)) or "none"
            raise MethodError(Status.UNKNOWN_METHOD, f"class {class_name} has no method {name!r} (methods: {known})")
        if self.handler_key(class_name, name) not in self._handlers:
            raise MethodError(Status.NOT_IMPLEMENTED, f"{class_name}.{name} is not implemented by {self.address}")
        if size > schema_method.max_bytes:
            raise MethodError(
                Status.INVALID_PARAMETER,
                f"{name}: a request of {size:,} bytes is over the method's bound of {schema_method.max_bytes:,} bytes",
            )
        access.check(self, schema_method, class_name, obj, user)  # before the arguments: nothing of
        args = validate_args(schema_method, body.get("args"))  # a refused call is looked at
        return Call(user, obj, name, args, correlation_id, self.is_admin(user))

    async def _stream(self, message: AbstractIncomingMessage, gen: Any, ctype: str) -> None:
        try:
            async for chunk in gen:
                await self._answer(message, {"status": 0, "text": "OK", "out": chunk, "partial": True}, ctype)
        except MethodError as exc:
            await self._answer(message, {"status": exc.status, "text": exc.text}, ctype)
            raise
        await self._answer(message, {"status": 0, "text": "OK", "out": {}}, ctype)

    async def _answer(self, message: AbstractIncomingMessage, reply: dict, ctype: str, mtype: str = bus.T_METHOD_RESPONSE) -> None:
        if not message.reply_to:
            return
        reply.setdefault("text", CANNED_TEXT.get(reply.get("status", 0), ""))
        reply["text"] = cap_text(reply["text"])  # an answer never repeats a huge argument whole
        reply.setdefault("partial", False)
        try:
            body = wire.encode(reply, ctype)
        except TypeError as exc:
            body = wire.encode({"status": Status.EXCEPTION, "text": f"unencodable answer: {exc}", "partial": False}, ctype)
        assert self._channel is not None
        # mandatory=False: RabbitMQ 3.10 returns a delivered direct reply-to message as unroutable.
        await self._channel.default_exchange.publish(
            aio_pika.Message(body, content_type=ctype, correlation_id=message.correlation_id, type=mtype, app_id=self.address),
            routing_key=message.reply_to,
            mandatory=False,
        )
