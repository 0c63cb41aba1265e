"""One daemon the master runs: its process, its restarts with backoff, its orderly stop.

A daemon in DAEMON_LIST named ``SCHEDD`` runs as ``python -m <module>`` where the module is the
knob ``SCHEDD`` (as HTCondor's ``SCHEDD = $(SBIN)/condor_schedd`` names the binary), by default
``gridbus.agents.schedd``, with the extra arguments of ``SCHEDD_ARGS``. When it dies unasked, it
is started again after ``MASTER_BACKOFF_CONSTANT + MASTER_BACKOFF_FACTOR ** restarts`` seconds
(at most ``MASTER_BACKOFF_CEILING``); a run longer than ``MASTER_RECOVER_FACTOR`` seconds resets
the count, as in condor_master.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gridbus.agents.master import pidfile
from gridbus.config import knob
from gridbus.errors import EXIT_REASON_ENV
from gridbus.status import cap_text
from gridbus.topology import DAEMON_NO_RESTART

log = logging.getLogger("gridbus.master")

# HTCondor's log file names, so an administrator finds SchedLog where they expect it.
LOG_NAMES = {
    "MASTER": "MasterLog",
    "COLLECTOR": "CollectorLog",
    "NEGOTIATOR": "NegotiatorLog",
    "SCHEDD": "SchedLog",
    "STARTD": "StartLog",
}

for _daemon, _file in LOG_NAMES.items():
    # Where each daemon's log is, for tools that read it (htcondor2's param["SCHEDD_LOG"]): the
    # master runs its daemons with --log-dir $(LOG), so the directory is LOG's and the name fixed.
    knob(f"{_daemon}_LOG", f"$(LOG)/{_file}", f"the {_daemon.lower()}'s log file (LOG moves it; the name is fixed)")

_PR_SET_PDEATHSIG = 1


def log_name(daemon: str) -> str:
    daemon = daemon.upper()
    return LOG_NAMES.get(daemon, daemon.capitalize() + "Log")


def _prepare_child() -> None:
    # SIGHUP (reconfig) is ignored until the daemon installs its own handler, so a reconfig sent
    # while a daemon is still importing does not kill it: an ignored signal stays ignored across
    # exec, and the runner's handler replaces the disposition once the daemon can act on it.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # Linux: the child gets SIGTERM if the master dies, even by SIGKILL, so a dead master never
    # leaves orphaned daemons behind. Elsewhere `pool down` finds them by their pid files.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class Backoff:
    constant: float = 9.0
    factor: float = 2.0
    ceiling: float = 3600.0
    recover: float = 300.0

    def delay(self, restarts: int) -> float:
        return min(self.ceiling, self.constant + self.factor**restarts)


class DaemonProcess:
    """A child daemon: started, watched, restarted with backoff, stopped on request."""

    def __init__(
        self,
        name: str,
        module: str,
        args: list[str],
        *,
        env: dict[str, str],
        run_dir: Path,
        output: Path | None,
        backoff: Backoff,
        stop_timeout: float,
        on_change: Callable[[], None] = lambda: None,
    ):
        self.name = name.upper()
        self.module = module
        self.args = args
        self.env = env
        self.run_dir = run_dir
        self.output = output  # where the child's stdout/stderr go; None: the master's own
        self.backoff = backoff
        self.stop_timeout = stop_timeout
        self.on_change = on_change
        self.process: asyncio.subprocess.Process | None = None
        self.state = "Stopped"  # Stopped, Alive, Backoff, Stopping
        self.wanted = False  # the master means it to run (Start) rather than stay down (Stop)
        self.restarts = 0  # consecutive unasked deaths, reset after a long enough run
        self.total_restarts = 0
        self.start_time = 0.0
        self.last_exit: int | None = None
        self.exit_reason = ""  # the sentence it stopped with when it exited with DAEMON_NO_RESTART
        self._watcher: asyncio.Task | None = None
        self._restart_timer: asyncio.Task | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.process.returncode is None else None

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name.lower()}.pid"

    @property
    def reason_file(self) -> Path:
        """Where the daemon writes the sentence it stops with (gridbus.errors.EXIT_REASON_ENV)."""
        return self.run_dir / f"{self.name.lower()}.exit-reason"

    def command(self) -> list[str]:
        return [sys.executable, "-m", self.module, *self.args]

    def record(self) -> dict[str, Any]:
        """The daemon as the Master ad lists it."""
        return {
            "Name": self.name,
            "State": self.state,
            "Pid": self.pid or 0,
            "Module": self.module,
            "StartTime": int(self.start_time),
            "Restarts": self.total_restarts,
            "LastExitCode": self.last_exit if self.last_exit is not None else 0,
            "LastExitReason": self.exit_reason,
        }

    # ------------------------------------------------------------------ start and watch
    async def start(self) -> int:
        """Start the process now (cancelling a pending backoff); returns its pid."""
        self.wanted = True
        self._cancel_restart()
        if self.pid:
            return self.pid
        out: IO[bytes] | None = None
        if self.output is not None:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.output, "ab")  # noqa: SIM115 - handed to the child, closed below
        self.reason_file.unlink(missing_ok=True)  # a sentence of an earlier run is not this one's
        self.exit_reason = ""
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.command(),
                env={**self.env, EXIT_REASON_ENV: str(self.reason_file)},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                # Its own session: a Ctrl-C at the terminal reaches only the master, which then
                # stops the daemons in order.
                start_new_session=True,
                preexec_fn=_prepare_child,
            )
        finally:
            if out is not None:
                out.close()
        self.start_time = time.time()
        self.state = "Alive"
        pidfile.write(self.pid_file, self.process.pid)
        log.info("started %s (%s) as pid %d", self.name, " ".join(map(shlex.quote, self.command()[1:])), self.process.pid)
        self._watcher = asyncio.get_running_loop().create_task(self._watch(self.process), name=f"watch {self.name}")
        self.on_change()
        return self.process.pid

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        pidfile.remove(self.pid_file, process.pid)
        if process is not self.process:
            return
        self.last_exit = code
        ran = time.time() - self.start_time
        if not self.wanted or self.state == "Stopping":
            self.state = "Stopped"
            self.on_change()
            return
        if code == DAEMON_NO_RESTART:
            # HTCondor's DAEMON_NO_RESTART: the daemon would stop the same way again (a queue it
            # may not use); starting it in a loop helps no one. Its sentence goes in the ad.
            self.state = "Stopped"
            self.exit_reason = self._read_reason()
            log.error("%s (pid %d) exited with status %d (DAEMON_NO_RESTART): not restarting it: %s",
                      self.name, process.pid, code, self.exit_reason or "its log says why")
            self.on_change()
            return
        if ran >= self.backoff.recover:
            self.restarts = 0
        delay = self.backoff.delay(self.restarts)
        self.restarts += 1
        self.total_restarts += 1
        self.state = "Backoff"
        log.warning("%s (pid %d) exited with %s after %.1f s; restarting in %.1f s",
                    self.name, process.pid, _describe_exit(code), ran, delay)
        self.on_change()
        self._restart_timer = asyncio.get_running_loop().create_task(self._restart_after(delay), name=f"restart {self.name}")

    def _read_reason(self) -> str:
        try:
            return cap_text(self.reason_file.read_text(errors="replace").strip())
        except OSError:  # a daemon that exited with the status without the runner's sentence
            return ""

    async def _restart_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._restart_timer = None
        if self.wanted:
            try:
                await self.start()
            except OSError as exc:
                # Could not even spawn it (a bad module path is caught at run time by python -m,
                # so this is the system refusing a process); try again on the next backoff step.
                log.error("could not start %s: %s", self.name, exc)
                self.restarts += 1
                self._restart_timer = asyncio.get_running_loop().create_task(
                    self._restart_after(self.backoff.delay(self.restarts)), name=f"restart {self.name}"
                )

    def _cancel_restart(self) -> None:
        if self._restart_timer is not None:
            self._restart_timer.cancel()
            self._restart_timer = None

    # ------------------------------------------------------------------ stop and signal
    async def stop(self, graceful: bool = True) -> None:
        """Stop the process and keep it down: SIGTERM (or SIGKILL), then SIGKILL after the timeout."""
        self.wanted = False
        self._cancel_restart()
        process = self.process
        if process is None or process.returncode is not None:
            self.state = "Stopped"
            return
        self.state = "Stopping"
        self.on_change()
        self._signal(process, signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            await asyncio.wait_for(process.wait(), self.stop_timeout)
        except TimeoutError:
            log.warning("%s (pid %d) did not stop within %.0f s; killing it", self.name, process.pid, self.stop_timeout)
            self._signal(process, signal.SIGKILL)
            await process.wait()
        if self._watcher is not None:
            await asyncio.gather(self._watcher, return_exceptions=True)
        self.state = "Stopped"
        log.info("stopped %s (pid %d, %s)", self.name, process.pid, _describe_exit(process.returncode))

    def hup(self) -> bool:
        """Ask the daemon to re-read its configuration (SIGHUP); False if it is not running."""
        if self.process is None or self.process.returncode is not None:
            return False
        self._signal(self.process, signal.SIGHUP)
        return True

    def _signal(self, process: asyncio.subprocess.Process, sig: int) -> None:
        if sig == signal.SIGKILL:
            # A kill takes the daemon's whole session with it (helpers it started and did not
            # put in sessions of their own); a SIGTERM lets the daemon end its children itself.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"
