"""A robust aio-pika connection that fails over between the brokers a GRIDBUS_URL lists.

aio-pika's RobustConnection reconnects to the one URL it was given, so a pool whose broker node
died would wait for that node while its peers serve. This connection keeps the list: every failed
attempt, and every loss of an established connection, moves it to the next broker, and the robust
channels re-declare what they declared (exchanges, queues, bindings, consumers) on whichever node
answers. The connection name stays the same on every node, so the management UI still says who is
who.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aio_pika import RobustConnection
from aio_pika.exceptions import CONNECTION_EXCEPTIONS
from yarl import URL

from gridbus import tls
from gridbus.bus import BrokerURL

log = logging.getLogger("gridbus.failover")

# The one attempt of RobustConnection's reconnect loop is the hook this module needs; an aio-pika
# without it would leave a connection retrying a dead broker forever: say so at import instead.
if not hasattr(RobustConnection, "_RobustConnection__connect_transport"):
    raise ImportError("this aio-pika's RobustConnection has no __connect_transport step: "
                      "gridbus.agent.failover needs updating for it")


class FailoverConnection(RobustConnection):
    """A RobustConnection over several broker URLs, tried in turn from ``first``."""

    def __init__(self, urls: list[str], first: int = 0, **kwargs: Any):
        self._urls = [URL(u) for u in urls]
        self._index = first % len(self._urls)
        super().__init__(self._urls[self._index], **kwargs)

    # Connection.connect reads self.url for every attempt: the current broker of the list.
    @property
    def url(self) -> URL:
        return self._urls[self._index]

    @url.setter
    def url(self, value: URL) -> None:  # set by Connection.__init__ and update_secret
        self._urls[self._index] = URL(value)

    @property
    def broker(self) -> str:
        """The broker in use (or next to try), without password."""
        return f"{self.url.host}:{self.url.port}"

    def _advance(self, why: str) -> None:
        if len(self._urls) > 1:
            self._index = (self._index + 1) % len(self._urls)
            log.warning("%s; trying broker %s next", why, self.broker)

    # RobustConnection's private reconnect step (name-mangled): one attempt on the current URL.
    async def _RobustConnection__connect_transport(self) -> None:
        tried = self._index
        try:
            await super()._RobustConnection__connect_transport()  # type: ignore[misc]  # the name-mangled private step, overridden on purpose
        except (TimeoutError, *CONNECTION_EXCEPTIONS):
            if self._index == tried:  # not moved on already by the close callbacks of the attempt
                self._advance(f"broker {self.broker} did not accept the connection")
            raise

    async def _on_connection_close(self, closing: asyncio.Future) -> None:
        if not (self._close_called or self.is_closed):
            self._advance(f"lost the connection to broker {self.broker}")
        await super()._on_connection_close(closing)


async def connect(url: BrokerURL, *, name: str, reconnect_interval: float = 1,
                  timeout: float = 10) -> FailoverConnection:
    """Connect to the first broker of ``url`` that answers (each tried once), and keep connected
    to one of them. Raises the last broker's error if none answers."""
    urls = [a.url for a in url.alternatives]
    last: BaseException | None = None
    for first in range(len(urls)):
        connection = FailoverConnection(
            urls, first, client_properties={"connection_name": name}, reconnect_interval=reconnect_interval,
            **tls.aio_pika_kwargs(urls[first]),  # amqps: CA, client certificate, verification
        )
        try:
            await connection.connect(timeout=timeout)
            return connection
        except (TimeoutError, *CONNECTION_EXCEPTIONS) as exc:
            last = exc
            await connection.close()
            if len(urls) > 1:
                log.warning("broker %s did not answer (%s); trying the next", urls[first].split("@")[-1], exc)
    assert last is not None
    raise last
