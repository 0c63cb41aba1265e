"""The agent: one gridbus daemon on the broker.

An agent has an address ``<kind>@<name>``, which is its routing key on ``gridbus.rpc`` and the name
of its request queue. It is the composition of three parts, each in a module of its own:

- the connection (`gridbus.agent.connection`): the broker, its channels, publishing;
- the dispatcher (`gridbus.agent.dispatcher`): the request queue, every request decoded, checked,
  handed to its handler and answered, getObjects served;
- the advertiser (`gridbus.agent.advertising`): the agent's ads, their periodic updates and their
  invalidation on stop.

The agent itself holds what a daemon is: its identity, configuration, objects and handlers, who may
call it, its ads, its background tasks, and its lifecycle (start, stop, reconfig), which brings the
parts up and down in order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractRobustConnection

from gridbus import bus, topology
from gridbus.agent.advertising import ADS_PER_MESSAGE as ADS_PER_MESSAGE  # re-exported
from gridbus.agent.advertising import Advertiser
from gridbus.agent.awaiting import SlowReport, cancel_and_wait
from gridbus.agent.client import AsyncClient
from gridbus.agent.common import CommonMethods
from gridbus.agent.connection import Connection
from gridbus.agent.dispatcher import Dispatcher
from gridbus.agent.objects import ManagedObject
from gridbus.schema import Schema, builtin

# A stop that goes on longer than this is reported in the log, with where each of the agent's tasks
# waits, and again at each such interval: the master ends a daemon whose stop outlasts
# SHUTDOWN_GRACEFUL_TIMEOUT (30 s by default) with SIGKILL, and then only this says what held it.
SLOW_STOP_REPORT = 10.0


class Agent(CommonMethods):
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
        self.log = logging.getLogger(f"gridbus.{self.kind}")
        started = time.time()
        self.start_time = int(started)  # DaemonStartTime: whole seconds, as HTCondor's
        self.objects: dict[str, ManagedObject] = {}
        self.stats: dict[str, int | float] = {"BrokerReconnects": 0}
        self._handlers = self._bind_handlers(self)
        self.connection = Connection(self.url, self.address, self.log, prefetch=prefetch)
        self.dispatcher = Dispatcher(self, self.schema, self.classes, self._handlers, self.log, self.stats)
        # UpdateSequenceNumber counts from the microsecond of the start within its second, so a
        # daemon restarted within the same DaemonStartTime second outranks its predecessor's
        # updates in the collector (which keeps the newest (DaemonStartTime, sequence) per ad).
        self.advertiser = Advertiser(self, self.publish, self.log,
                                     first_sequence=int((started - self.start_time) * 1_000_000))
        self._client: AsyncClient | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self.ready: asyncio.Event | None = None
        self._stop_requested: asyncio.Event | None = None  # set by run(); request_stop sets it
        for class_name in self.classes:
            self.add_object(ManagedObject(class_name, self.address, self.object_properties, self.object_statistics))

    # ------------------------------------------------------------------ handlers
    # The classes of the objects an agent is composed of whose @method handlers it serves besides
    # its own (the schedd's queries, submission, shadows, ...): declared here so the handlers can
    # be listed from the class (the schema check), and given as instances to `add_parts`.
    part_classes: tuple[type, ...] = ()

    @classmethod
    def _collect_handlers(cls) -> dict[tuple[str, str], Any]:
        """The handler functions of (class, method): the agent class's and its part classes'.
        Two owners may not serve the same method; within one class hierarchy the subclass wins."""
        handlers: dict[tuple[str, str], Any] = {}
        owner_of: dict[tuple[str, str], type] = {}
        for owner in (cls, *cls.part_classes):
            for key, fn in _marked(owner).items():
                if key in owner_of and owner_of[key] is not owner:
                    raise TypeError(f"{key[0]}.{key[1]} is served by both {owner_of[key].__name__} and {owner.__name__}")
                handlers[key], owner_of[key] = fn, owner
        return handlers

    @staticmethod
    def _bind_handlers(part: object) -> dict[tuple[str, str], Any]:
        """``part``'s handlers, bound to it: called as ``await handler(call, **args)``."""
        return {key: fn.__get__(part, type(part)) for key, fn in _marked(type(part)).items()}

    def add_parts(self, *parts: object) -> None:
        """Serve the @method handlers of the objects this agent is composed of (each an instance
        of a class in `part_classes`), with the same authorization and validation as its own."""
        for part in parts:
            if not isinstance(part, self.part_classes):
                raise TypeError(f"{type(part).__name__} is not among {type(self).__name__}.part_classes")
            for key, handler in self._bind_handlers(part).items():
                if key in self._handlers:
                    raise TypeError(f"{key[0]}.{key[1]} is served twice (by {type(part).__name__} too)")
                self._handlers[key] = handler

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

    def ads(self) -> list[dict[str, Any]]:
        """Every public ad this agent advertises (default: its daemon ad)."""
        return [self.daemon_ad()]

    def private_ads(self) -> list[dict[str, Any]]:
        """Ads that carry secrets (claim ids); they travel on private.* routing keys."""
        return []

    def ads_changed(self, names: Iterable[str] | None = None) -> None:
        """Something meaningful changed: re-advertise soon (coalesced); ``names``: only the ads of
        these names changed (an agent that builds them by name, ``ads_named``, re-sends only them)."""
        self.advertiser.changed(names)

    # ------------------------------------------------------------------ events and calls
    async def publish(self, exchange: str, key: str, body: Any, mtype: str, *, confirm: bool = False) -> None:
        """Publish ``body`` on ``exchange``; ``confirm`` for a message whose loss would matter
        (see `Connection.publish`)."""
        await self.connection.publish(exchange, key, body, mtype, confirm=confirm)

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
        try:
            await self._start()
        except BaseException:
            try:
                await self._end_tasks_and_connection()
            except Exception:  # the start's own failure is the one to report
                self.log.warning("could not close the connection of a failed start", exc_info=True)
            raise

    async def _start(self) -> None:
        self.ready = asyncio.Event()
        self._config_baseline()
        self.start_duty_cycle()
        await self.connection.open(quorum=self.durable_queue_type() == "quorum", on_reconnect=self._on_reconnect)
        self._client = AsyncClient(self.connection.channel, self.url.user, self.address)
        await self._client.start()
        await self.setup()
        await self.dispatcher.consume(self.connection.channel, durable=self.durable_requests,
                                      arguments=self.request_queue_arguments(), answers=self.connection.answer_channel,
                                      reconciled=self.connection.reconciled)
        self.connection.watch(bus.rpc_queue(self.address))
        self.spawn(self.connection.keep_queues(), "keep queues")
        await self.on_start()
        # Who held claims or state with this address's predecessor hears that it is a new process
        # (a schedd asks a restarted startd about its claims at once, not at its next Alive round).
        try:
            await self.publish_event("daemon", "start", self.kind,
                                     {"address": self.address, "DaemonStartTime": self.start_time})
        except Exception:  # an event is a hint; the periodic checks still come
            self.log.warning("could not publish the start event", exc_info=True)
        self.advertiser.start(self.spawn)
        self.log.info("%s serving on %s", self.address, self.url.redacted())
        self.ready.set()

    def request_queue_arguments(self) -> dict[str, Any]:
        """Arguments of the request queue (see `gridbus.topology.request_queue_arguments`)."""
        return topology.request_queue_arguments(durable=self.durable_requests,
                                                quorum=self.durable_requests and self.durable_queue_type() == "quorum")

    def durable_queue_type(self) -> str:
        """classic or quorum: the type of this agent's durable queues (see request_queue_type)."""
        kind = str(self.request_queue_type).lower()
        if kind == "auto":
            return "quorum" if self.url.is_cluster else "classic"
        if kind not in ("classic", "quorum"):
            raise ValueError(f"queue type must be auto, classic or quorum, not {self.request_queue_type!r}")
        return kind

    @property
    def _connection(self) -> AbstractRobustConnection | None:
        """The broker connection, for an agent that opens channels of its own."""
        return self.connection.robust

    @property
    def _channel(self) -> AbstractChannel | None:
        """The requests' channel; None before the start (and once it is closed)."""
        return self.connection.channel if self.connection.is_open else None

    async def _on_reconnect(self, *_: Any) -> None:
        # The robust connection restores exchanges, queues, bindings and consumers it declared;
        # the direct reply-to consumer, a pseudo-queue it does not know about, is consumed again
        # by the next call (AsyncClient.start).
        self.log.warning("reconnected to the broker %s", self.connection.broker)
        self.stats["BrokerReconnects"] += 1
        self.ads_changed()

    async def stop(self) -> None:
        """Graceful stop: take no new request, run on_stop, invalidate the ads, stop background
        work, close the connection."""
        if self._stopping:
            return
        self._stopping = True
        report = SlowReport(self.log, "stop", SLOW_STOP_REPORT)
        try:
            # Take no new request first: a handler run during on_stop would act on a half-stopped
            # agent (a startd would start a job its starter no longer watches). The request queue
            # is no longer checked for a consumer: it has none from now on, on purpose.
            report.step = "taking no new request"
            self.connection.unwatch(bus.rpc_queue(self.address))
            await self.dispatcher.stop()
            report.step = "on_stop"
            try:
                await self.on_stop()
            except Exception:
                self.log.exception("on_stop failed")
            report.step = "invalidating the ads"
            try:
                if self.connection.is_open:
                    await self.advertiser.stop()
            except Exception:
                self.log.warning("could not invalidate ads", exc_info=True)
            report.step = "ending the tasks and closing the connection"
            await self._end_tasks_and_connection()
        finally:
            report.done()

    async def _end_tasks_and_connection(self) -> None:
        """The end of a stop, and all of what a start that failed half way leaves to undo (its
        channels' readers would otherwise be collected unfinished, long after)."""
        await cancel_and_wait(list(self._tasks), self.log)
        await self.connection.close()

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
    # The knobs every agent applies when it re-reads its configuration (reconfig; the access
    # rules read theirs from the configuration in effect).
    RUNTIME_KNOBS = frozenset({"UPDATE_INTERVAL", "ALLOW_ADMINISTRATOR", "ALLOW_DAEMON", "ENABLE_RUNTIME_CONFIG"})

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
        """An administrator: the agent's own account, one it was given, or one ALLOW_ADMINISTRATOR
        names in the configuration in effect (so a reconfig changes who it is)."""
        return bool(user) and (user in self.admins or user in self._configured("ALLOW_ADMINISTRATOR"))

    def is_daemon(self, user: str | None) -> bool:
        """A daemon of the pool: the agent's own broker account, or one named in ALLOW_DAEMON."""
        if not user:
            return False
        return user == self.url.user or user in self._configured("ALLOW_DAEMON")

    def _configured(self, name: str) -> Any:
        """A list knob of the configuration in effect; empty without one."""
        try:
            return self.config.get(name) if self.config is not None else ()
        except Exception:  # a configuration without the knob (an agent built from arguments)
            return ()

    def is_super(self, user: str | None) -> bool:
        """A queue super user (the schedd has them); elsewhere the administrators."""
        return self.is_admin(user)

    def object_owner(self, class_name: str, name: str) -> str | None:
        """The owner of object ``name`` for the ``owner`` access rule; None: the object has no
        single owner (the handler checks each object it touches). Agents with owned objects
        (the schedd's jobs) override this."""
        return None

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
        return self.dispatcher.method_names(class_name)

    def resolve_object(self, name: str) -> str | None:
        """The class of the object called ``name``, or None. Override for on-demand objects."""
        obj = self.objects.get(name)
        return obj.class_name if obj else None


def _marked(klass: type) -> dict[tuple[str, str], Any]:
    """The functions of ``klass`` (its bases included; a subclass's win) marked by @method."""
    handlers: dict[tuple[str, str], Any] = {}
    for k in reversed(klass.__mro__):
        for attr in vars(k).values():
            key = getattr(attr, "_gridbus_method", None)
            if key:
                handlers[key] = attr
    return handlers
