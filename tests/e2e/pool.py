"""A personal pool of real daemon processes for the end-to-end tests and the pool benchmark.

Every daemon runs as ``python -m gridbus.agents.<kind>`` in its own process, configured only
through ``GRIDBUS_*`` environment variables (a per-test vhost, short intervals, its own LOCAL_DIR
under a temp directory), and is stopped (SIGTERM, then SIGKILL) when the pool closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gridbus.bus import BrokerURL
from gridbus.classad import ExprTree
from gridbus.console import Session
from gridbus.mgmt import Management
from tests.helpers import wait_for as shared_wait_for

ROOT = Path(__file__).resolve().parents[2]

# What every daemon of a test pool shares: intervals of about a second, so a test sees ads,
# cycles and lease checks within a few seconds.
BASE_ENV = {
    "GRIDBUS_UPDATE_INTERVAL": "1",
    "GRIDBUS_SCHEDD_INTERVAL": "1",
    "GRIDBUS_NEGOTIATOR_INTERVAL": "1",
    "GRIDBUS_NEGOTIATOR_CYCLE_DELAY": "0.3",
    "GRIDBUS_STARTER_UPDATE_INTERVAL": "5",
    # The tests run as root and their owners (broker users) have no Unix accounts: every owner is
    # mapped to root, whose jobs STARTER_ALLOW_ROOT_JOBS lets run (jobs are /bin/true).
    "GRIDBUS_STARTER_ALLOW_ROOT_JOBS": "true",
    "GRIDBUS_USER_MAP": "*=root",
    "GRIDBUS_STARTD_REPORT_RETRY": "0.5",
    "GRIDBUS_KILLING_TIMEOUT": "1",
    "GRIDBUS_JOB_LEASE_DURATION": "6",
    "GRIDBUS_SCHEDD_QUEUE_SYNC": "NORMAL",
}


def wait_for(what: str, predicate: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something true; fail naming ``what`` at the deadline."""
    return shared_wait_for(predicate, timeout, what, interval=interval)


def logged(log: Path | str, kind: Any, n: int, timeout: float = 30) -> list[Any]:
    """The events of ``kind`` in a user log once it holds ``n`` of them. The schedd hands the
    event text to the owner's shadow after the job's change is committed, so a job may be in the
    history a moment before its event is in the log: a test waits for the log, as condor_wait does."""
    from htcondor2 import JobEventLog

    def events() -> list[Any]:
        found = [e for e in JobEventLog(str(log)).events(0) if e.type == kind]
        return found if len(found) >= n else []

    return wait_for(f"{n} {kind!r} events in {log}", events, timeout)


class Pool:
    def __init__(self, url: str, workdir: Path, **env: str):
        self.url = url
        self.workdir = Path(workdir)
        # Job cgroups of a pool of its own: a startd cleans up its namesake's groups when it starts.
        self.env = {**BASE_ENV, "GRIDBUS_BASE_CGROUP": f"gridbus-test/{uuid.uuid4().hex[:12]}",
                    **{k: str(v) for k, v in env.items()}}
        self.procs: dict[str, subprocess.Popen] = {}
        self.config = self.workdir / "gridbus.toml"
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text("# the e2e pool is configured through GRIDBUS_* variables\n")
        self.session: Session | None = None
        # A command to run a daemon under (by address), e.g. ``ip netns exec <ns>`` (tests/integration/faults).
        self.wrappers: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ where a daemon's files are
    def local_dir(self, address: str) -> Path:
        """The daemon's LOCAL_DIR as the daemon sees it. Here every daemon is on this host; a pool
        of several hosts (tests/multihost) puts some on hosts whose files this one cannot see."""
        kind, _, name = address.partition("@")
        return self.workdir / f"{kind}-{name}"

    def console_dir(self, address: str) -> Path:
        """Where the daemon's stdout and stderr (stderr.log), as a terminal would show them, stay
        with the test, on this host."""
        kind, _, name = address.partition("@")
        return self.workdir / f"{kind}-{name}"

    def reach(self, address: str, path: Path) -> Path:
        """``path`` of the host that runs ``address``, as this test process reaches it."""
        return Path(path)

    # ------------------------------------------------------------------ processes
    def start(self, kind: str, name: str, *, module: str | None = None, python: str | None = None,
              source: Path | None = None, **env: Any) -> subprocess.Popen:
        """Run daemon ``kind@name`` (``module``: the one to run, by default gridbus.agents.<kind>;
        ``python`` and ``source``: another release's interpreter and tree, by default this one's)."""
        address = f"{kind}@{name}"
        local = self.local_dir(address)
        self.reach(address, local).mkdir(parents=True, exist_ok=True)
        console = self.console_dir(address)
        console.mkdir(parents=True, exist_ok=True)
        full = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_")}
        full.update(self.env)
        full.update({
            "GRIDBUS_URL": self.url,
            "GRIDBUS_CONFIG": str(self.config),
            "GRIDBUS_LOCAL_DIR": str(local),
            "PYTHONPATH": str(source or ROOT),
        })
        full.update({k: str(v) for k, v in env.items()})
        log = open(console / "stderr.log", "ab")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(
            [*self.wrappers.get(address, []),
             python or sys.executable, "-m", module or f"gridbus.agents.{kind}", "--name", name, "--log-dir", str(local / "log")],
            env=full, cwd=str(console), stdout=log, stderr=subprocess.STDOUT,
        )
        self.procs[address] = proc
        return proc

    def kill(self, address: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[address]
        proc.send_signal(sig)
        proc.wait(10)

    def stop(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        # The startds first: they stop their jobs and report the exits to a schedd still there to
        # answer (a startd whose schedd is gone waits out its report timeout before it exits).
        startds = [p for a, p in self.procs.items() if a.startswith("startd@")]
        others = [p for a, p in self.procs.items() if not a.startswith("startd@")]
        for group in (startds, others):
            for proc in group:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 10
            for proc in group:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        # What a startd killed and not restarted left in its job cgroups.
        from gridbus.agents.startd import cgroups

        cgroups.purge(self.env["GRIDBUS_BASE_CGROUP"])

    def diagnosis(self, schedd: str = "schedd@s", lines: int = 30) -> str:
        """What a test prints when the pool did not do what it waited for: each daemon's process
        state and the end of its logs, and the schedd's jobs by status."""
        out = []
        for address, proc in self.procs.items():
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            out.append(f"== {address} (pid {proc.pid}, {state})")
            logs = self.reach(address, self.local_dir(address) / "log")
            for path in [*sorted(logs.glob("*")), self.console_dir(address) / "stderr.log"]:
                if path.is_file():
                    tail = path.read_text(errors="replace").splitlines()[-lines:]
                    out.append(f"-- {path.name}:\n" + "\n".join(tail))
        try:
            jobs = self.jobs(schedd, "true", ["ClusterId", "ProcId", "JobStatus", "RemoteHost"])
            out.append(f"== {schedd} jobs: " + ", ".join(
                f"{j.get('ClusterId')}.{j.get('ProcId')}:{j.get('JobStatus')}@{j.get('RemoteHost', '')}" for j in jobs))
        except Exception as exc:
            self._drop_session()
            out.append(f"== {schedd} jobs: no answer ({exc})")
        return "\n".join(out)

    def log_of(self, address: str, name: str) -> str:
        path = self.reach(address, self.local_dir(address) / "log" / name)
        return path.read_text() if path.exists() else ""

    # ------------------------------------------------------------------ console
    def console(self) -> Session:
        if self.session is None:
            self.session = Session(self.url, timeout=30)
        return self.session

    def call(self, address: str, method: str, args: dict | None = None, timeout: float = 30) -> Any:
        return self.console().call(address, method, args or {}, timeout=timeout).check(f"{address} {method}")

    def ads(self, mytype: str, constraint: str = "true") -> list[dict]:
        try:
            r = self.console().call("collector@c", "Query", {"AdTypes": [mytype], "Constraint": constraint}, timeout=10)
        except Exception:
            self._drop_session()
            return []
        return r.outArgs.get("Ads", []) if r.ok else []

    # A cheap call each agent answers, to probe whether it serves.
    PROBES = {"collector": ("Query", {"AdTypes": ["Collector"], "Limit": 1}),
              "schedd": ("Query", {"Constraint": "false"}),
              "negotiator": ("GetLimits", {})}

    def serves(self, address: str) -> bool:
        """Whether the agent answers now. A request sent before its queue exists is dropped, so
        the probe's timeout is short: a fresh pool would otherwise wait out a long one."""
        method, args = self.PROBES[address.partition("@")[0]]
        try:
            return self.console().call(address, method, args, timeout=1).ok
        except Exception:
            self._drop_session()
            return False

    def wait_serving(self, *addresses: str, timeout: float = 30) -> None:
        for address in addresses:
            wait_for(f"{address} to serve", lambda a=address: self.serves(a), timeout)

    def _drop_session(self) -> None:
        # Before the first daemon declares the exchanges the broker closes the channel: start over.
        if self.session is not None:
            try:
                self.session.close()
            except Exception:
                pass
        self.session = None

    def wait_slots(self, n: int, timeout: float = 30) -> list[dict]:
        self.wait_serving("collector@c", timeout=timeout)
        return wait_for(f"{n} Machine ads", lambda: (a := self.ads("Machine")) and len(a) >= n and a, timeout)

    def submit(self, schedd: str, count: int, *, cmd: str = "/bin/true", args: str = "", owner: str | None = None,
               requirements: str = "true", log: Path | None = None, **attrs: Any) -> int:
        ad: dict[str, Any] = {"Cmd": cmd, "Arguments": args, "Iwd": str(self.workdir), "JobUniverse": 5,
                              "Requirements": ExprTree(requirements), "RequestCpus": 1, "RequestMemory": 16,
                              "RequestDisk": 64, **attrs}
        if owner:
            ad["Owner"] = owner
        if log is not None:
            ad["UserLog"] = str(log)
        return self.call(schedd, "Submit", {"Ad": ad, "Count": count}).ClusterId

    def jobs(self, schedd: str, constraint: str = "true", projection: list[str] | None = None) -> list[dict]:
        args = {"Constraint": constraint, "Projection": projection or []}
        return self.call(schedd, "Query", args).outArgs.get("Jobs", [])

    def history(self, schedd: str, constraint: str = "true", projection: list[str] | None = None) -> list[dict]:
        args = {"Constraint": constraint, "Projection": projection or []}
        return self.call(schedd, "History", args).outArgs.get("Jobs", [])

    def negotiator_stats(self) -> dict:
        ads = self.ads("Negotiator")
        return ads[0] if ads else {}


@contextlib.contextmanager
def standard_pool(broker_url: BrokerURL, mgmt: Management, base: Path, name: str, *, slots: dict[str, str],
                  schedd_env: dict[str, str] | None = None) -> Iterator[Pool]:
    """A pool of its own vhost shared by a module's tests: collector, negotiator, schedd and one
    startd with ``slots`` (its GRIDBUS_NUM_SLOTS), up and serving; stopped and its vhost removed after."""
    vhost = f"gridbus-test-{name}-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    pool = Pool(broker_url.with_vhost(vhost).url, base)
    try:
        pool.start("collector", "c")
        pool.start("negotiator", "n")
        pool.start("schedd", "s", **(schedd_env or {}))
        pool.start("startd", "a", **slots)
        pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
        pool.wait_slots(int(slots["GRIDBUS_NUM_SLOTS"]))
        yield pool
    finally:
        pool.stop()
        mgmt.delete_vhost(vhost)
