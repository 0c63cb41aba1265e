"""The bus: gridbus's exchanges, queues and routing keys, in one place.

Both sides (the asyncio agents on aio-pika and the synchronous console on pika) take their names
from here, so what the management UI shows is what this module says.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass

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

# The dead-letter queue keeps the newest messages only, so a flood of garbage cannot fill the disk.
DEAD_QUEUE_ARGS = {"x-max-length": 10_000, "x-overflow": "drop-head"}

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


@dataclass(frozen=True)
class BrokerURL:
    """An amqp/amqps URL, split into what the clients and the management API need."""

    url: str

    @property
    def parts(self) -> urllib.parse.SplitResult:
        return urllib.parse.urlsplit(self.url)

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

    def with_vhost(self, vhost: str) -> BrokerURL:
        p = self.parts
        return BrokerURL(
            urllib.parse.urlunsplit(
                (p.scheme, p.netloc, "/" + urllib.parse.quote(vhost, safe=""), p.query, "")
            )
        )

    def with_credentials(self, user: str, password: str) -> BrokerURL:
        p = self.parts
        cred = f"{urllib.parse.quote(user, safe='')}:{urllib.parse.quote(password, safe='')}"
        netloc = f"{cred}@{p.hostname}" + (f":{p.port}" if p.port else "")
        return BrokerURL(urllib.parse.urlunsplit((p.scheme, netloc, p.path, p.query, "")))

    def redacted(self) -> str:
        """The URL without its password, for messages people read."""
        p = self.parts
        netloc = f"{self.user}@{self.host}:{self.port}"
        return urllib.parse.urlunsplit((p.scheme, netloc, p.path or "/", "", ""))

    def __str__(self) -> str:
        return self.url
