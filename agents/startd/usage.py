"""The running jobs' usage, sampled every STARTER_MEMORY_CHECK_INTERVAL: cpu and memory from each
job's cgroup counters (or, on the process-scan fallback, from one scan of /proc for all running
jobs), the memory limit where the kernel does not enforce it, a report of each job's usage every
UPDATE_INTERVAL, and the processes that outlived their finished job killed.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable

from gridbus.agents.startd import proctree
from gridbus.agents.startd.job import Job, StarterKnobs
from gridbus.agents.startd.jobcgroups import GroupSample, JobCgroups, group_usages
from gridbus.agents.startd.reaping import Reaper
from gridbus.agents.startd.scratch import ScratchDirs

log = logging.getLogger("gridbus.startd.starter")


class UsageMonitor:
    """Samples the jobs of one starter (``reaper.running``) and acts on what it finds."""

    def __init__(self, knobs: StarterKnobs, reaper: Reaper, groups: JobCgroups, scratch: ScratchDirs,
                 on_usage: Callable[[list[Job]], None] | None):
        self.knobs = knobs
        self.reaper = reaper
        self.groups = groups
        self.scratch = scratch
        self.on_usage = on_usage

    async def run(self) -> None:
        """Sample every running job's tree: usage, the memory limit, stray processes."""
        loop = asyncio.get_running_loop()
        running, finished = self.reaper.running, self.reaper.finished_sessions
        while True:
            await asyncio.sleep(self.knobs.check_interval)
            now = time.monotonic()
            for sid, (_, forget, _, _) in list(finished.items()):
                if forget < now:
                    del finished[sid]
            self.scratch.drop_idle(now)
            if not running and not finished:
                continue
            grouped = [(j, j.cgroup) for j in running.values() if j.cgroup is not None]
            groups = await loop.run_in_executor(None, group_usages, grouped) if grouped else {}
            sessions = {j.pid for j in running.values() if j.cgroup is None} | set(finished)
            tracked = [(j.pid, j.mark, j.born_after) for j in running.values() if j.mark]
            tracked += [(sid, mark, born) for sid, (_, _, mark, born) in finished.items() if mark]
            marks = {mark: sid for sid, mark, _ in tracked}
            born_after = min((born for _, _, born in tracked), default=0)
            tree = await loop.run_in_executor(None, proctree.scan, sessions, marks, born_after) if sessions else {}
            self.apply(tree, groups)

    def apply(self, tree: dict[int, list[proctree.ProcStat]], groups: dict[str, GroupSample] | None = None) -> None:
        """One sample's findings: the jobs' usage, over-limit jobs stopped, due reports made."""
        now = time.monotonic()
        due: list[Job] = []
        for job in list(self.reaper.running.values()):
            if job.exit is not None:
                continue
            if job.cgroup is not None:
                sample = (groups or {}).get(job.key)
                if sample is None:
                    continue
                cg, u = sample
                self.groups.take_usage(job, cg)
                if job.memory_exceeded and job.stop_reason is None:
                    log.info("job on %s was OOM-killed in its cgroup (limit %d KiB): stopping it", job.slot,
                             job.memory_limit_kib or 0)
                    self.reaper.stop(job, graceful=False, reason="memory")
                    continue
                if "memory" in job.cgroup.h.controllers:
                    u.rss_kib = 0  # the kernel counts and limits memory: no sampled limit
            else:
                procs = tree.get(job.pid)
                if not procs:
                    continue
                u = proctree.usage_of(procs)
                job.user_cpu = max(job.user_cpu, u.user_cpu)
                job.sys_cpu = max(job.sys_cpu, u.sys_cpu)
            job.peak_rss_kib = max(job.peak_rss_kib, u.rss_kib)
            job.peak_vsize_kib = max(job.peak_vsize_kib, u.vsize_kib)
            job.sample_cpu(now)
            if (job.memory_limit_kib is not None and self.knobs.memory_policy == "hard"
                    and u.rss_kib > job.memory_limit_kib and not job.memory_exceeded):
                log.info("job on %s is over its memory limit (%d KiB > %d KiB): killing it", job.slot, u.rss_kib, job.memory_limit_kib)
                job.memory_exceeded = True
                self.reaper.stop(job, graceful=False, reason="memory")
                continue
            if now - job.last_usage_report >= self.knobs.usage_interval:
                job.last_usage_report = now
                due.append(job)
        # Descendants that outlived their job's leader (they left its process group or session).
        for sid, (end_ticks, _, _, _) in self.reaper.finished_sessions.items():
            for st in tree.get(sid, []):
                if st.marked or st.start_ticks <= end_ticks:
                    proctree.kill_quietly(st.pid, signal.SIGKILL)
        if due and self.on_usage is not None:
            self.on_usage(due)
