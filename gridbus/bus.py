"""The bus: gridbus's exchanges, queues and routing keys, in one place.

Both sides (the asyncio agents on aio-pika and the synchronous console on pika) take their names
from here, so what the management UI shows is what this module says.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"

ADS = "gridbus.ads"  # topic: ads and invalidations, key <mytype>.<name>
RPC = "gridbus.rpc"  # direct: method and query requests, key <kind>@<name>
EVENTS = "gridbus.events"  # topic: job.<event>.<owner>, daemon.<event>.<kind>
DEAD = "gridbus.dead"  # fanout + queue: what no agent could process

# (name, type) of every exchange; every agent declares all of them at start, idempotently,
# so there is no start-up order.
EXCHANGES: tuple[tuple[str, str], ...] = (
    (ADS, "topic"),
    (RPC, "direct"),
    (EVENTS, "topic"),
    (DEAD, "fanout"),
)

# The replay path of job events: a stream queue bound to gridbus.events (job.#), declared by each
# schedd, that keeps the events of the last JOB_EVENT_STREAM_MAX_AGE. A consumer that was away reads
# it from an offset (x-stream-offset: "first", a timestamp, or the offset it stopped at).
EVENT_STREAM = "gridbus.events.stream"
EVENT_STREAM_KEY = "job.#"

# The dead-letter queue keeps the newest messages only, so a flood of garbage cannot fill the disk.
DEAD_QUEUE_ARGS: dict[str, int | str] = {"x-max-length": 10_000, "x-overflow": "drop-head"}

# Routing keys on gridbus.rpc besides an agent's own address: one to reach every agent, one per
# management class, so a console's getObjects reaches just the agents that serve the class.
BROADCAST_KEY = "all"
REPLY_TO = "amq.rabbitmq.reply-to"

# AMQP `type` property of each message kind, so the management UI shows what flows.
T_METHOD_REQUEST = "method_request"
T_METHOD_RESPONSE = "method_response"
T_QUERY_REQUEST = "query_request"
T_QUERY_RESPONSE = "query_response"
T_AD = "ad"
T_INVALIDATE = "invalidate"
T_EVENT = "event"
T_HEARTBEAT = "heartbeat"


def class_key(class_name: str) -> str:
    """Routing key that reaches every agent serving a management class."""
    return f"class.{class_name.lower()}"


def rpc_queue(address: str) -> str:
    """The request queue an agent consumes: ``gridbus.rpc.<kind>@<name>``."""
    return f"{RPC}.{address}"


def ad_key(mytype: str, name: str, *, private: bool = False) -> str:
    """Routing key of an ad on gridbus.ads; private ads (claim ids) travel apart."""
    key = f"{mytype.lower()}.{_key_safe(name)}"
    return f"private.{key}" if private else key


def event_key(kind: str, event: str, who: str) -> str:
    """``job.<event>.<owner>`` or ``daemon.<event>.<kind>``."""
    return f"{kind}.{event}.{_key_safe(who)}"


def _key_safe(part: str) -> str:
    # A dot would add a level to a topic key and break `machine.*` style bindings.
    return part.replace(".", "_")


def default_url() -> str:
    """The broker URL from GRIDBUS_URL, else the local broker."""
    return os.environ.get("GRIDBUS_URL") or DEFAULT_URL


def split_brokers(spec: str) -> list[str]:
    """The single-broker URLs a GRIDBUS_URL names, in order.

    Two spellings list several brokers (the nodes of a RabbitMQ cluster): comma-separated URLs
    (``amqp://u:p@h1:5672/v,amqp://u:p@h2:5673/v``), or one URL with several hosts
    (``amqp://u:p@h1:5672,h2:5673/v``), whose credentials, vhost and query every host shares.
    """
    spec = spec.strip()
    if "," not in spec:
        return [spec]
    pieces = [p.strip() for p in spec.split(",") if p.strip()]
    if all("://" in p for p in pieces):
        return pieces
    scheme, sep, rest = spec.partition("://")
    if not sep:
        raise ValueError(f"not a broker URL: {spec!r}")
    slash = rest.find("/")
    netloc, tail = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    cred, at, hosts = netloc.rpartition("@")
    prefix = f"{scheme}://{cred}{at}"
    return [f"{prefix}{host.strip()}{tail}" for host in hosts.split(",") if host.strip()]


@dataclass(frozen=True)
class BrokerURL:
    """An amqp/amqps URL, split into what the clients and the management API need.

    The URL may name several brokers (see `split_brokers`); `alternatives` lists them, and the
    parts (user, host, port, vhost) are the first one's.
    """

    url: str

    @property
    def alternatives(self) -> tuple[BrokerURL, ...]:
        """One BrokerURL per broker named, in the order to try them."""
        return tuple(BrokerURL(u) for u in split_brokers(self.url))

    @property
    def is_cluster(self) -> bool:
        """Whether the URL lists several brokers (the nodes of a cluster): then gridbus's durable
        queues are replicated quorum queues (agents and `gridbus broker setup` alike)."""
        return len(self.alternatives) > 1

    @property
    def parts(self) -> urllib.parse.SplitResult:
        return urllib.parse.urlsplit(split_brokers(self.url)[0])

    @property
    def user(self) -> str:
        return urllib.parse.unquote(self.parts.username or "guest")

    @property
    def password(self) -> str:
        return urllib.parse.unquote(self.parts.password or "guest")

    @property
    def host(self) -> str:
        return self.parts.hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return self.parts.port or (5671 if self.parts.scheme == "amqps" else 5672)

    @property
    def vhost(self) -> str:
        path = self.parts.path
        return urllib.parse.unquote(path[1:]) if len(path) > 1 else "/"

    def _each(self, change: Any) -> BrokerURL:
        alternatives = self.alternatives
        if len(alternatives) == 1:
            return change(self)
        return BrokerURL(",".join(change(a).url for a in alternatives))

    def with_vhost(self, vhost: str) -> BrokerURL:
        return self._each(lambda b: b._with_vhost(vhost))

    def _with_vhost(self, vhost: str) -> BrokerURL:
        p = self.parts
        return BrokerURL(
            urllib.parse.urlunsplit(
                (p.scheme, p.netloc, "/" + urllib.parse.quote(vhost, safe=""), p.query, "")
            )
        )

    def with_credentials(self, user: str, password: str) -> BrokerURL:
        return self._each(lambda b: b._with_credentials(user, password))

    def _with_credentials(self, user: str, password: str) -> BrokerURL:
        p = self.parts
        cred = f"{urllib.parse.quote(user, safe='')}:{urllib.parse.quote(password, safe='')}"
        netloc = f"{cred}@{p.hostname}" + (f":{p.port}" if p.port else "")
        return BrokerURL(urllib.parse.urlunsplit((p.scheme, netloc, p.path, p.query, "")))

    def redacted(self) -> str:
        """The URL without its password, for messages people read."""
        alternatives = self.alternatives
        if len(alternatives) > 1:
            return ",".join(a.redacted() for a in alternatives)
        p = self.parts
        netloc = f"{self.user}@{self.host}:{self.port}"
        return urllib.parse.urlunsplit((p.scheme, netloc, p.path or "/", "", ""))

    def __str__(self) -> str:
        return self.url
