"""The job's own cgroup, from the start to the exit: made with the slot's limits (or an emptied one
reused), its counters read into the job's usage, emptied and retired after the exit.

With a cgroup hierarchy (agents/startd/cgroups.py; the default when the startd runs as root) each
job runs in a group of its own from its first instruction (how it joins: agents/startd/launch.py).
A stop kills the group, the kernel enforces the memory limit (an OOM kill there is the job's
``MemoryExceeded``), and usage is read from the group's counters. Without one (``hierarchy`` None)
the job's processes are found by the process scan (agents/startd/usage.py) and nothing here runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from gridbus.agents.startd import cgroups, proctree
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.job import HOLD_FAILED_TO_CREATE_PROCESS, Job, StarterKnobs, StartFailed
from gridbus.classad.values import is_number

log = logging.getLogger("gridbus.startd.starter")

MAX_IDLE_GROUPS = 64  # emptied job cgroups kept for reuse

GroupSample = tuple[cgroups.CgroupUsage, proctree.TreeUsage]


class JobCgroups:
    """The job groups of one starter under ``hierarchy`` (None: the process-scan fallback)."""

    def __init__(self, hierarchy: cgroups.Hierarchy | None, knobs: StarterKnobs):
        self.hierarchy = hierarchy
        self.knobs = knobs
        self._idle: list[cgroups.JobCgroup] = []  # emptied job groups, reset for the next job

    def make(self, ad: Mapping[str, Any], name: str, memory_limit_mib: int | None) -> cgroups.JobCgroup:
        """The job's group, made (or reused) with its limits; raises StartFailed."""
        assert self.hierarchy is not None
        knobs = self.knobs
        cpus = lookup(ad, "RequestCpus")
        try:
            group = self._idle.pop()
        except IndexError:
            group = self.hierarchy.job(name)
        for attempt in (1, 2):
            try:
                group.create()
                group.set_limits(
                    memory_mib=memory_limit_mib if knobs.enforce_memory else None,
                    policy=knobs.memory_policy,
                    cpus=float(cpus) if is_number(cpus) else 1.0,
                    pids_max=knobs.pids_limit,
                )
                return group
            except OSError as exc:
                group.remove()
                if attempt == 1 and group.rel != f"{self.hierarchy.base}/{name}":
                    # A reused group may refuse a limit below what it still holds (page cache of
                    # the previous job): a fresh group instead.
                    group = self.hierarchy.job(name)
                    continue
                raise StartFailed(f"cannot make the job's cgroup {group.rel}: {exc.strerror or exc}",
                                  HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0) from None
        raise AssertionError("unreachable")

    def take_usage(self, job: Job, u: cgroups.CgroupUsage) -> None:
        """The group's counters into the job's usage; an OOM kill under the job's own hard limit
        marks it over its memory."""
        job.user_cpu = max(job.user_cpu, u.user_cpu)
        job.sys_cpu = max(job.sys_cpu, u.sys_cpu)
        job.memory_peak_kib = max(job.memory_peak_kib, u.memory_peak_bytes // 1024)
        job.peak_rss_kib = max(job.peak_rss_kib, u.memory_bytes // 1024)
        if u.oom_kills and self._kernel_limits_memory(job):
            job.memory_exceeded = True

    def _kernel_limits_memory(self, job: Job) -> bool:
        return (job.cgroup is not None and job.memory_limit_kib is not None and self.knobs.memory_policy == "hard"
                and "memory" in job.cgroup.h.controllers)

    def retire(self, job: Job, deadline: float) -> None:
        """Remove the job's emptied group (members SIGKILLed a moment ago may still be dying),
        then mark the job done."""
        group = job.cgroup
        assert group is not None
        # (found empty at the exit, it stays so; not a container's, whose tool's monitor outlives it)
        if (group.final_raw is None or group.nested) and group.populated():
            if time.monotonic() < deadline:
                group.kill()
                asyncio.get_running_loop().call_later(0.005, self.retire, job, deadline)
                return
            log.error("cgroup %s of the job on %s is still not empty; leaving it", group.rel, job.slot)
        elif not group.nested and len(self._idle) < MAX_IDLE_GROUPS and group.reset():  # (a container's: made anew)
            self._idle.append(group)  # the next job moves in: cheaper than a new group
        else:
            group.remove()
        if job.done is not None and not job.done.done():
            job.done.set_result(None)

    def shutdown(self) -> None:
        for group in self._idle:
            group.remove()
        self._idle.clear()


def group_usages(grouped: list[tuple[Job, cgroups.JobCgroup]]) -> dict[str, GroupSample]:
    """Each job group's counters; where the group has no memory controller, its members' summed
    /proc usage too (their memory is then sampled, as on the scan path). Blocking: off the loop."""
    out = {}
    for job, group in grouped:
        u = group.usage()
        procs = proctree.TreeUsage()
        if "memory" not in group.h.controllers:
            procs = proctree.usage_of([st for pid in group.pids() if (st := proctree.read_stat(pid)) is not None])
        out[job.key] = (u, procs)
    return out


def remove_when_empty(group: cgroups.JobCgroup, timeout: float) -> None:
    """Kill what is left in ``group`` until it can be removed (or ``timeout`` seconds pass)."""
    deadline = time.monotonic() + timeout
    while not group.remove() and time.monotonic() < deadline:
        group.kill()
        time.sleep(0.005)
