"""A small client for RabbitMQ's management HTTP API.

Used by `gridbus broker setup` (vhosts, accounts, permissions), by `gridbus pool status`, and by
the tests (a vhost per test, closing an agent's connection). Standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from gridbus import tls
from gridbus.bus import BrokerURL
from gridbus.topology import Consumers


class ManagementError(RuntimeError):
    """The management API refused a request or could not be reached."""


# RabbitMQ's management listener is, by its defaults, the AMQP port plus 10000 (5672 -> 15672,
# 5671 (TLS) -> 15671 (TLS)); a cluster made on one machine keeps that offset per node.
MGMT_PORT_OFFSET = 10_000


def mgmt_url_for(amqp: BrokerURL) -> str:
    """The management API base URL for a broker: GRIDBUS_MGMT_URL (the MGMT_URL knob's variable),
    else the broker's host at its AMQP port + 10000 (http, or https for amqps). For a URL that
    lists several brokers, the first one's; `Management.for_broker` takes the first that answers."""
    explicit = os.environ.get("GRIDBUS_MGMT_URL")
    if explicit:
        return explicit
    first = amqp.alternatives[0]
    scheme = "https" if first.parts.scheme == "amqps" else "http"
    host = f"[{first.host}]" if ":" in first.host else first.host
    return f"{scheme}://{host}:{first.port + MGMT_PORT_OFFSET}"


class Management:
    def __init__(self, base_url: str, user: str = "guest", password: str = "guest", timeout: float = 10):
        self.base = base_url.rstrip("/")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._auth = f"Basic {token}"
        self.timeout = timeout

    @classmethod
    def for_broker(cls, amqp: BrokerURL | str) -> Management:
        """The management API of the broker (of the first broker listed whose API answers)."""
        amqp = BrokerURL(str(amqp))
        candidates = [mgmt_url_for(b) for b in amqp.alternatives]
        if len(candidates) > 1 and not os.environ.get("GRIDBUS_MGMT_URL"):
            for base in candidates:
                parts = urllib.parse.urlsplit(base)
                try:
                    socket.create_connection((parts.hostname, parts.port), timeout=1).close()
                except OSError:
                    continue
                return cls(base, amqp.user, amqp.password)
        return cls(candidates[0], amqp.user, amqp.password)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + "/api" + path, data=data, method=method)
        req.add_header("Authorization", self._auth)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, **tls.urlopen_kwargs(self.base)) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise ManagementError(f"{method} {path}: HTTP {exc.code} {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ManagementError(f"management API at {self.base} unreachable: {exc}") from exc
        return json.loads(raw) if raw else None

    @staticmethod
    def q(part: str) -> str:
        return urllib.parse.quote(part, safe="")

    # vhosts and accounts -------------------------------------------------------------------
    def put_vhost(self, vhost: str) -> None:
        self.request("PUT", f"/vhosts/{self.q(vhost)}", {})

    def delete_vhost(self, vhost: str) -> None:
        try:
            self.request("DELETE", f"/vhosts/{self.q(vhost)}")
        except ManagementError as exc:
            if "404" not in str(exc):
                raise

    def put_user(self, user: str, password: str, tags: str = "") -> None:
        self.request("PUT", f"/users/{self.q(user)}", {"password": password, "tags": tags})

    def delete_user(self, user: str) -> None:
        try:
            self.request("DELETE", f"/users/{self.q(user)}")
        except ManagementError as exc:
            if "404" not in str(exc):
                raise

    def put_permissions(self, vhost: str, user: str, configure: str, write: str, read: str) -> None:
        self.request(
            "PUT",
            f"/permissions/{self.q(vhost)}/{self.q(user)}",
            {"configure": configure, "write": write, "read": read},
        )

    def put_topic_permissions(self, vhost: str, user: str, exchange: str, write: str, read: str) -> None:
        self.request(
            "PUT",
            f"/topic-permissions/{self.q(vhost)}/{self.q(user)}",
            {"exchange": exchange, "write": write, "read": read},
        )

    # inspection ----------------------------------------------------------------------------
    def exchanges(self, vhost: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/exchanges/{self.q(vhost)}")

    def queues(self, vhost: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/queues/{self.q(vhost)}")

    def queue(self, vhost: str, name: str) -> dict[str, Any]:
        return self.request("GET", f"/queues/{self.q(vhost)}/{self.q(name)}")

    def queue_bindings(self, vhost: str, name: str) -> list[dict[str, Any]]:
        """The bindings of a queue (its default-exchange binding included, with source "")."""
        return self.request("GET", f"/queues/{self.q(vhost)}/{self.q(name)}/bindings")

    def queue_consumers(self, vhost: str, name: str) -> Consumers:
        """Who consumes a queue: how many consumers it has by its statistics, and (connection name,
        user) of each consumer the API lists to this account (the client's own connection name
        where it gave one, else the broker's). Both are statistics, refreshed every few seconds (RabbitMQ's
        collect_statistics_interval): a consumer of the last moments may not be in them yet."""
        count = int(self.queue(vhost, name).get("consumers") or 0)
        given = {c.get("name"): (c.get("client_properties") or {}).get("connection_name")
                 for c in self.connections(vhost)}
        named: dict[str, tuple[str, str]] = {}
        for row in self.request("GET", f"/consumers/{self.q(vhost)}"):
            channel = row.get("channel_details")
            if (row.get("queue") or {}).get("name") != name or not isinstance(channel, dict) or not channel:
                continue  # another queue's, or one whose channel is gone (the API lists it a while longer)
            connection = str(channel.get("connection_name") or "")
            named[f"{channel.get('name')} {row.get('consumer_tag')}"] = (str(given.get(connection) or connection),
                                                                         str(channel.get("user") or ""))
        return Consumers(count, tuple(sorted(named.values())))

    def delete_queue(self, vhost: str, name: str) -> None:
        """Delete a queue, as the management UI's "Delete queue" button does."""
        self.request("DELETE", f"/queues/{self.q(vhost)}/{self.q(name)}")

    def connections(self, vhost: str | None = None) -> list[dict[str, Any]]:
        if vhost is None:
            return self.request("GET", "/connections")
        return self.request("GET", f"/vhosts/{self.q(vhost)}/connections")

    def close_connection(self, name: str, reason: str = "closed by gridbus") -> None:
        self.request("DELETE", f"/connections/{self.q(name)}", None)

    def get_messages(self, vhost: str, queue: str, count: int = 10) -> list[dict[str, Any]]:
        return self.request(
            "POST",
            f"/queues/{self.q(vhost)}/{self.q(queue)}/get",
            {"count": count, "ackmode": "ack_requeue_false", "encoding": "base64"},
        )

    def overview(self) -> dict[str, Any]:
        return self.request("GET", "/overview")
