"""A job's processes, read from /proc: usage of the whole tree, and killing every descendant (the
starter's fallback where no cgroup can be made; see `cgroups`).

Each job runs as the leader of its own session (and process group), so its descendants are the
processes whose session id is the job's pid; a descendant that moved to another process group
stays in the session and is still found. (A descendant that calls setsid() itself escapes, as
it does HTCondor without cgroups.) One scan of /proc serves every running job.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str  # R, S, D, Z (zombie: dead, waiting to be reaped), ...
    ppid: int
    pgrp: int
    session: int
    utime: float  # seconds
    stime: float
    vsize_kib: int
    rss_kib: int
    start_ticks: int  # clock ticks after boot


def read_stat(pid: int) -> ProcStat | None:
    """One process's /proc/<pid>/stat, or None if it is gone (or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # comm is in parentheses and may hold spaces or parentheses: split after the last ')'.
    end = data.rfind(b")")
    fields = data[end + 2 :].split()
    try:
        return ProcStat(
            pid=pid,
            state=fields[0].decode(),
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            session=int(fields[3]),
            utime=int(fields[11]) / CLK_TCK,
            stime=int(fields[12]) / CLK_TCK,
            vsize_kib=int(fields[20]) // 1024,
            rss_kib=int(fields[21]) * PAGE_KIB,
            start_ticks=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def scan(sessions: set[int] | None = None) -> dict[int, list[ProcStat]]:
    """Every live process by session id (only the given sessions, if any).

    Zombies are left out: they are dead already, and an orphan's zombie waits for init to reap it.
    """
    out: dict[int, list[ProcStat]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        st = read_stat(int(name))
        if st is None or st.state in ("Z", "X") or (sessions is not None and st.session not in sessions):
            continue
        out.setdefault(st.session, []).append(st)
    return out


@dataclass
class TreeUsage:
    """The summed usage of one job's processes at one moment."""

    processes: int = 0
    rss_kib: int = 0
    vsize_kib: int = 0
    user_cpu: float = 0.0
    sys_cpu: float = 0.0


def usage_of(procs: list[ProcStat]) -> TreeUsage:
    u = TreeUsage()
    for p in procs:
        u.processes += 1
        u.rss_kib += p.rss_kib
        u.vsize_kib += p.vsize_kib
        u.user_cpu += p.utime
        u.sys_cpu += p.stime
    return u


def uptime_ticks() -> int:
    """Clock ticks since boot, the unit of a process's start time in /proc (no file read)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * CLK_TCK)


def signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False if it has no members left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; the kernel said no (should not happen as root or as the owner)


def kill_session(session: int, born_before: int | None = None) -> int:
    """SIGKILL every process of a session, except processes born after ``born_before`` ticks.

    The age check keeps a session id reused by an unrelated process (its pid came free when the
    job's leader was reaped) safe from a late sweep. Returns how many were signalled.
    """
    killed = 0
    for st in scan({session}).get(session, []):
        if born_before is not None and st.start_ticks > born_before:
            continue
        try:
            os.kill(st.pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    return killed
