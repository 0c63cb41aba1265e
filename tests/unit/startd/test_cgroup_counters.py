"""A job group's counters read through the descriptors the group keeps open: each read shows the
counters as they are now, for the group's first job and for the next job in the reused group."""

from __future__ import annotations

import subprocess
import sys
import uuid

BURN = "import sys, time\nsys.stdin.readline()\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def _cpu(u) -> float:
    return u.user_cpu + u.sys_cpu  # (the burn's clock reads are system calls here)


def _burn_in(group) -> None:
    """A process that spends 0.3 s of cpu once it is in ``group``."""
    from gridbus.agents.startd import cgroups

    proc = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE)
    try:
        cgroups.move(proc.pid, group.procs_files)
        proc.communicate(b"go\n", timeout=30)
    finally:
        proc.kill()
        proc.wait()


def test_kept_counter_files_show_each_jobs_own_cpu(hierarchy_for):
    h = hierarchy_for("cgroup")
    group = h.job(f"job_{uuid.uuid4().hex[:8]}")
    group.create()
    try:
        assert _cpu(group.usage()) < 0.05  # (opens the kept descriptors, before any job)
        _burn_in(group)
        first = group.final_usage()
        assert _cpu(first) >= 0.25, first
        assert group.reset()  # the group is reused: the next job's counters start from here
        assert _cpu(group.usage()) < 0.05
        _burn_in(group)
        second = group.final_usage()
        # Its own 0.3 s: a read that showed the counters as they were at the first read through
        # the descriptor would give none, and one by path without the baseline both jobs'.
        assert 0.25 <= _cpu(second) < _cpu(first) + 0.25, (first, second)
    finally:
        group.remove()
