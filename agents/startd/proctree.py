"""A job's processes, read from /proc: usage of the whole tree, and killing every descendant (the
starter's fallback where no cgroup can be made; see `cgroups`).

Each job runs as the leader of its own session (and process group), so its descendants are the
processes whose session id is the job's pid; a descendant that moved to another process group
stays in the session and is still found. A descendant that calls setsid() leaves the session: it
is found by the mark every process of the job is born with in its environment (`MARK_VAR`), as
HTCondor's process tracking finds a job's processes by the ancestor variables its ProcD puts in
their environments. Only a process that execs with that variable taken out of its environment
escapes. One scan of /proc serves every running job.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024

# The environment variable that marks a job's processes (its value, `new_mark`, is the job's own):
# they inherit it, and /proc/<pid>/environ shows the environment a process was born with, whatever
# it changed in its own memory since.
MARK_VAR = "_GRIDBUS_JOB_MARK"
_MARK_ENTRY = MARK_VAR.encode() + b"="


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
    marked: bool = False  # found by the job's mark (`scan`), not by its session


def new_mark() -> str:
    """A job's mark: random, so that no process of another job carries it."""
    return secrets.token_hex(12)


def environ_mark(pid: int) -> str | None:
    """The value of `MARK_VAR` in the environment process ``pid`` was born with, or None (none,
    gone, or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if data.startswith(_MARK_ENTRY):
        start = len(_MARK_ENTRY)
    else:
        at = data.find(b"\0" + _MARK_ENTRY)
        if at < 0:
            return None
        start = at + 1 + len(_MARK_ENTRY)
    end = data.find(b"\0", start)
    return data[start:end if end >= 0 else len(data)].decode(errors="replace")


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


def scan(sessions: set[int] | None = None, marks: Mapping[str, int] | None = None,
         born_after: int = 0) -> dict[int, list[ProcStat]]:
    """Every live process by session id (only the given sessions, if any). ``marks`` maps a job's
    mark to its session: a process outside those sessions that carries one (and was born at or
    after ``born_after`` clock ticks, before which no job of them had started) is listed under
    that session, with ``marked`` set.

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
        if st is None or st.state in ("Z", "X"):
            continue
        if sessions is None or st.session in sessions:
            out.setdefault(st.session, []).append(st)
        elif marks and st.start_ticks >= born_after:
            sid = marks.get(environ_mark(st.pid) or "")
            if sid is not None:
                out.setdefault(sid, []).append(replace(st, marked=True))
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


def kill_quietly(pid: int, sig: int) -> bool:
    """Signal one process; False if it is gone or not ours to signal (a set-user-ID program)."""
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_session(session: int, born_before: int | None = None, mark: str | None = None, born_after: int = 0,
                 killed: dict[int, int] | None = None) -> int:
    """SIGKILL every process of a session, and every process carrying ``mark`` (see `scan`),
    except session members born after ``born_before`` ticks.

    The age check keeps a session id reused by an unrelated process (its pid came free when the
    job's leader was reaped) safe from a late sweep; a marked process is the job's whenever it was
    born. Returns how many were signalled; each is added to ``killed`` (pid -> start ticks).
    """
    count = 0
    for st in scan({session}, {mark: session} if mark else None, born_after).get(session, []):
        if born_before is not None and st.start_ticks > born_before and not st.marked:
            continue
        if kill_quietly(st.pid, signal.SIGKILL):
            count += 1
            if killed is not None:
                killed[st.pid] = st.start_ticks
    return count


def still_alive(procs: Mapping[int, int]) -> list[int]:
    """Which of ``procs`` (pid -> start ticks) still run or are dying: neither gone, nor a zombie,
    nor a later process under a reused pid."""
    alive = []
    for pid, ticks in procs.items():
        st = read_stat(pid)
        if st is not None and st.start_ticks == ticks and st.state not in ("Z", "X"):
            alive.append(pid)
    return alive
