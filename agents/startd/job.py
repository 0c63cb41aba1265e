"""What the starter's parts share about a job: the `Job` record (spawn to reaped exit), a start
made ready (`Prepared`) or under way beside the startd (`Beside`), the starter's knobs, HTCondor's
hold codes for what a start can run into, and the small readers of a job ad they all use.

The parts themselves: agents/startd/launch.py (the spawn), scratch.py (scratch directories),
jobcgroups.py (the job's cgroup), reaping.py (stop and exit), usage.py (the monitor); starter.py
composes them.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gridbus.agents.startd import cgroups, spawn
from gridbus.agents.startd.accounts import Account, RunAsPolicy
from gridbus.agents.startd.arguments import lookup

# HTCondor's HoldReasonCode values for what the starter can run into.
HOLD_FAILED_TO_CREATE_PROCESS = 6
HOLD_UNABLE_TO_OPEN_OUTPUT = 7
HOLD_UNABLE_TO_OPEN_INPUT = 8
HOLD_IWD = 14
HOLD_JOB_OUT_OF_RESOURCES = 34

# Names scratch directories and job groups (``..._<pid>_<seq>``): one count for every Starter of
# the process, so two on one hierarchy never share a group.
_SEQ = itertools.count(1)

Ids = tuple[int, int]  # (uid, gid) of a job's account


def next_seq() -> int:
    return next(_SEQ)


class StartFailed(Exception):
    """The job could not be started; the schedd holds it with this reason and code."""

    def __init__(self, reason: str, code: int, subcode: int = 0):
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.subcode = subcode


@dataclass
class StarterKnobs:
    """The starter's settings a reconfig may change; every part reads them here, at use."""

    policy: RunAsPolicy
    killing_timeout: float = 30.0  # KILLING_TIMEOUT
    enforce_memory: bool = True
    usage_interval: float = 300.0  # UPDATE_INTERVAL
    check_interval: float = 1.0  # STARTER_MEMORY_CHECK_INTERVAL
    memory_policy: str = "hard"  # CGROUP_MEMORY_LIMIT_POLICY: hard, soft, none
    pids_limit: int = 0


@dataclass
class Job:
    """One job process, from spawn to reaped exit."""

    key: str  # the claim id it runs on
    ad: Mapping[str, Any]
    slot: str
    pid: int
    proc: subprocess.Popen | spawn.Child
    pidfd: int
    scratch: str
    account: Account
    memory_limit_kib: int | None
    cgroup: cgroups.JobCgroup | None = None  # None: the process-scan fallback
    kill_signal: int = signal.SIGTERM
    started: float = field(default_factory=time.time)
    peak_rss_kib: int = 0
    peak_vsize_kib: int = 0
    memory_peak_kib: int = 0  # the cgroup's own peak (0 without a memory controller)
    user_cpu: float = 0.0
    sys_cpu: float = 0.0
    cpus_usage: float = 0.0
    cpu_mark: tuple[float, float] = (0.0, 0.0)  # (monotonic time, cpu seconds) of the last sample
    suspended: bool = False
    memory_exceeded: bool = False
    stop_reason: str | None = None  # deactivate, release, vacate, lease, shutdown, memory
    exit: dict[str, Any] | None = None
    ended: float = 0.0
    kill_timer: asyncio.TimerHandle | None = None
    last_usage_report: float = field(default_factory=time.monotonic)
    done: asyncio.Future | None = None
    sandbox: bool = False  # the scratch directory is the file-transfer sandbox's (not the starter's to remove)
    # The process-scan fallback's: the mark in the environment of every process of the job, and
    # the clock ticks before it started (`proctree.scan`).
    mark: str | None = None
    born_after: int = 0
    # ... and every process its stop SIGKILLed (pid -> start ticks): one that left the session is
    # waited for by pid, since its mark goes with its memory before it is gone (`Reaper.stop_and_wait`).
    killed: dict[int, int] = field(default_factory=dict)
    successor: Beside | None = None  # the claim's next job, spawned and waiting for this one's exit
    container: str | None = None  # a container job's container name (agents/startd/containers.py)
    image_kib: int = 0  # its image's size: the job's DiskUsage

    def usage(self) -> dict[str, Any]:
        """HTCondor's usage attributes: cpu seconds, sizes in KiB, MemoryUsage (the peak) in MiB,
        CpusUsage (cpus busy on average over the last sample period, or the whole run at exit)."""
        peak = self.memory_peak_kib or self.peak_rss_kib
        return {
            "RemoteUserCpu": round(self.user_cpu, 3),
            "RemoteSysCpu": round(self.sys_cpu, 3),
            "ImageSize": max(self.peak_vsize_kib, self.memory_peak_kib),
            "ResidentSetSize": self.peak_rss_kib,
            "MemoryUsage": math.ceil(peak / 1024),
            "CpusUsage": round(self.cpus_usage, 3),
            **({"DiskUsage": self.image_kib} if self.image_kib else {}),
        }

    def sample_cpu(self, now: float) -> None:
        """CpusUsage over the time since the previous sample."""
        t0, cpu0 = self.cpu_mark
        cpu = self.user_cpu + self.sys_cpu
        if t0 and now - t0 > 0.05:
            self.cpus_usage = max(0.0, (cpu - cpu0) / (now - t0))
        if not t0 or now - t0 > 0.05:
            self.cpu_mark = (now, cpu)


@dataclass
class Prepared:
    """A job made ready to spawn (`launch.Launcher.prepare`)."""

    account: Account
    scratch: str
    iwd: str = ""
    executable: str = ""
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    streams: tuple[int, int, int] = (subprocess.DEVNULL, subprocess.DEVNULL, subprocess.DEVNULL)
    fds: list[int] = field(default_factory=list)  # what of ``streams`` the starter opened (and closes)
    group: cgroups.JobCgroup | None = None
    mark: str | None = None  # without a group: the job's processes' mark (`proctree.MARK_VAR`)
    born_after: int = 0
    container: str | None = None  # a container job: its container's name
    runs_as: Account | None = None  # the first process's account, if not the job's (a container tool's)

    @property
    def spawn_account(self) -> Account:
        return self.runs_as or self.account

    @property
    def spawn_group(self) -> cgroups.JobCgroup | None:
        """The group the first process is born in: the job's, but for a container job, whose
        tool's run stays in the startd's groups (the container's go below the job's)."""
        return None if self.container is not None else self.group


@dataclass
class Beside:
    """A start by the fast spawn between `Starter.begin_beside` and `Starter.finish_beside`."""

    prep: Prepared
    launching: spawn.Launching
    known: asyncio.Future  # done when the child's pipe says its outcome is known
    cancelled: bool = False  # a successor stopped before its exec (`Starter.cancel`)
    # A successor's start made anew, as at its predecessor's exit (`finish_beside`); None for others.
    again: Callable[[], Beside] | None = None
    on_known: Callable[[], None] | None = None  # called where the outcome becomes known (`Starter.when_known`)


def settle(beside: Beside) -> None:
    """The spawn's pipe is readable: its outcome is known."""
    if not beside.known.done():
        beside.known.set_result(None)
    call, beside.on_known = beside.on_known, None
    if call is not None:
        call()


def call_when_known(beside: Beside, call: Callable[[], None]) -> None:
    """``call()`` once the outcome of ``beside`` is known, where it becomes known (`settle`), or
    on the next turn of the loop if it is known already. Only one call is kept."""
    if beside.known.done():
        asyncio.get_running_loop().call_soon(call)
    else:
        beside.on_known = call


def ad_str(ad: Mapping[str, Any], name: str) -> str | None:
    value = lookup(ad, name)
    return value if isinstance(value, str) else None


def resolve(path: str, iwd: str) -> str:
    return path if os.path.isabs(path) else os.path.join(iwd, path)


def kill_signal(ad: Mapping[str, Any]) -> int:
    """The job's KillSig (a name like SIGTERM or TERM, or a number); SIGTERM by default."""
    value = lookup(ad, "KillSig")
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < signal.NSIG:
        return value
    if isinstance(value, str):
        name = value.strip().upper()
        if name.isdigit() and 0 < int(name) < signal.NSIG:
            return int(name)
        try:
            return signal.Signals[name if name.startswith("SIG") else "SIG" + name].value
        except KeyError:
            pass
    return signal.SIGTERM
