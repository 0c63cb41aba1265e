"""One execute host of a multi-host test pool: a network, a file system and a name of its own.

A `Host` is

- a network namespace joined to this machine by a veth pair, with a TCP forwarder to the broker
  (`NetnsLink`): the host's daemons reach the broker only through that veth, so ``link_down()``
  cuts exactly this host off;
- a mount and UTS namespace held by a *keeper* process (``sleep infinity``): its own ``/tmp`` and
  ``/var/tmp`` (directories of its own on disk, bound over the machine's), a fresh ``/dev/shm``,
  its own ``/etc/hosts`` and host name (``<name>.gridbus.test``), and the directories given as
  ``hide`` (the submit host's working directory) covered by an empty tmpfs. Every daemon of the
  host joins these namespaces with ``nsenter``; the host's files outlive a daemon restart, as a
  real machine's do, and vanish with the keeper.

The rest of the machine's file system (the Python installation, the checkout, even one under /tmp:
`installation()`) stays visible, as an installed package is on a real execute host; what the
submit host writes (its ``/tmp``, the test's working directory) is not. The test process reaches the host's files through ``reach()``.

Names carry the test process's pid (namespace ``gbt-m<pid>x<n>``, veth ``gbhm<pid>x<n>``), so
`remove_stale` can remove what a run killed half way left behind without touching a live run's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.integration.faults import netns
from tests.integration.faults.netns import CUT_DOWN, NetnsLink

DOMAIN = "gridbus.test"  # a reserved top-level domain (RFC 2606): never a real machine
LOCAL_DIR = Path("/tmp/gridbus")  # where every host keeps its daemons' LOCAL_DIRs (as on a real host)

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
# The directories every host gets its own of (bound over the machine's).
_PRIVATE = (Path("/tmp"), Path("/var/tmp"))


def installation() -> list[Path]:
    """The checkout and the virtualenv the daemons run from, where the hosts' own /tmp or
    /var/tmp would hide them (a clone under /tmp): they stay visible on every host, as an
    installed package is on a real execute host."""
    paths = {Path(__file__).resolve().parents[2], Path(sys.prefix).resolve()}
    under = sorted(p for p in paths if any(p.is_relative_to(d) and p != d for d in _PRIVATE))
    return [p for p in under if not any(p != q and p.is_relative_to(q) for q in under)]
_STALE = re.compile(r"^(?:gbt-|gbh|gbn)m(\d+)x\d+$")
_seq = itertools.count()


def unavailable() -> str:
    """Why this machine cannot build hosts ("" if it can): the tests skip with this reason."""
    if os.geteuid() != 0:
        return "multi-host pools need root (network, mount and UTS namespaces, veth pairs, mounts)"
    why = netns.unavailable()
    if why:
        return f"multi-host pools: {why}"
    for tool in ("nsenter", "unshare", "mount", "hostname"):
        if shutil.which(tool) is None:
            return f"multi-host pools need the {tool} command (util-linux)"
    probe = subprocess.run(["unshare", "--mount", "--uts", "--propagation", "private", "--", "true"],
                           capture_output=True, text=True, timeout=10)
    if probe.returncode != 0:
        return f"multi-host pools need mount and UTS namespaces: unshare says {probe.stderr.strip()!r}"
    return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Remove the namespaces and veths of earlier runs whose test process is gone; their names."""
    removed: list[str] = []
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        m = _STALE.match(name)
        if m and not _alive(int(m.group(1))):
            for pid in subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                                      timeout=10).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
            removed.append(name)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=10).stdout
    for line in links.splitlines():
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        m = _STALE.match(name)
        if m and not _alive(int(m.group(1))):
            # (Deleting one end of a pair takes the other with it: that one is then gone already.)
            if subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=10).returncode == 0:
                removed.append(name)
    return removed


class Host:
    """An execute host: see the module's docstring. ``open()`` builds it, ``close()`` removes it."""

    def __init__(self, name: str, root: Path, *, filesystem_domain: str | None = None,
                 uid_domain: str | None = None, hide: Iterable[Path] = ()):
        if not _NAME.match(name):
            raise ValueError(f"a host name is a lower-case DNS label (letters, digits, '-'), not {name!r}")
        self.name = name
        self.fqdn = f"{name}.{DOMAIN}"
        # HTCondor's defaults for both are the machine's full name: a host of its own.
        self.filesystem_domain = filesystem_domain or self.fqdn
        self.uid_domain = uid_domain or self.fqdn
        self.root = Path(root)  # this host's disk, on the machine (the test's side)
        self.hide = [Path(p) for p in hide]
        self.link = NetnsLink(f"m{os.getpid()}x{next(_seq)}")
        self.keeper: subprocess.Popen | None = None

    def __repr__(self) -> str:
        return f"Host({self.fqdn}, netns {self.link.netns})"

    # ------------------------------------------------------------------ build and tear down
    def open(self, timeout: float = 10.0) -> Host:
        try:
            for sub in ("tmp", "var-tmp"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
                (self.root / sub).chmod(0o1777)  # as /tmp: any job account may write there
            self.link.open()
            hosts = self.root / "hosts"
            hosts.write_text(f"127.0.0.1 localhost\n::1 localhost\n{self.link.ns_addr} {self.fqdn} {self.name}\n")
            self.keeper = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{self.link.netns}",
                 "unshare", "--mount", "--uts", "--propagation", "private", "--", "sh", "-c", self._script(hosts)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            self._wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _script(self, hosts: Path) -> str:
        q = shlex.quote
        lines = ["set -e", f"mount --bind {q(str(hosts))} /etc/hosts"]
        for path in installation():  # kept: bound into the host's own directory before it covers
            private = next(d for d in _PRIVATE if path.is_relative_to(d))
            inside = self.root / ("tmp" if private == Path("/tmp") else "var-tmp") / path.relative_to(private)
            lines += [f"mkdir -p {q(str(inside))}", f"mount --bind {q(str(path))} {q(str(inside))}"]
        lines += [
            f"mount --rbind {q(str(self.root / 'var-tmp'))} /var/tmp",
            "mount -t tmpfs -o size=64m,mode=1777 gridbus-shm /dev/shm",
            # Last of the binds: the sources above may live under the machine's /tmp.
            f"mount --rbind {q(str(self.root / 'tmp'))} /tmp",
        ]
        for path in self.hide:
            # Under /tmp it is gone already; elsewhere an empty tmpfs covers it.
            lines.append(f"if [ -d {q(str(path))} ]; then mount -t tmpfs -o size=1m,mode=0755 gridbus-hidden "
                         f"{q(str(path))}; fi")
        lines += [f"hostname {q(self.fqdn)}", "echo ready", "exec sleep infinity"]
        return "\n".join(lines)

    def _wait_ready(self, timeout: float) -> None:
        assert self.keeper is not None and self.keeper.stdout is not None
        ready, _, _ = select.select([self.keeper.stdout], [], [], timeout)
        line = self.keeper.stdout.readline().decode().strip() if ready else ""
        if line != "ready":
            self.keeper.kill()
            err = self.keeper.stderr.read().decode().strip() if self.keeper.stderr else ""
            raise RuntimeError(f"host {self.name}: its namespaces were not ready within {timeout:g} s ({err or line!r})")

    def close(self) -> None:
        """End the keeper and every process left in the host; remove its link. The host's disk
        (``root``) stays, for a failed test's logs; safe to call twice and after a partial open."""
        with contextlib.suppress(Exception):
            self.link_up()
        if self.keeper is not None:
            if self.keeper.poll() is None:
                self.keeper.kill()
            self.keeper.wait(10)
            for pipe in (self.keeper.stdout, self.keeper.stderr):
                if pipe is not None:
                    pipe.close()
            self.keeper = None
        self.link.close()  # kills what is left in the namespace by pid, then removes it and the veth

    # ------------------------------------------------------------------ use
    def command(self, cwd: Path) -> list[str]:
        """A prefix that runs a program on this host, in ``cwd`` (a path of the host); the program
        keeps the pid (nsenter and sh exec it), so signals reach it directly."""
        if self.keeper is None or self.keeper.poll() is not None:
            raise RuntimeError(f"host {self.name} is not open")
        return ["nsenter", f"--target={self.keeper.pid}", "--mount", "--uts", "--net", "--",
                "sh", "-c", 'cd "$0" && exec "$@"', str(cwd)]

    def run(self, argv: list[str], *, cwd: Path | str = "/", env: dict[str, str] | None = None,
            timeout: float = 10.0) -> subprocess.CompletedProcess:
        """Run ``argv`` on this host in ``cwd`` and wait for it (its output as text): to look around
        as the host sees things, or to run a console there."""
        return subprocess.run([*self.command(Path(cwd)), *argv], capture_output=True, text=True, env=env,
                              timeout=timeout)

    def reach(self, path: Path | str) -> Path:
        """Where the test process finds the host's ``path``: under ``root`` for its /tmp and
        /var/tmp (readable after the host is gone), else through the keeper's view of /."""
        p = Path(path)
        if not p.is_absolute():
            raise ValueError(f"a host path is absolute, not {p}")
        for inside, outside in ((Path("/tmp"), self.root / "tmp"), (Path("/var/tmp"), self.root / "var-tmp")):
            if p == inside or inside in p.parents:
                return outside / p.relative_to(inside)
        if self.keeper is None:
            raise RuntimeError(f"host {self.name} is closed: {p} is gone with it")
        return Path(f"/proc/{self.keeper.pid}/root") / p.relative_to("/")

    def broker_url(self, url: str) -> str:
        """``url`` (the broker at 127.0.0.1:5672) as this host reaches it: through its veth."""
        return self.link.broker_url(url)

    def link_down(self) -> None:
        """Cut the host off: its veth goes down; TCP connections stay open and stall, as on an outage."""
        self.link.cut(CUT_DOWN)

    def link_up(self) -> float:
        """Undo ``link_down()`` (nothing if the link is up); returns how long the outage lasted."""
        return self.link.restore()
