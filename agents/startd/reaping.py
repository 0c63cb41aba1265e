"""A job's end: watched from its spawn, stopped (its kill signal, then SIGKILL), reaped, and its
exit handed to the startd with HTCondor's exit and usage attributes.

Its exit is noticed through a pidfd on the event loop (as ``asyncio.PidfdChildWatcher`` does), so
a short job costs one fork/exec and two system calls. When the leader exits, what is left of the
job is killed while the leader is still a zombie (its pid, which names the group, cannot have
been reused yet), the exit is handed to the startd at once, and only then is the scratch
directory cleaned (agents/startd/scratch.py). A job is done (``Job.done``) once every process of
it is gone, so a stop returns when nothing of the job is left, not when its processes were
signalled. On the process-scan fallback (no cgroups) a finished job's session is watched a while
for descendants that outlived its leader (`Reaper.finished_sessions`, killed by the monitor).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from gridbus.agents.startd import proctree
from gridbus.agents.startd.containers import TOOL_FAILED
from gridbus.agents.startd.job import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    HOLD_JOB_OUT_OF_RESOURCES,
    Job,
    Prepared,
    StarterKnobs,
    ad_str,
    kill_signal,
)
from gridbus.agents.startd.jobcgroups import JobCgroups
from gridbus.agents.startd.launch import (
    JOIN_FAILED,
    JOIN_FAILED_MARK,
    Launcher,
    Process,
    kill_child,
)
from gridbus.agents.startd.readyfds import ReadyFds
from gridbus.agents.startd.scratch import ScratchDirs

SESSION_WATCH = 30.0  # seconds a finished job's session is watched on the process-scan path
GROUP_RETIRE = 10.0  # seconds a finished job's group is given to empty before it is left


class Reaper:
    """Watches, stops and reaps the jobs of one starter (``running``, by claim id)."""

    def __init__(self, knobs: StarterKnobs, running: dict[str, Job], ready: ReadyFds, scratch: ScratchDirs,
                 groups: JobCgroups, launcher: Launcher, on_exit: Callable[[Job], None]):
        self.knobs = knobs
        self.running = running
        self.ready = ready  # the jobs' pidfds, watched on the loop
        self.scratch = scratch
        self.groups = groups
        self.launcher = launcher
        self.on_exit = on_exit
        # The scan path's finished jobs, their sessions watched a while for what outlived them:
        # sid -> (end ticks, forget at, the job's mark, clock ticks before it started).
        self.finished_sessions: dict[int, tuple[int, float, str | None, int]] = {}
        self._removing: set[asyncio.Task] = set()  # containers being removed after their job's exit

    def watch(self, key: str, ad: Mapping[str, Any], slot: str, proc: Process, prep: Prepared,
              memory_limit_mib: int | None) -> Job:
        """The spawned job, running on claim ``key`` and watched until its exit."""
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(proc.pid)
        job = Job(
            key=key,
            ad=ad,
            slot=slot,
            pid=proc.pid,
            proc=proc,
            pidfd=pidfd,
            scratch=prep.scratch,
            account=prep.account,
            memory_limit_kib=memory_limit_mib * 1024 if (memory_limit_mib and self.knobs.enforce_memory) else None,
            cgroup=prep.group,
            kill_signal=kill_signal(ad),
            done=loop.create_future(),
            mark=prep.mark,
            born_after=prep.born_after,
            container=prep.container,
        )
        self.running[key] = job
        self.ready.watch(pidfd, self._reap, job)
        return job

    # ------------------------------------------------------------------ exit
    def _reap(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        os.close(job.pidfd)  # (which drops it from the descriptors watched)
        # Its successor (if any) has exec'd or is exec'ing: the claim's (`Activation.start_ahead`),
        # no longer this job's to cancel.
        job.successor = None
        # Kill the rest of the job while the leader is a zombie: its pid (the group's id) is
        # still ours, so the signal cannot reach a stranger that reused it. In a cgroup, the rest
        # is every process the job started, wherever it moved.
        proctree.signal_group(job.pid, signal.SIGKILL)
        group_usage = None
        if job.cgroup is not None:
            # (the leader, a zombie until the wait below; a container job's is not in the group)
            if job.cgroup.populated(unreaped=0 if job.container is not None else 1):
                if job.container is None:  # (a container's tool removes it first: `_remove_container`)
                    job.cgroup.kill()
                group_usage = job.cgroup.usage()
            else:
                group_usage = job.cgroup.final_usage()
        try:
            _, status, ru = os.wait4(job.pid, 0)
            user_cpu, sys_cpu, maxrss = ru.ru_utime, ru.ru_stime, ru.ru_maxrss
        except ChildProcessError:  # reaped elsewhere: the status is lost
            status, user_cpu, sys_cpu, maxrss = -1, 0.0, 0.0, 0
        if job.container is not None:  # (the tool's run's own usage, not the container's)
            user_cpu, sys_cpu, maxrss = 0.0, 0.0, 0
        job.proc.returncode = status  # Popen must never wait for it again
        if job.kill_timer is not None:
            job.kill_timer.cancel()
            job.kill_timer = None
        job.ended = time.time()
        if group_usage is not None:
            self.groups.take_usage(job, group_usage)
        job.user_cpu = max(job.user_cpu, user_cpu)
        job.sys_cpu = max(job.sys_cpu, sys_cpu)
        job.peak_rss_kib = max(job.peak_rss_kib, maxrss)
        wall = job.ended - job.started
        if wall > 0:
            job.cpus_usage = (job.user_cpu + job.sys_cpu) / wall
        job.exit = exit_attributes(job, status)
        self.running.pop(job.key, None)
        try:
            self.on_exit(job)  # the exit report is queued before anything else happens
        finally:
            if job.container is not None:
                # Done once its container is removed too (the tool's run, killed, removes nothing).
                removing = loop.create_task(self._remove_container(job), name=f"remove {job.container}")
                self._removing.add(removing)
                removing.add_done_callback(self._removing.discard)
            elif job.cgroup is not None:
                # Done once the group is empty and removed: a stop returns when nothing is left.
                # (Its session is not watched: nothing of it is outside its group, killed and
                # emptied; watching it cost a /proc scan every second on the loop.)
                self.groups.retire(job, time.monotonic() + GROUP_RETIRE)
            else:
                # The scan path watches the session a while for descendants that outlived the
                # leader (agents/startd/usage.py).
                self.finished_sessions[job.pid] = (proctree.uptime_ticks(), time.monotonic() + SESSION_WATCH,
                                                   job.mark, job.born_after)
                if job.done is not None and not job.done.done():
                    job.done.set_result(None)
            # (a transferred sandbox is removed once its output is back)
            self.scratch.job_ended(None if job.sandbox else job.scratch, (job.account.uid, job.account.gid))

    async def _remove_container(self, job: Job) -> None:
        """A container job's end: its container removed, then its group (or the job is done)."""
        assert job.container is not None
        try:
            if self.launcher.containers is not None:
                await self.launcher.containers.remove(job.container)
        finally:
            if job.cgroup is not None:
                job.cgroup.kill()  # (what the tool left: its monitor, or all of it if the tool failed)
                self.groups.retire(job, time.monotonic() + GROUP_RETIRE)
            elif job.done is not None and not job.done.done():
                job.done.set_result(None)

    # ------------------------------------------------------------------ stop
    def stop(self, job: Job, graceful: bool, reason: str) -> None:
        """Stop a job: its kill signal now and SIGKILL after KILLING_TIMEOUT, or SIGKILL now.
        Its successor, if any, first: the claim's next job never follows a job the startd stops."""
        self.launcher.cancel_successor(job)
        if job.exit is not None:
            return
        job.stop_reason = job.stop_reason or reason
        if job.suspended:
            self.resume(job)  # a frozen process takes no signal but SIGKILL
        timeout = self.knobs.killing_timeout
        if graceful and timeout > 0:
            if job.container is not None:
                # The tool's run passes the signal on to the container's first process; the
                # container's other processes are the job's to stop (as under HTCondor).
                kill_child(job.pid, job.kill_signal)
            elif job.cgroup is not None:
                # On v2 the job's first process joins its group itself, a moment after it is
                # spawned: signal it by pid too, or a stop in that moment reaches nobody. (It starts
                # no other process before it has joined, so nothing else can be outside the group.)
                kill_child(job.pid, job.kill_signal)
                job.cgroup.signal_all(job.kill_signal)
            else:
                proctree.signal_group(job.pid, job.kill_signal)
            if job.kill_timer is None:
                job.kill_timer = asyncio.get_running_loop().call_later(timeout, self._hard_kill, job)
        else:
            self._hard_kill(job)

    def _hard_kill(self, job: Job) -> None:
        job.kill_timer = None
        if job.exit is None:
            if job.container is not None:
                # The tool's run, killed, is reaped; the reap has the tool remove the container
                # (a kill of the group would kill the tool's monitor, which the tool waits for).
                kill_child(job.pid, signal.SIGKILL)
                return
            if job.cgroup is not None:
                kill_child(job.pid, signal.SIGKILL)  # not in its group yet, if it has just started
                job.cgroup.kill()
                return
            proctree.signal_group(job.pid, signal.SIGKILL)
            # members that moved to another process group, or left the session
            proctree.kill_session(job.pid, mark=job.mark, born_after=job.born_after, killed=job.killed)

    async def stop_and_wait(self, job: Job, graceful: bool, reason: str) -> None:
        """Stop the job and return once every process of it is gone (not merely signalled)."""
        self.stop(job, graceful, reason)
        if job.done is not None:
            await asyncio.shield(job.done)
        if job.cgroup is None:
            await self._session_gone(job)

    async def _session_gone(self, job: Job, timeout: float = 10.0) -> None:
        """The process-scan path: SIGKILL what is left of the job's session until none is left.

        A process SIGKILLed a moment ago is listed until it has finished dying, and a descendant
        that left the leader's process group is only found by the scan: the stop is over when
        the scan finds nothing (processes born after the job ended are a reused session id's)
        and every process the stop killed is gone. (One that left the session is found by its
        mark, which goes with its memory early in its exit: it is waited for by pid.)"""
        loop = asyncio.get_running_loop()
        end_ticks = self.finished_sessions.get(job.pid, (proctree.uptime_ticks(), 0.0))[0]
        deadline = time.monotonic() + timeout

        def sweep() -> bool:
            found = proctree.kill_session(job.pid, end_ticks, job.mark, job.born_after, job.killed)
            return found > 0 or bool(proctree.still_alive(job.killed))

        while True:
            left = await loop.run_in_executor(None, sweep)
            if not left or time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ suspend
    def suspend(self, job: Job) -> int:
        """Stop every process of the job where it is (the freezer, or SIGSTOP on the scan path);
        returns how many processes were suspended."""
        if job.exit is not None:
            return 0
        self.launcher.cancel_successor(job)  # (a suspended job's exit is the resumed job's, later)
        if job.cgroup is not None and job.cgroup.can_freeze():
            count = len(job.cgroup.pids())
            job.cgroup.freeze()
        else:
            count = self._signal_session(job, signal.SIGSTOP)
        job.suspended = True
        return count

    def resume(self, job: Job) -> None:
        if job.cgroup is not None and job.cgroup.can_freeze():
            job.cgroup.thaw()
        elif job.exit is None:
            self._signal_session(job, signal.SIGCONT)
        job.suspended = False

    @staticmethod
    def _signal_session(job: Job, sig: int) -> int:
        count = 0
        marks = {job.mark: job.pid} if job.mark else None
        for st in proctree.scan({job.pid}, marks, job.born_after).get(job.pid, []):
            count += proctree.kill_quietly(st.pid, sig)
        return count


def exit_attributes(job: Job, status: int) -> dict[str, Any]:
    """HTCondor's exit attributes of a reaped job (wait ``status``, -1 if lost), its usage, and
    the hold reason of a job over its memory or whose first process could not join its cgroup."""
    if status == -1:
        exit_info: dict[str, Any] = {"ExitBySignal": False, "ExitCode": -1}
    elif (job.cgroup is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == JOIN_FAILED
          and os.path.exists(os.path.join(job.scratch, JOIN_FAILED_MARK))):
        exit_info = {"ExitBySignal": False, "ExitCode": -1, "HoldReasonCode": HOLD_FAILED_TO_CREATE_PROCESS,
                     "HoldReasonSubCode": 0, "HoldReason": f"cannot start {ad_str(job.ad, 'Cmd')}: the job's "
                     f"first process could not join its cgroup {job.cgroup.rel}"}
    elif (job.container is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == TOOL_FAILED
          and not job.memory_exceeded and job.stop_reason is None):
        exit_info = {"ExitBySignal": False, "ExitCode": -1, "HoldReasonCode": HOLD_FAILED_TO_CREATE_PROCESS,
                     "HoldReasonSubCode": TOOL_FAILED, "HoldReason": f"Error running docker job: the container "
                     f"tool failed (exit code {TOOL_FAILED}); its error is in the job's Err file"}
    elif os.WIFSIGNALED(status):
        exit_info = {"ExitBySignal": True, "ExitSignal": os.WTERMSIG(status)}
    else:
        exit_info = {"ExitBySignal": False, "ExitCode": os.WEXITSTATUS(status)}
    exit_info.update(job.usage())
    exit_info["MemoryExceeded"] = job.memory_exceeded
    if job.memory_exceeded and job.memory_limit_kib:
        exit_info["HoldReason"] = (
            f"Job has gone over memory limit of {job.memory_limit_kib // 1024} megabytes. "
            f"Peak usage: {exit_info['MemoryUsage']} megabytes."
        )
        exit_info["HoldReasonCode"] = HOLD_JOB_OUT_OF_RESOURCES
        exit_info["HoldReasonSubCode"] = 0
    return exit_info
