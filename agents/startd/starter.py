"""The starter: runs each job as a child process of the startd and watches it to the end.

`Starter` is what the startd uses; it composes the parts, each in a module of its own:

| part | module | holds |
|---|---|---|
| `Launcher` | launch.py | the account, argv, environment and streams; the fast spawn or Popen |
| `ScratchDirs` | scratch.py | the scratch directories: spares, kept ones, the cleaning thread |
| `JobCgroups` | jobcgroups.py | the job's cgroup: limits, counters, reuse, retirement |
| `Reaper` | reaping.py | the watch by pidfd, stop and suspend, the reap and exit attributes |
| `UsageMonitor` | usage.py | the periodic sample: usage, the memory limit, strays |

The `Job` record and the hold codes they share are job.py's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from gridbus.agents.startd import cgroups, containers, spawn
from gridbus.agents.startd.accounts import RunAsPolicy
from gridbus.agents.startd.containers import ContainerTool
from gridbus.agents.startd.job import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    HOLD_IWD,
    HOLD_JOB_OUT_OF_RESOURCES,
    HOLD_UNABLE_TO_OPEN_INPUT,
    HOLD_UNABLE_TO_OPEN_OUTPUT,
    Beside,
    Job,
    StarterKnobs,
    StartFailed,
    ad_str,
    call_when_known,
    resolve,
)
from gridbus.agents.startd.jobcgroups import JobCgroups
from gridbus.agents.startd.launch import NO_TOOL, Launcher
from gridbus.agents.startd.readyfds import ReadyFds
from gridbus.agents.startd.reaping import Reaper
from gridbus.agents.startd.scratch import ScratchDirs
from gridbus.agents.startd.usage import UsageMonitor

T = TypeVar("T")


class _Knob(Generic[T]):
    """A starter attribute kept in its `StarterKnobs`, where every part reads it (a reconfig sets
    ``starter.killing_timeout`` and the reaper's next stop uses it)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Starter | None, owner: type | None = None) -> T:
        if obj is None:  # (the class's own attribute: the descriptor)
            return cast(T, self)
        return cast(T, getattr(obj.knobs, self.name))

    def __set__(self, obj: Starter, value: T) -> None:
        setattr(obj.knobs, self.name, value)


class Starter:
    """Launches, watches and stops the job processes of one startd, on its event loop."""

    policy: _Knob[RunAsPolicy] = _Knob()
    killing_timeout: _Knob[float] = _Knob()
    enforce_memory: _Knob[bool] = _Knob()
    usage_interval: _Knob[float] = _Knob()
    check_interval: _Knob[float] = _Knob()
    memory_policy: _Knob[str] = _Knob()
    pids_limit: _Knob[int] = _Knob()

    def __init__(
        self,
        execute: str,
        policy: RunAsPolicy,
        *,
        killing_timeout: float = 30.0,
        enforce_memory: bool = True,
        on_exit: Callable[[Job], None],
        on_usage: Callable[[list[Job]], None] | None = None,
        usage_interval: float = 300.0,
        check_interval: float = 1.0,
        fast_spawn: bool = True,
        spawn_ahead: bool = True,
        cgroup: cgroups.Hierarchy | None = None,
        memory_policy: str = "hard",
        pids_limit: int = 0,
        containers: ContainerTool | None = None,
    ):
        self.knobs = StarterKnobs(policy, killing_timeout, enforce_memory, usage_interval, check_interval,
                                  memory_policy, pids_limit)
        self.execute = execute
        self.cgroups = cgroup  # None: find a job's processes by scanning /proc
        self.spawn_ahead = spawn_ahead  # STARTER_SPAWN_AHEAD (`spawns_ahead`)
        self.running: dict[str, Job] = {}  # by claim id
        self._ready = ReadyFds()  # the spawns' pipes and the jobs' pidfds, watched on the loop
        self.scratch = ScratchDirs(execute)
        self.groups = JobCgroups(cgroup, self.knobs)
        # STARTER_FAST_SPAWN: the job joining its groups and taking its ids itself (spawn.py)
        self.launcher = Launcher(self.knobs, self.scratch, self.groups, self._ready,
                                 fast_spawn=fast_spawn and spawn.AVAILABLE, tool=containers)
        self.reaper = Reaper(self.knobs, self.running, self._ready, self.scratch, self.groups, self.launcher, on_exit)
        self.usage = UsageMonitor(self.knobs, self.reaper, self.groups, self.scratch, on_usage)

    @property
    def fast_spawn(self) -> bool:
        return self.launcher.fast_spawn

    # ------------------------------------------------------------------ start
    def start(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
              memory_limit_mib: int | None) -> Job:
        """Spawn the job; raises StartFailed with the hold reason when it cannot run."""
        asyncio.get_running_loop()  # the job is watched on this loop
        proc, prep = self.launcher.launch(ad, slot, env_extra, memory_limit_mib)
        return self.reaper.watch(key, ad, slot, proc, prep, memory_limit_mib)

    async def start_async(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                          memory_limit_mib: int | None, sandbox: str | None = None) -> Job:
        """`start`, the loop going on meanwhile where it can: the fast spawn's child joins its
        groups and execs beside the startd (`begin_beside`, then `finish_beside`); with Popen the wait for a cgroup
        job's first process to stop (see `Launcher.joins_stopped`) is awaited, not blocked on.
        ``sandbox``: a scratch directory made and filled by the caller (file transfer,
        agents/startd/sandbox.py), which also removes it."""
        job = await self._start_async(key, ad, slot, env_extra, memory_limit_mib, sandbox)
        job.sandbox = sandbox is not None
        return job

    async def _start_async(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                           memory_limit_mib: int | None, sandbox: str | None) -> Job:
        if containers.wanted(ad):
            return await self._start_container(key, ad, slot, env_extra, memory_limit_mib, sandbox)
        if self.spawns_beside:
            beside = self.begin_beside(ad, slot, env_extra, memory_limit_mib, sandbox)
            try:
                return await self.finish_beside(key, ad, slot, memory_limit_mib, beside)
            except asyncio.CancelledError:
                self.abandon(beside)
                raise
        proc, prep = self.launcher.launch(ad, slot, env_extra, memory_limit_mib, wait_stopped=False, sandbox=sandbox)
        await self.launcher.into_group_stopped(proc, prep, ad_str(ad, "Cmd") or "the job")
        return self.reaper.watch(key, ad, slot, proc, prep, memory_limit_mib)

    async def _start_container(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                               memory_limit_mib: int | None, sandbox: str | None) -> Job:
        """A container job: its image made present first (pulled only when absent, awaited), then
        the tool's run spawned as a job is (agents/startd/containers.py)."""
        tool = self.launcher.containers
        if tool is None:
            raise StartFailed(NO_TOOL, HOLD_FAILED_TO_CREATE_PROCESS)
        image_kib = await tool.ensure_image(containers.image_of(ad))
        proc, prep = self.launcher.launch(ad, slot, env_extra, memory_limit_mib, wait_stopped=False, sandbox=sandbox)
        job = self.reaper.watch(key, ad, slot, proc, prep, memory_limit_mib)
        job.image_kib = image_kib
        return job

    @staticmethod
    def starts_now(ad: Mapping[str, Any]) -> bool:
        """Whether the job can be spawned without awaiting anything first (`begin_beside`, a
        successor spawned ahead): not a container job, whose image is made present first."""
        return not containers.wanted(ad)

    @property
    def spawns_beside(self) -> bool:
        """Whether a start can be split into `begin_beside` (now) and `finish_beside` (awaited):
        the fast spawn with a child that runs beside the startd (`spawn.CONCURRENT`)."""
        return self.launcher.fast_spawn and spawn.CONCURRENT

    @property
    def spawns_ahead(self) -> bool:
        """Whether a claim's next job may be spawned while the job before it runs (`begin_beside`
        with ``after``): STARTER_SPAWN_AHEAD, with a child that runs beside the startd."""
        return self.spawn_ahead and self.spawns_beside

    def begin_beside(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                     memory_limit_mib: int | None, sandbox: str | None = None, *, after: Job | None = None) -> Beside:
        """The first half of a start by the fast spawn (`spawns_beside`), done at once: the job
        prepared and its child spawned, joining its groups and exec'ing while the loop goes on.
        The caller spawns a freed slot's next job here without waiting for a turn of the loop,
        then awaits `finish_beside` (or has `when_known` call it back to `finish_known`; or calls
        `abandon` if it will not). Raises StartFailed.

        ``after``: a running job; the new one is its successor, made ready now (its groups
        joined, its streams and directory entered, its account taken) and exec'd by the kernel's
        wake-up the moment ``after`` exits, without a turn of the loop in between. Every stop or
        suspension of ``after`` cancels it first (`cancel_successor`)."""
        return self.launcher.begin_beside(ad, slot, env_extra, memory_limit_mib, sandbox, after=after)

    async def finish_beside(self, key: str, ad: Mapping[str, Any], slot: str, memory_limit_mib: int | None,
                            beside: Beside) -> Job:
        """The second half: the job, watched, once its child has exec'd (StartFailed if it could
        not). Cancelled, it leaves the child to `abandon`."""
        while True:
            await asyncio.shield(beside.known)
            done = self.finish_known(key, ad, slot, memory_limit_mib, beside)
            if isinstance(done, Job):
                return done
            beside = done

    def when_known(self, beside: Beside, call: Callable[[], None]) -> None:
        """``call()`` once the outcome of ``beside`` is known, where it becomes known (the pipe's
        turn of the loop, no task woken in between: at short jobs each turn is a measurable part
        of a job's cost), or on the next turn if it is known already (after what the caller does
        now). Then `finish_known` takes it. Only one call is kept."""
        call_when_known(beside, call)

    def finish_known(self, key: str, ad: Mapping[str, Any], slot: str, memory_limit_mib: int | None,
                     beside: Beside) -> Job | Beside:
        """`finish_beside` once the outcome is known: the job, watched; StartFailed if it could
        not start; or, for a successor that failed before its wait, its start made anew (a
        Beside, to finish in turn)."""
        proc = self.launcher.outcome(beside)
        if isinstance(proc, Beside):
            return proc
        return self.reaper.watch(key, ad, slot, proc, beside.prep, memory_limit_mib)

    def cancel_successor(self, job: Job) -> None:
        """Stop ``job``'s successor, if any, before its exec (`cancel`)."""
        self.launcher.cancel_successor(job)

    def cancel(self, beside: Beside) -> None:
        """Stop a start begun by `begin_beside` now; cleaned up once it is gone."""
        self.launcher.cancel(beside)

    def abandon(self, beside: Beside) -> None:
        """A start begun by `begin_beside` that nobody will finish: once its outcome is known,
        what it started is stopped and cleaned up."""
        self.launcher.abandon(beside)

    @staticmethod
    def shares_output(ad: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        """Whether two jobs write the same output or error file: a successor opens (truncates)
        its files when it is spawned, so it is not spawned while such a job writes them."""
        def written(a: Mapping[str, Any]) -> set[str]:
            iwd = ad_str(a, "Iwd") or ""
            return {resolve(p, iwd) for p in (ad_str(a, "Out"), ad_str(a, "Err")) if p and p != os.devnull}

        return not written(ad).isdisjoint(written(other))

    # ------------------------------------------------------------------ stop, suspend
    def stop(self, job: Job, graceful: bool, reason: str) -> None:
        """Stop a job: its kill signal now and SIGKILL after KILLING_TIMEOUT, or SIGKILL now."""
        self.reaper.stop(job, graceful, reason)

    async def stop_and_wait(self, job: Job, graceful: bool, reason: str) -> None:
        """Stop the job and return once every process of it is gone (not merely signalled)."""
        await self.reaper.stop_and_wait(job, graceful, reason)

    def suspend(self, job: Job) -> int:
        """Stop every process of the job where it is; returns how many were suspended."""
        return self.reaper.suspend(job)

    def resume(self, job: Job) -> None:
        self.reaper.resume(job)

    async def shutdown(self) -> None:
        """Kill every job (the startd is going away) and wait until they are reaped."""
        for job in list(self.running.values()):
            self.cancel_successor(job)
        if self.launcher.launching:  # a job being spawned now is running (or failed) when this returns
            await asyncio.wait(list(self.launcher.launching), timeout=5)
            await asyncio.sleep(0)  # let start_async register what it launched
        jobs = list(self.running.values())
        for job in jobs:
            self.stop(job, graceful=False, reason="shutdown")
        waits = [j.done for j in jobs if j.done is not None]
        if waits:
            await asyncio.wait(waits, timeout=5)
        await self.scratch.shutdown()
        self._ready.close()  # nothing is waited for any more
        self.groups.shutdown()
        self.launcher.shutdown()

    # ------------------------------------------------------------------ monitoring
    async def monitor(self) -> None:
        """Sample every running job's tree: usage, the memory limit, stray processes."""
        await self.usage.run()


__all__ = [
    "HOLD_FAILED_TO_CREATE_PROCESS",
    "HOLD_IWD",
    "HOLD_JOB_OUT_OF_RESOURCES",
    "HOLD_UNABLE_TO_OPEN_INPUT",
    "HOLD_UNABLE_TO_OPEN_OUTPUT",
    "Beside",
    "Job",
    "Starter",
    "StartFailed",
]
