"""Jobs that try to outlive their stop, run by the starter and stopped; what survived is reported.

Shared by the starter's tests and bench/bench_kill_loop.py (which runs one 200 times in a row).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from gridbus.agents.startd import proctree
from gridbus.agents.startd.accounts import RunAsPolicy, UserMap
from gridbus.agents.startd.cgroups import Hierarchy
from gridbus.agents.startd.starter import Job, Starter

# The tests run as root and their jobs have no Owner (or one with no account): mapped to root.
ALLOW_ROOT = RunAsPolicy(allow_runas_owner=False, allow_root_jobs=True, user_map=UserMap.parse("*=root"))

# Each ignores SIGTERM (a graceful stop must come to SIGKILL) and hides processes from a stop.
DAEMON = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
time.sleep(300)
"""

FORK_BOMB = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"""

SCENARIOS = {
    # The shell ignores SIGTERM (inherited by its children); one grandchild changes process group.
    "setpgid": ("/bin/sh", "-c 'trap \"\" TERM; sleep 300 & "
                + f"{sys.executable} -c \"import os,time; os.setpgid(0,0); time.sleep(300)\" & sleep 300; wait'"),
    # A double fork and setsid: the daemon is in a session and process group of its own.
    "daemon": (sys.executable, "-c '" + DAEMON.replace("'", "''") + "'"),
    # A fork bomb: every process forks for ever; a failed fork is tried again.
    "forkbomb": (sys.executable, "-c '" + FORK_BOMB.replace("'", "''") + "'"),
}


def _members(job: Job) -> list[proctree.ProcStat]:
    if job.cgroup is not None:
        return [st for pid in job.cgroup.pids() if (st := proctree.read_stat(pid)) is not None and st.state != "Z"]
    marks = {job.mark: job.pid} if job.mark else None  # (a process that left the session carries it)
    return proctree.scan({job.pid}, marks, job.born_after).get(job.pid, [])


def _ready(kind: str, job: Job, procs: list[proctree.ProcStat]) -> bool:
    if kind == "setpgid":
        return len(procs) >= 4 and any(p.pgrp != job.pid for p in procs)
    if kind == "daemon":  # the daemon itself, not the child that forks it (and exits) on the way
        return len(procs) >= 2 and any(p.session != job.pid and p.ppid != job.pid for p in procs)
    return len(procs) >= 10


def stop_scenario(tmp_path: Any, cgroup: Hierarchy | None, kind: str, killing_timeout: float,
                  pids_limit: int = 0) -> dict[str, Any]:
    """Run scenario ``kind``, stop it gracefully once it is set up, and report what happened."""
    cmd, args = SCENARIOS[kind]
    seen: dict[str, Any] = {}

    async def main() -> None:
        exits: list[Job] = []
        starter = Starter(str(tmp_path / "execute"), ALLOW_ROOT, killing_timeout=killing_timeout,
                          on_exit=exits.append, check_interval=0.1, cgroup=cgroup, pids_limit=pids_limit)
        monitor = asyncio.create_task(starter.monitor())
        try:
            job = starter.start("claim", {"Cmd": cmd, "Arguments": args}, "slot1@test", {}, None)
            known: dict[int, int] = {}  # pid -> start ticks of every member seen
            escaped = False
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                procs = _members(job)
                known.update((p.pid, p.start_ticks) for p in procs)
                escaped = escaped or any(p.session != job.pid for p in procs)
                if _ready(kind, job, procs):
                    break
                await asyncio.sleep(0.02)
            seen["before"] = len(_members(job))
            seen["escaped_session"] = escaped
            t0 = time.monotonic()
            await asyncio.wait_for(starter.stop_and_wait(job, graceful=True, reason="deactivate"), killing_timeout + 20)
            seen["elapsed"] = time.monotonic() - t0
            survivors = []
            for pid, ticks in known.items():
                st = proctree.read_stat(pid)
                if st is not None and st.start_ticks == ticks and st.state not in ("Z", "X"):
                    survivors.append(st)
            seen["survivors"] = survivors
            seen["exit"] = job.exit
            seen["stop_reason"] = job.stop_reason
            seen["group_empty"] = job.cgroup is None or not job.cgroup.populated()
        finally:
            monitor.cancel()
            await starter.shutdown()

    asyncio.run(main())
    return seen


__all__ = ["SCENARIOS", "stop_scenario"]
