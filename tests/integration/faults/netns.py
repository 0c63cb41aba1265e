"""A real network path to cut: a network namespace, a veth pair and a TCP forwarder to the broker.

The broker listens on 127.0.0.1 only, so a daemon inside a namespace cannot reach it directly.
`NetnsLink` builds the path

    [namespace] daemon -> 10.251.X.Y+2 (veth, netns side) ==veth== 10.251.X.Y+1 (host side)
        -> `TcpForwarder` (asyncio, a thread of the test process) -> 127.0.0.1:5672

from a private /30 chosen at random among the free ones, so traffic only flows between the host
and this test's own namespace. ``cut()`` takes the host-side veth down (the netns side loses its
carrier too) or adds ``tc netem loss 100%`` on both ends; ``restore()`` undoes it. Established TCP
connections are not reset by either: segments are dropped and retransmitted after the restore, as
on a real WAN outage, which is what the claim leases have to survive.

Everything is removed by ``close()`` (the namespace with its veth end, the host end, the
forwarder), which the fixtures call in a finally.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence

CUT_DOWN = "down"  # ip link set <host veth> down
CUT_NETEM = "netem"  # tc qdisc ... netem loss 100% on both veth ends

BROKER = ("127.0.0.1", 5672)


def unavailable() -> str:
    """Why this machine cannot build the path ("" if it can): the tests skip with this reason."""
    if os.geteuid() != 0:
        return "network fault tests need root (ip netns, veth, tc)"
    if shutil.which("ip") is None:
        return "network fault tests need iproute2's `ip` command"
    return ""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=10)


class TcpForwarder:
    """Forwards every connection accepted on (host, port) to ``target``, byte for byte, both ways.

    It runs its own asyncio loop in a daemon thread; ``close()`` stops it and every connection.
    """

    def __init__(self, host: str, target: tuple[str, int] = BROKER):
        self.host = host
        self.target = target
        self.port = 0
        self.connections = 0  # accepted so far
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"forwarder {host}", daemon=True)

    def start(self) -> TcpForwarder:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the TCP forwarder on {self.host} did not start within 10 s")
        if self._error is not None:
            raise RuntimeError(f"the TCP forwarder on {self.host} could not listen: {self._error}")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(asyncio.start_server(self._accept, self.host, 0))
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            # One side ended: end the other too, as a real TCP path would once both sides notice.
            writer.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class NetnsLink:
    """A namespace joined to the host by a veth pair on a private /30, with a broker forwarder."""

    def __init__(self, tag: str | None = None) -> None:
        """``tag`` (at most 12 characters, letters and digits) names the namespace ``gbt-<tag>`` and
        the veth ends ``gbh<tag>``/``gbn<tag>``; random if not given."""
        tag = tag or secrets.token_hex(3)
        if not tag.isalnum() or len(tag) > 12:
            raise ValueError(f"a link tag is at most 12 letters and digits (interface names are short), not {tag!r}")
        self.netns = f"gbt-{tag}"
        self.host_if = f"gbh{tag}"  # interface names are at most 15 characters
        self.ns_if = f"gbn{tag}"
        self.host_addr = ""
        self.ns_addr = ""
        self.forwarder: TcpForwarder | None = None
        self.cut_method: str | None = None
        self.cut_at: float | None = None
        self.outages: list[float] = []  # the length of each cut, seconds

    # ------------------------------------------------------------------ build and tear down
    def open(self) -> NetnsLink:
        try:
            self.host_addr, self.ns_addr = self._free_subnet()
            _ip("netns", "add", self.netns)
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if, "netns", self.netns)
            _ip("addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            self.exec_ip("addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if)
            self.exec_ip("link", "set", self.ns_if, "up")
            self.exec_ip("link", "set", "lo", "up")
            self._wait_reachable()
            self.forwarder = TcpForwarder(self.host_addr).start()
        except BaseException:
            self.close()
            raise
        return self

    def _free_subnet(self) -> tuple[str, str]:
        """A /30 in 10.251.0.0/16 that no interface of the host uses."""
        used = _ip("-o", "-4", "addr", "show").stdout + _ip("-4", "route", "show", "table", "all").stdout
        for _ in range(100):
            x, y = random.randrange(256), random.randrange(0, 256, 4)
            if f"10.251.{x}.{y}/" in used or f"10.251.{x}.{y + 1}" in used or f"10.251.{x}.{y + 2}" in used:
                continue
            return f"10.251.{x}.{y + 1}", f"10.251.{x}.{y + 2}"
        raise RuntimeError("no free /30 in 10.251.0.0/16 for the test link")

    def _wait_reachable(self, timeout: float = 10.0) -> None:
        """The veth carrier comes up asynchronously: wait until both ends say LOWER_UP."""
        deadline = time.monotonic() + timeout
        while True:
            host = _ip("-o", "link", "show", self.host_if).stdout
            ns = self.exec_ip("-o", "link", "show", self.ns_if).stdout
            if "LOWER_UP" in host and "LOWER_UP" in ns:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the veth pair {self.host_if}/{self.ns_if} has no carrier after {timeout} s")
            time.sleep(0.05)

    def close(self) -> None:
        """Remove everything this link made; safe to call twice and after a partial open."""
        if self.forwarder is not None:
            self.forwarder.close()
            self.forwarder = None
        # Processes a test left in the namespace are its own daemons: end them by pid.
        pids = _ip("netns", "pids", self.netns, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        _ip("netns", "del", self.netns, check=False)  # takes its veth end, and so the pair, with it
        _ip("link", "del", self.host_if, check=False)

    def __enter__(self) -> NetnsLink:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ use
    def exec_ip(self, *args: str) -> subprocess.CompletedProcess:
        return _ip("-n", self.netns, *args)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: the pid is the program's)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def broker_url(self, url: str) -> str:
        """``url`` (an amqp:// URL of 127.0.0.1:5672) rewritten to go through the forwarder."""
        assert self.forwarder is not None, "link not open"
        for local in ("127.0.0.1:5672", "localhost:5672"):
            if local in url:
                return url.replace(local, f"{self.host_addr}:{self.forwarder.port}", 1)
        raise ValueError(f"the fault tests need the broker on 127.0.0.1:5672, not {url}")

    def netem_missing(self) -> str:
        """Why ``cut(CUT_NETEM)`` cannot work here ("" if it can): tc, or the kernel's sch_netem."""
        if shutil.which("tc") is None:
            return "tc is missing: cannot cut with netem"
        r = subprocess.run(["tc", "qdisc", "add", "dev", self.host_if, "root", "netem", "loss", "0%"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            return f"this kernel has no netem qdisc ({r.stderr.strip()})"
        subprocess.run(["tc", "qdisc", "del", "dev", self.host_if, "root"], capture_output=True, timeout=10)
        return ""

    def cut(self, method: str = CUT_DOWN) -> None:
        if self.cut_method is not None:
            raise RuntimeError(f"the link is already cut ({self.cut_method})")
        if method == CUT_DOWN:
            _ip("link", "set", self.host_if, "down")
        elif method == CUT_NETEM:
            if shutil.which("tc") is None:
                raise RuntimeError("tc is missing: cannot cut with netem")
            subprocess.run(["tc", "qdisc", "add", "dev", self.host_if, "root", "netem", "loss", "100%"],
                           check=True, capture_output=True, timeout=10)
            subprocess.run(["ip", "netns", "exec", self.netns, "tc", "qdisc", "add", "dev", self.ns_if, "root",
                            "netem", "loss", "100%"], check=True, capture_output=True, timeout=10)
        else:
            raise ValueError(f"unknown cut method {method!r} (use {CUT_DOWN!r} or {CUT_NETEM!r})")
        self.cut_method = method
        self.cut_at = time.monotonic()

    def restore(self) -> float:
        """Undo the cut; returns how long it lasted."""
        if self.cut_method is None or self.cut_at is None:
            return 0.0
        if self.cut_method == CUT_DOWN:
            _ip("link", "set", self.host_if, "up")
        else:
            subprocess.run(["tc", "qdisc", "del", "dev", self.host_if, "root"], capture_output=True, timeout=10)
            subprocess.run(["ip", "netns", "exec", self.netns, "tc", "qdisc", "del", "dev", self.ns_if, "root"],
                           capture_output=True, timeout=10)
        lasted = time.monotonic() - self.cut_at
        self.outages.append(lasted)
        self.cut_method = self.cut_at = None
        return lasted
