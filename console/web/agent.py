"""The web daemon as an agent of the pool: it reads the ads and events from the bus, serves the
console (server.WebApp) on WEB_ADDRESS, and advertises a Web ad saying where (WebURL).

Its queue on the bus is exclusive and bounded (the oldest messages go first when it is full), so
a slow console never holds a daemon back: the daemons publish as they always do, and the web
daemon is one more consumer of ``gridbus.ads`` (the public MyTypes it shows, never ``private.*``).
The queue views and /metrics need nothing else: the Submitter and Scheduler ads change as the
jobs do. Job events (``gridbus.events``, ``job.*.<owner>``) are bound only while a page shows a
job of that owner, and unbound when the last such page goes: a message costs its consumer a
tenth of a millisecond or more of Python, and a pool nobody looks at job by job pays nothing for
its events. At its start the daemon asks every daemon to advertise at once (the Advertise
broadcast a starting collector sends), so its picture is whole within seconds, not at the next
update interval.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Any

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue
from aiohttp import web

from gridbus import bus, wire
from gridbus.agent import Agent
from gridbus.console.web.picture import AD_TYPES, Picture
from gridbus.console.web.server import WebApp

QUEUE_LIMIT = 20_000  # ad and event messages the web daemon's queue holds before dropping the oldest
# Seconds a stopping console gives the requests under way to finish (aiohttp's default is 60):
# the master kills a daemon still stopping after SHUTDOWN_GRACEFUL_TIMEOUT, the pool's stop waits.
HTTP_SHUTDOWN_WAIT = 5.0


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) of WEB_ADDRESS; ValueError with a sentence if it is not one."""
    host, sep, port = str(text).strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"WEB_ADDRESS must be host:port (e.g. 127.0.0.1:9680), not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class WebDaemon(Agent):
    kind = "web"
    my_type = "Web"
    # Only the methods every daemon serves (RemoteParam, SetParam, Advertise): the console's own
    # work is HTTP, and what it does on the bus it does as the signed-in user.
    classes = ("daemon",)

    def __init__(self, name: str, url: str, *, address: str, address_file: Path | None = None,
                 update_interval: float = 300.0, lifetime: float | None = None, admins: Any = ()):
        super().__init__(name, url, update_interval=update_interval, lifetime=lifetime, admins=admins)
        self.listen = parse_address(address)
        self.address_file = address_file
        self.picture = Picture()
        self.web = WebApp(self.picture, self.url, watch=self.watch_owner, unwatch=self.unwatch_owner)
        self.web_url = ""
        self._runner: web.AppRunner | None = None
        self._queue: AbstractQueue | None = None
        self._watched: dict[str, int] = {}  # owner -> pages showing one of their jobs

    # ------------------------------------------------------------------ ads
    def daemon_ad(self) -> dict[str, Any]:
        return {**super().daemon_ad(), "WebURL": self.web_url, "WebAddress": self.web_url.removeprefix("http://"),
                "WebUsersSignedIn": len(self.web.sign_ins.users()), **self.web.stats,
                "AdMessagesTaken": self.picture.messages}

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        assert self._connection is not None
        channel = await self._connection.channel(publisher_confirms=False)
        queue = await channel.declare_queue(
            f"gridbus.web.{self.name}", exclusive=True,
            arguments={"x-max-length": QUEUE_LIMIT, "x-overflow": "drop-head"})
        for mytype in AD_TYPES:
            await queue.bind(bus.ADS, f"{mytype.lower()}.#")
        await queue.consume(self._on_message, no_ack=True)
        self._queue = queue
        self.connection.watch(queue.name)
        await self._serve_http()

    async def on_start(self) -> None:
        try:
            await self.client.notify(bus.BROADCAST_KEY, "Advertise")
        except Exception:  # the periodic ads still come
            self.log.warning("could not ask the daemons to advertise", exc_info=True)

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.address_file is not None:
            try:
                self.address_file.unlink()
            except OSError:
                pass

    async def _serve_http(self) -> None:
        self._runner = web.AppRunner(self.web.app, access_log=None, handle_signals=False,
                                     shutdown_timeout=HTTP_SHUTDOWN_WAIT)
        await self._runner.setup()
        host, port = self.listen
        try:
            site = web.TCPSite(self._runner, host, port, reuse_address=True)
            await site.start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or port == 0:
                raise
            # Another pool's console (another user's personal pool on this machine) has the port:
            # serve on a free one and say where (the log, the Web ad's WebURL, the address file),
            # rather than leave the pool without a console.
            self.log.warning("WEB_ADDRESS %s:%d is in use; serving on a free port of %s instead", host, port, host)
            site = web.TCPSite(self._runner, host, 0, reuse_address=True)
            await site.start()
        bound = self._runner.addresses[0] if self._runner.addresses else (host, port)
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.web_url = f"http://{shown}:{bound[1]}"
        if self.address_file is not None:
            self.address_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.address_file.with_suffix(".tmp")
            tmp.write_text(self.web_url + "\n")
            os.replace(tmp, self.address_file)
        self.log.info("the web console serves on %s (pages, /api, /metrics)", self.web_url)

    # ------------------------------------------------------------------ job events, while watched
    async def watch_owner(self, owner: str) -> None:
        """A page shows a job of ``owner``: their job events come to this daemon from now on."""
        self._watched[owner] = self._watched.get(owner, 0) + 1
        if self._watched[owner] == 1 and self._queue is not None:
            await self._queue.bind(bus.EVENTS, bus.event_key("job", "*", owner))

    async def unwatch_owner(self, owner: str) -> None:
        left = self._watched.get(owner, 0) - 1
        if left > 0:
            self._watched[owner] = left
            return
        self._watched.pop(owner, None)
        if self._queue is not None:
            try:
                await self._queue.unbind(bus.EVENTS, bus.event_key("job", "*", owner))
            except Exception:  # (the connection went; a new one binds only what is watched)
                self.log.warning("could not unbind the job events of %s", owner, exc_info=True)

    # ------------------------------------------------------------------ the bus
    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        try:
            body = wire.decode(message.body, message.content_type)
        except wire.DecodeError as exc:
            self.log.warning("dropped an undecodable %s message: %s", message.type, exc)
            return
        if not isinstance(body, dict):
            return
        try:
            if message.exchange == bus.EVENTS:
                self.picture.take_event(body)
            elif message.type == bus.T_INVALIDATE:
                self.picture.take_invalidation(str(body.get("mytype", "")), body.get("names") or [])
            elif message.routing_key and message.routing_key.startswith("private."):
                return
            else:
                self.picture.take_ads(body.get("ads") or [])
        except Exception:  # never die on a message
            self.log.exception("could not take a %s message", message.type)


def default_name() -> str:
    return socket.gethostname()
