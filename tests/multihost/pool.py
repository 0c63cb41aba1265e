"""A pool of several hosts: the submit host (this machine) and execute hosts (`Host`).

The submit host runs the collector, the negotiator and the schedd as the e2e pools do, with the
test process as its console; each execute host runs its startd (and whatever else a test starts
on it with ``start_on``) inside its namespaces, reaching the broker through its own veth.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from gridbus.submit import jobad
from tests.e2e.pool import ROOT, Pool
from tests.multihost.host import LOCAL_DIR, Host, remove_stale

SCHEDD = "schedd@s"
COLLECTOR = "collector@c"
NEGOTIATOR = "negotiator@n"
# What an execute host's startd has unless the test says otherwise: two static slots.
EXECUTE_SLOTS = {"GRIDBUS_NUM_CPUS": "2", "GRIDBUS_NUM_SLOTS": "2", "GRIDBUS_MEMORY": "2048"}


class MultiHostPool(Pool):
    """`Pool` whose daemons may run on execute hosts: ``base/submit`` is the submit host's working
    directory, ``base/hosts/<name>`` each execute host's disk."""

    def __init__(self, url: str, base: Path, **env: str):
        super().__init__(url, Path(base) / "submit", **env)
        self.base = Path(base)
        self.hosts: dict[str, Host] = {}
        self.placed: dict[str, Host] = {}  # daemon address -> the execute host it runs on

    @property
    def submit_filesystem_domain(self) -> str:
        """The FileSystemDomain the test process (the submit host) puts in the jobs it builds."""
        return jobad.filesystem_domain()

    # ------------------------------------------------------------------ hosts
    def add_host(self, name: str, *, filesystem_domain: str | None = None, uid_domain: str | None = None) -> Host:
        if name in self.hosts:
            raise ValueError(f"the pool has a host {name!r} already")
        # Every host hides the whole base: the submit host's files and the other hosts' disks.
        host = Host(name, self.base / "hosts" / name, filesystem_domain=filesystem_domain, uid_domain=uid_domain,
                    hide=[self.base])
        self.hosts[name] = host
        host.open()
        return host

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no host {name!r} in the pool (it has {sorted(self.hosts)})") from None

    def start_on(self, host: Host, kind: str, name: str | None = None, **env: Any) -> subprocess.Popen:
        """Start ``gridbus.agents.<kind>`` on ``host`` (named after the host unless ``name``): the
        host's broker path, FILESYSTEM_DOMAIN and UID_DOMAIN, a LOCAL_DIR and config of its own."""
        name = name or host.name
        address = f"{kind}@{name}"
        self.placed[address] = host
        self.wrappers[address] = host.command(self.local_dir(address))
        config = self.local_dir(address) / "gridbus.toml"
        self.reach(address, config).parent.mkdir(parents=True, exist_ok=True)
        self.reach(address, config).write_text(f"# {host.fqdn}: configured through GRIDBUS_* variables\n")
        return self.start(kind, name, GRIDBUS_URL=host.broker_url(self.url), GRIDBUS_CONFIG=str(config),
                          GRIDBUS_FILESYSTEM_DOMAIN=host.filesystem_domain, GRIDBUS_UID_DOMAIN=host.uid_domain, **env)

    def console_on(self, host: Host, argv: list[str], *, cwd: Path | str = "/tmp",
                   timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run the ``gridbus`` command line (``argv`` after the program name) on ``host``, as a user
        of that machine: in ``cwd`` there, reaching the pool through the host's veth, building jobs
        with the host's FILESYSTEM_DOMAIN."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8",
               "PYTHONPATH": str(ROOT), "GRIDBUS_URL": host.broker_url(self.url),
               "GRIDBUS_FILESYSTEM_DOMAIN": host.filesystem_domain, "GRIDBUS_UID_DOMAIN": host.uid_domain}
        return host.run([sys.executable, "-m", "console.cli", *argv], cwd=cwd, env=env, timeout=timeout)

    def host_of(self, address: str) -> Host | None:
        """The execute host running ``address``; None for the submit host."""
        return self.placed.get(address)

    def local_dir(self, address: str) -> Path:
        if address in self.placed:
            kind, _, name = address.partition("@")
            return LOCAL_DIR / f"{kind}-{name}"
        return super().local_dir(address)

    def reach(self, address: str, path: Path) -> Path:
        host = self.placed.get(address)
        return host.reach(path) if host is not None else super().reach(address, path)

    # ------------------------------------------------------------------ tear down
    def stop(self) -> None:
        """Stop every daemon (links restored first, so they can say goodbye), then remove the hosts."""
        for host in self.hosts.values():
            host.link_up()
        try:
            super().stop()
        finally:
            for host in self.hosts.values():
                host.close()


@contextlib.contextmanager
def multihost_pool(broker_url: BrokerURL, mgmt: Management, base: Path, name: str,
                   hosts: Mapping[str, Mapping[str, str]], *, env: Mapping[str, str] | None = None,
                   slots: Mapping[str, str] = EXECUTE_SLOTS) -> Iterator[MultiHostPool]:
    """A multi-host pool in a vhost of its own, up and serving: the submit host's collector
    (``collector@c``), negotiator (``negotiator@n``) and schedd (``schedd@s``), and for each entry
    of ``hosts`` (name -> ``add_host`` options) a host running ``startd@<name>`` with ``slots``.
    Stopped, its hosts and vhost removed, after; what a killed earlier run left is removed before."""
    remove_stale()
    vhost = f"gridbus-test-{name}-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    pool = MultiHostPool(broker_url.with_vhost(vhost).url, base, **(env or {}))
    try:
        pool.start("collector", "c")
        pool.start("negotiator", "n")
        pool.start("schedd", "s")
        for host_name, options in hosts.items():
            pool.start_on(pool.add_host(host_name, **options), "startd", **slots)
        pool.wait_serving(COLLECTOR, SCHEDD, NEGOTIATOR)
        pool.wait_slots(len(hosts) * int(slots.get("GRIDBUS_NUM_SLOTS", "1")))
        yield pool
    finally:
        try:
            pool.stop()
        finally:
            mgmt.delete_vhost(vhost)
