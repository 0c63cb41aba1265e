"""The scale-test starter (``STARTD_SIMULATE_JOBS``): each job "runs" as a timer, not a process.

As HTCondor's scale tests run many startds whose jobs are sleeps, a startd with this knob serves
every method and protocol of a real one (claims, activations in answers, batched reports, slot
ads, drains, vacates) but runs nothing: a job ends after its simulated run time with exit code 0,
so one machine can hold a pool of hundreds of thousands of slots and the collector, negotiator
and schedds meet it for real. The run time is the job's own for a sleep job (``Cmd`` ending in
``sleep`` and a number of seconds as ``Arguments``), else ``SIMULATED_JOB_RUNTIME`` seconds.

It meets `JobStarter` (jobstarter.py), as `Starter` does; a job is a `Job` with no process
(pid 0). A stop ends the job at once (as SIGKILL would a sleep: ``ExitBySignal``, signal 9).
Nothing is spawned beside the loop (`spawns_beside` and `spawns_ahead` are false): no start is
split, so there is no successor to cancel, and a split start asked for anyway fails as a start.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from gridbus.agents.startd.accounts import Account
from gridbus.agents.startd.arguments import ArgumentError, job_argv, lookup
from gridbus.agents.startd.job import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    Beside,
    Job,
    StartFailed,
    call_when_known,
)

SIMULATED_ACCOUNT = Account(name="simulated", uid=-1, gid=-1, groups=(), home="/")


def runtime_of(ad: Mapping[str, Any], default: float) -> float:
    """A sleep job's own duration, else ``default`` seconds."""
    cmd = lookup(ad, "Cmd")
    if isinstance(cmd, str) and cmd.rsplit("/", 1)[-1] == "sleep":
        try:
            args = job_argv(ad)
        except ArgumentError:
            args = []
        if args:
            try:
                return max(0.0, float(args[0]))
            except ValueError:
                pass
    return default


_NOT_BESIDE = "the simulated starter runs jobs as timers and spawns nothing beside the startd"


class SimulatedStarter:
    """`JobStarter` with timers for processes."""

    def __init__(self, *, on_exit: Callable[[Job], None], runtime: float = 0.0):
        self.on_exit = on_exit
        self.runtime = runtime
        self.running: dict[str, Job] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        # The attributes the startd's reconfig sets on a real starter (kept, unused).
        self.killing_timeout = self.usage_interval = self.check_interval = 0.0
        self.enforce_memory = False
        self.memory_policy, self.pids_limit, self.policy = "none", 0, None
        self.spawns_beside = False  # no spawn to begin ahead of the launch (see Starter.begin_beside)
        self.spawns_ahead = False  # nor a successor spawned while the job before it runs

    @staticmethod
    def starts_now(ad: Mapping[str, Any]) -> bool:
        return True  # (see Starter.starts_now)

    def start(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
              memory_limit_mib: int | None) -> Job:
        loop = asyncio.get_running_loop()
        job = Job(key=key, ad=ad, slot=slot, pid=0, proc=None, pidfd=-1, scratch="",  # type: ignore[arg-type]  # a timer stands for the process
                  account=SIMULATED_ACCOUNT, memory_limit_kib=None, done=loop.create_future())
        self.running[key] = job
        self._timers[key] = loop.call_later(runtime_of(ad, self.runtime), self._end, job, None)
        return job

    async def start_async(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                          memory_limit_mib: int | None, sandbox: str | None = None) -> Job:
        """`start`; ``sandbox`` (a directory the caller filled, and removes) is not run in."""
        job = self.start(key, ad, slot, env_extra, memory_limit_mib)
        job.sandbox = sandbox is not None
        return job

    # ------------------------------------------------------------------ the split start
    @staticmethod
    def shares_output(ad: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        return False  # a simulated job opens no output file

    def begin_beside(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                     memory_limit_mib: int | None, sandbox: str | None = None, *, after: Job | None = None) -> Beside:
        raise StartFailed(_NOT_BESIDE, HOLD_FAILED_TO_CREATE_PROCESS)

    def when_known(self, beside: Beside, call: Callable[[], None]) -> None:
        call_when_known(beside, call)

    def finish_known(self, key: str, ad: Mapping[str, Any], slot: str, memory_limit_mib: int | None,
                     beside: Beside) -> Job | Beside:
        raise StartFailed(_NOT_BESIDE, HOLD_FAILED_TO_CREATE_PROCESS)

    def cancel(self, beside: Beside) -> None:
        beside.cancelled = True  # (none begun here: there is no child to stop)

    def cancel_successor(self, job: Job) -> None:
        job.successor = None  # (none spawned here)

    def _end(self, job: Job, killed_by: int | None) -> None:
        if job.exit is not None:
            return
        timer = self._timers.pop(job.key, None)
        if timer is not None:
            timer.cancel()
        job.ended = time.time()
        job.exit = ({"ExitBySignal": True, "ExitSignal": killed_by} if killed_by is not None
                    else {"ExitBySignal": False, "ExitCode": 0})
        job.exit.update(job.usage())
        job.exit["MemoryExceeded"] = False
        self.running.pop(job.key, None)
        try:
            self.on_exit(job)
        finally:
            if job.done is not None and not job.done.done():
                job.done.set_result(None)

    def stop(self, job: Job, graceful: bool, reason: str) -> None:
        if job.exit is None:
            job.stop_reason = job.stop_reason or reason
            self._end(job, signal.SIGKILL)

    async def stop_and_wait(self, job: Job, graceful: bool, reason: str) -> None:
        self.stop(job, graceful, reason)

    def suspend(self, job: Job) -> int:
        job.suspended = job.exit is None
        return 1 if job.suspended else 0

    def resume(self, job: Job) -> None:
        job.suspended = False

    async def monitor(self) -> None:
        return None  # nothing to sample

    async def shutdown(self) -> None:
        for job in list(self.running.values()):
            self.stop(job, graceful=False, reason="shutdown")
