"""The master agent: runs the daemons of one host, restarts the ones that die, advertises them.

Start order is DAEMON_LIST's; a stop (the master's own, or Stop with no daemon named) goes in the
reverse order, so the startd vacates its jobs while the schedd can still hear about it, and the
collector goes last. Reconfig re-reads the configuration, starts daemons added to DAEMON_LIST,
stops removed ones, restarts one whose module or arguments changed, and sends SIGHUP to the rest:
a daemon re-reads its knobs on SIGHUP (`Agent.reconfig`, installed by `gridbus.agent.runner`).
"""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import Any

from gridbus.agent import Agent, Call, method
from gridbus.agents.master import pidfile
from gridbus.agents.master.children import Backoff, DaemonProcess, log_name
from gridbus.config import Config, knob
from gridbus.status import invalid

knob("MASTER_NAME", "", "the master's name (its address is master@<name>); empty: the host name")
knob("MASTER_BACKOFF_CONSTANT", 9.0, "seconds added to every restart delay of a daemon that died")
knob("MASTER_BACKOFF_FACTOR", 2.0, "base of the exponential restart delay: constant + factor ** restarts")
knob("MASTER_BACKOFF_CEILING", 3600.0, "longest delay before restarting a daemon that died")
knob("MASTER_RECOVER_FACTOR", 300.0, "seconds a daemon must run for its restart count to start again from zero")
knob("SHUTDOWN_GRACEFUL_TIMEOUT", 30.0, "seconds a daemon has to stop after SIGTERM before it is killed")


def daemon_list(cfg: Config) -> list[str]:
    """DAEMON_LIST upper-cased, in order, without MASTER (that is us) and without repeats."""
    out: list[str] = []
    for name in cfg.get("DAEMON_LIST"):
        key = str(name).strip().upper()
        if key and key != "MASTER" and key not in out:
            out.append(key)
    return out


# Daemons of DAEMON_LIST that are not under gridbus.agents: the web console is a client of the
# pool (it lives with the console, above core), though the master runs it as any other daemon.
DAEMON_MODULES = {"WEB": "gridbus.console.web"}


def daemon_module(cfg: Config, name: str) -> str:
    """The module run for daemon ``name``: the knob of that name, else gridbus.agents.<name>
    (DAEMON_MODULES names the exceptions)."""
    return str(cfg.get(name, "") or DAEMON_MODULES.get(name) or f"gridbus.agents.{name.lower()}")


def daemon_args(cfg: Config, name: str) -> list[str]:
    raw = cfg.get(f"{name}_ARGS", "")
    return [str(a) for a in raw] if isinstance(raw, list) else shlex.split(str(raw))


class Master(Agent):
    kind = "master"
    classes = ("master",)
    my_type = "Master"

    def __init__(self, config: Config, name: str | None = None, url: str | None = None, *, foreground: bool = False):
        self.config = config
        self.foreground = foreground
        interval = float(config.get("UPDATE_INTERVAL"))
        super().__init__(
            name or config.daemon_name("master"),
            url or config.url(),
            update_interval=interval,
            lifetime=float(config.get("CLASSAD_LIFETIME")) or None,
            admins=config.get("ALLOW_ADMINISTRATOR"),
        )
        self.daemons: dict[str, DaemonProcess] = {}
        self._lock: asyncio.Lock | None = None
        self.last_signalled: list[str] = []  # daemons sent SIGHUP by the last reconfig
        self.graceful_off = True  # Off(Graceful=false) makes the master's own stop a fast one
        self.restart_self = False  # Restart(Master=true): execute the master again once stopped
        self.stats.update({"DaemonRestarts": 0})

    # ------------------------------------------------------------------ configuration
    @property
    def run_dir(self) -> Path:
        return self.config.path_of("RUN")

    @property
    def log_dir(self) -> Path:
        return self.config.path_of("LOG")

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "master.pid"

    def child_env(self) -> dict[str, str]:
        """The daemons' environment: the master's, with the broker URL and file it runs with."""
        env = dict(os.environ)
        env["GRIDBUS_URL"] = self.url.url
        if self.config.path is not None:
            env["GRIDBUS_CONFIG"] = str(self.config.path)
        # Directories resolved once here, so a daemon started elsewhere finds the same ones.
        env["GRIDBUS_LOCAL_DIR"] = str(self.config.path_of("LOCAL_DIR"))
        return env

    def backoff(self) -> Backoff:
        cfg = self.config
        return Backoff(
            float(cfg.get("MASTER_BACKOFF_CONSTANT")),
            float(cfg.get("MASTER_BACKOFF_FACTOR")),
            float(cfg.get("MASTER_BACKOFF_CEILING")),
            float(cfg.get("MASTER_RECOVER_FACTOR")),
        )

    def _make(self, name: str) -> DaemonProcess:
        args = ["--log-dir", str(self.log_dir)]
        if self.foreground:
            args.append("--foreground")
        return DaemonProcess(
            name,
            daemon_module(self.config, name),
            [*args, *daemon_args(self.config, name)],
            env=self.child_env(),
            run_dir=self.run_dir,
            # In the foreground a daemon's stderr is the terminal; detached, a file beside its log
            # catches what comes before its logging starts (an import error, a crash).
            output=None if self.foreground else self.log_dir / f"{log_name(name)}.out",
            backoff=self.backoff(),
            stop_timeout=float(self.config.get("SHUTDOWN_GRACEFUL_TIMEOUT")),
            on_change=self._daemon_changed,
        )

    def _daemon_changed(self) -> None:
        self.stats["DaemonRestarts"] = sum(d.total_restarts for d in self.daemons.values())
        self.ads_changed()

    # ------------------------------------------------------------------ ads and objects
    def _records(self) -> list[dict[str, Any]]:
        return [d.record() for d in self.daemons.values()]

    def daemon_ad(self) -> dict[str, Any]:
        ad = super().daemon_ad()
        ad.update(
            DaemonList=", ".join(["MASTER", *self.daemons]),
            Daemons=self._records(),
            NumDaemonsAlive=sum(1 for d in self.daemons.values() if d.state == "Alive"),
            MasterPid=os.getpid(),
            LocalDir=str(self.config.path_of("LOCAL_DIR")),
        )
        for d in self.daemons.values():  # HTCondor-style flat attributes, for constraints
            ad[f"{d.name.capitalize()}State"] = d.state
        return ad

    def object_properties(self) -> dict[str, Any]:
        return {
            **super().object_properties(),
            "DaemonList": ", ".join(self.daemons),
            "Daemons": self._records(),
            "MasterPid": os.getpid(),
        }

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        self._lock = asyncio.Lock()
        owner = pidfile.live_pid(self.pid_file, "gridbus.agents.master")
        if owner is not None and owner != os.getpid():
            raise RuntimeError(
                f"another master (pid {owner}) runs with {self.pid_file}; stop it first (gridbus pool down)"
            )
        pidfile.write(self.pid_file, os.getpid())

    async def on_start(self) -> None:
        assert self._lock is not None
        async with self._lock:
            for name in daemon_list(self.config):
                self.daemons[name] = self._make(name)
                await self._start_one(self.daemons[name])

    async def _start_one(self, daemon: DaemonProcess) -> int:
        try:
            return await daemon.start()
        except OSError as exc:
            raise invalid(f"could not start {daemon.name} ({daemon.module}): {exc}") from exc

    async def on_stop(self) -> None:
        lock = self._lock or asyncio.Lock()
        async with lock:
            await self._stop_all(graceful=self.graceful_off)
        pidfile.remove(self.pid_file, os.getpid())
        self.log.info("master (pid %d) exiting; its daemons are stopped", os.getpid())

    async def _stop_all(self, graceful: bool) -> list[str]:
        stopped = []
        for daemon in reversed(list(self.daemons.values())):
            if daemon.pid or daemon.wanted:
                await daemon.stop(graceful)
                stopped.append(daemon.name)
        return stopped

    def _named(self, daemon: str) -> DaemonProcess:
        key = daemon.strip().upper()
        if key == "MASTER":
            raise invalid("the master does not start, stop or restart itself; use `gridbus pool down`")
        found = self.daemons.get(key)
        if found is None:
            known = ", ".join(self.daemons) or "none"
            raise invalid(f"no daemon {daemon!r} in this master's DAEMON_LIST (known: {known})")
        return found

    # ------------------------------------------------------------------ reconfig
    async def reconfig(self) -> list[str]:
        """Re-read the configuration and apply it; returns the names of the knobs that changed."""
        assert self._lock is not None
        new = self.apply_runtime(self.config.reload())
        changed = self.config.changed(new)
        old = self.config
        self.config = new
        self.update_interval = float(new.get("UPDATE_INTERVAL"))
        self.lifetime = float(new.get("CLASSAD_LIFETIME")) or 3 * self.update_interval
        self.admins = set(new.get("ALLOW_ADMINISTRATOR")) | {self.url.user}
        signalled: list[str] = []
        async with self._lock:
            wanted = daemon_list(new)
            for name in [n for n in reversed(self.daemons) if n not in wanted]:
                await self.daemons.pop(name).stop()
            backoff = self.backoff()
            for name in wanted:
                current = self.daemons.get(name)
                if current is None:
                    self.daemons[name] = self._make(name)
                    await self._start_one(self.daemons[name])
                    continue
                current.backoff = backoff
                current.stop_timeout = float(new.get("SHUTDOWN_GRACEFUL_TIMEOUT"))
                how = (daemon_module(new, name), daemon_args(new, name))
                if how != (daemon_module(old, name), daemon_args(old, name)):
                    was_wanted = current.wanted
                    await current.stop()
                    self.daemons[name] = self._make(name)
                    if was_wanted:
                        await self._start_one(self.daemons[name])
                elif current.hup():
                    signalled.append(name)
            # Keep DAEMON_LIST's order, which is the start order and, reversed, the stop order.
            self.daemons = {n: self.daemons[n] for n in wanted}
        self.last_signalled = signalled
        self.log.info("reconfigured; changed knobs: %s; signalled %s", ", ".join(changed) or "none",
                      ", ".join(signalled) or "no daemon")
        self.ads_changed()
        return changed

    # ------------------------------------------------------------------ methods
    @method("master")
    async def Start(self, call: Call, Daemon: str = "") -> dict:
        assert self._lock is not None
        async with self._lock:
            targets = [self._named(Daemon)] if Daemon else [d for d in self.daemons.values() if not d.pid]
            pids = {}
            for daemon in targets:
                pids[daemon.name] = await self._start_one(daemon)
        self.log.info("%s started %s", call.user, ", ".join(f"{n} (pid {p})" for n, p in pids.items()) or "nothing")
        return {"Pid": pids[targets[0].name] if Daemon else 0, "Pids": pids}

    @method("master")
    async def Off(self, call: Call, Graceful: bool = True) -> dict:
        # HTCondor's condor_off -master: the daemons stop (in reverse DAEMON_LIST order), then the
        # master exits; the answer goes out first.
        if self._stop_requested is None:
            raise invalid("this master was not started as a daemon process; it cannot turn itself off")
        self.graceful_off = Graceful
        self.log.info("%s turns the master off (%s)", call.user, "graceful" if Graceful else "fast")
        self.request_stop(0.2)
        return {"Daemons": list(self.daemons)}

    @method("master")
    async def Stop(self, call: Call, Daemon: str = "", Graceful: bool = True) -> dict:
        assert self._lock is not None
        async with self._lock:
            if not Daemon:
                stopped = await self._stop_all(Graceful)
            else:
                daemon = self._named(Daemon)
                await daemon.stop(Graceful)
                stopped = [daemon.name]
        self.log.info("%s stopped %s", call.user, ", ".join(stopped) or "nothing")
        return {"Stopped": stopped}

    @method("master")
    async def Restart(self, call: Call, Daemon: str = "", Master: bool = False) -> dict:
        assert self._lock is not None
        if Master:
            # condor_restart -master: stop as on SIGTERM, then the process executes itself again
            # (same pid, so the pid file and `gridbus pool down` still find it).
            if Daemon:
                raise invalid("Restart: name a daemon or set Master, not both")
            if self._stop_requested is None:
                raise invalid("this master was not started as a daemon process; it cannot restart itself")
            self.restart_self = True
            self.log.info("%s restarts the master", call.user)
            self.request_stop(0.2)
            return {"Restarted": ["MASTER", *self.daemons], "Pids": {"MASTER": os.getpid()}}
        async with self._lock:
            targets = [self._named(Daemon)] if Daemon else list(self.daemons.values())
            for daemon in reversed(targets):
                await daemon.stop()
            pids = {}
            for daemon in targets:
                daemon.restarts = 0  # an asked-for restart is not a crash
                pids[daemon.name] = await self._start_one(daemon)
        self.log.info("%s restarted %s", call.user, ", ".join(pids))
        return {"Restarted": list(pids), "Pids": pids}

    @method("master")
    async def Reconfig(self, call: Call) -> dict:
        changed = await self.reconfig()
        return {"Changed": changed, "Signalled": self.last_signalled}
