"""The starter: runs each job as a child process of the startd and watches it to the end.

No shell and no process per job on the startd's side: the job is spawned directly (Cmd and its
arguments, Iwd, environment, In/Out/Err, as the account the run-as policy picks) as the leader of
its own session, and its exit is noticed through a pidfd on the event loop (as
``asyncio.PidfdChildWatcher`` does), so a short job costs one fork/exec and two system calls.

The job's first process comes from the fast spawn where it is built (agents/startd/spawn.py): on
x86-64 and aarch64 its child joins the job's groups, takes the account and execs beside the
startd, whose loop goes on meanwhile and learns the outcome from the child's pipe
(`begin_beside`, `finish_beside`). Without it (no C compiler at install, or STARTER_FAST_SPAWN false)
``subprocess.Popen`` starts it, on the loop.

With a cgroup hierarchy (`cgroups`, the default when the startd runs as root) each job runs in a
group of its own from its first instruction: the fast spawn's child joins before its exec; with
Popen, on cgroup v1 it is born there (forked by a thread that joins the group for that moment,
`cgroups.JobCgroup.thread_joined`), on v2 its first process is a shell that joins before it execs
the job. A stop kills the group, the kernel
enforces the memory limit, and usage is read from the group's counters every STARTER_MEMORY_CHECK_INTERVAL. On
the process-scan fallback (no cgroups) the job's processes are its session's, found in one scan of
/proc for all running jobs, and the memory limit is sampled.

When the leader exits, what is left of the job is killed while the leader is still a zombie (its
pid, which names the group, cannot have been reused yet), the exit is handed to the startd at once,
and only then is the scratch directory cleaned: emptied and kept for the next job of the same
account, not removed (`_recycle`), since a mkdir and an rmdir per job cost the startd more cpu in
the file system than the rest of a short job's start (ext4 skips over every recently deleted
inode of the block group at each new one). A job is done (``Job.done``) once every process of it
is gone, so a stop returns when nothing of the job is left, not when its processes were signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import os
import shlex
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gridbus.agents.startd import cgroups, proctree, spawn
from gridbus.agents.startd.accounts import Account, RunAsPolicy, RunAsRefused, may_access
from gridbus.agents.startd.arguments import ArgumentError, job_argv, job_environment, lookup
from gridbus.agents.startd.readyfds import ReadyFds
from gridbus.classad.values import is_number

# HTCondor's HoldReasonCode values for what the starter can run into.
HOLD_FAILED_TO_CREATE_PROCESS = 6
HOLD_UNABLE_TO_OPEN_OUTPUT = 7
HOLD_UNABLE_TO_OPEN_INPUT = 8
HOLD_IWD = 14
HOLD_JOB_OUT_OF_RESOURCES = 34

log = logging.getLogger("gridbus.startd.starter")

MAX_IDLE_GROUPS = 64  # emptied job cgroups kept for reuse
# Names scratch directories and job groups (``..._<pid>_<seq>``): one count for every Starter of
# the process, so two on one hierarchy never share a group.
_SEQ = itertools.count(1)

# Without the fast spawn (agents/startd/spawn.py, where its extension is built), on cgroup v2
# (one tree: a thread cannot join a group alone, see `_born_in` for v1) the job's first process
# is a shell that joins the job's cgroup, then becomes the job ("$0" is the job's executable,
# "$@" its arguments): the job's first instruction runs inside the group.
# Running as root, the shell writes its own pid into the group's cgroup.procs files; if a write
# fails it never execs the job, leaves a mark in the scratch directory and exits JOIN_FAILED.
# Running as another account (which may not write there), it stops itself, and the startd moves
# it and continues it (one more round: a wait for the stop, the writes and SIGCONT on the startd).
STARTER_SHELL = "/bin/sh"
STOP_THEN_EXEC = 'kill -STOP $$; exec "$0" "$@"'
JOIN_THEN_EXEC = '{{ {join}; }} 2>/dev/null && exec "$0" "$@"; : >{mark}; exit {code}'
JOIN_FAILED = 125
JOIN_FAILED_MARK = ".gridbus-cgroup-join-failed"


class StartFailed(Exception):
    """The job could not be started; the schedd holds it with this reason and code."""

    def __init__(self, reason: str, code: int, subcode: int = 0):
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.subcode = subcode


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
    successor: Beside | None = None  # the claim's next job, spawned and waiting for this one's exit

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
        }

    def sample_cpu(self, now: float) -> None:
        """CpusUsage over the time since the previous sample."""
        t0, cpu0 = self.cpu_mark
        cpu = self.user_cpu + self.sys_cpu
        if t0 and now - t0 > 0.05:
            self.cpus_usage = max(0.0, (cpu - cpu0) / (now - t0))
        if not t0 or now - t0 > 0.05:
            self.cpu_mark = (now, cpu)


_Ids = tuple[int, int]  # (uid, gid) of a job's account

SPARE_DIRS = 8  # empty scratch directories kept made ahead
MAX_SPARE_DIRS = 256  # and at most this many emptied ones kept for their accounts' next jobs
KEPT_SCRATCH_IDLE = 60.0  # seconds without a start of its account after which a kept one goes


@dataclass
class _Prepared:
    """A job made ready to spawn (`Starter._prepare`)."""

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


@dataclass
class Beside:
    """A start by the fast spawn between `Starter.begin_beside` and `Starter.finish_beside`."""

    prep: _Prepared
    launching: spawn.Launching
    known: asyncio.Future  # done when the child's pipe says its outcome is known
    cancelled: bool = False  # a successor stopped before its exec (`Starter.cancel`)
    # A successor's start made anew, as at its predecessor's exit (`finish_beside`); None for others.
    again: Callable[[], Beside] | None = None
    on_known: Callable[[], None] | None = None  # called where the outcome becomes known (`Starter.when_known`)


def _settle(beside: Beside) -> None:
    """The spawn's pipe is readable: its outcome is known."""
    if not beside.known.done():
        beside.known.set_result(None)
    call, beside.on_known = beside.on_known, None
    if call is not None:
        call()


class Starter:
    """Launches, watches and stops the job processes of one startd, on its event loop."""

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
    ):
        self.execute = execute
        self.policy = policy
        self.killing_timeout = killing_timeout
        self.enforce_memory = enforce_memory
        self.on_exit = on_exit
        self.on_usage = on_usage
        self.usage_interval = usage_interval
        self.check_interval = check_interval
        self.cgroups = cgroup  # None: find a job's processes by scanning /proc
        self.memory_policy = memory_policy  # CGROUP_MEMORY_LIMIT_POLICY: hard, soft, none
        self.pids_limit = pids_limit
        self.running: dict[str, Job] = {}  # by claim id
        # The scan path's finished jobs, their sessions watched a while for what outlived them:
        # sid -> (end ticks, forget at, the job's mark, clock ticks before it started).
        self._finished_sessions: dict[int, tuple[int, float, str | None, int]] = {}
        self._idle_groups: list[cgroups.JobCgroup] = []  # emptied job groups, reset for the next job
        self._to_clean: list[tuple[str, _Ids | None]] = []  # (scratch, the ids to keep it for, or None)
        self._clean_scheduled = False
        # Empty scratch directories made ahead by the cleaning thread: a start takes one instead of
        # a mkdir on the loop, which waited on the rmdirs of the same parent directory.
        self._spare_dirs: list[str] = []
        # Scratch directories of finished jobs, emptied and reset, by the (uid, gid) owning them:
        # a job of that account takes one as it is (no mkdir, no chown, no rmdir after the last).
        self._reusable: dict[_Ids, list[str]] = {}
        self._reusable_used: dict[_Ids, float] = {}  # when a job of the account last started (monotonic)
        self._shut_down = False
        # STARTER_FAST_SPAWN: the job joining its groups and taking its ids itself (spawn.py)
        self.fast_spawn = fast_spawn and spawn.AVAILABLE
        self.spawn_ahead = spawn_ahead  # STARTER_SPAWN_AHEAD (`spawns_ahead`)
        self._launching: set[asyncio.Future] = set()  # the fast spawn's children not exec'd yet
        self._ready = ReadyFds()  # the spawns' pipes and the jobs' pidfds, watched on the loop
        self._cleaning: set[asyncio.Future] = set()  # the cleaning thread's rounds under way
        # The thread that forks cgroup v1 jobs for the main thread (see `_born_in`).
        self._born_in_thread: ThreadPoolExecutor | None = None
        os.makedirs(execute, mode=0o755, exist_ok=True)

    # ------------------------------------------------------------------ start
    def start(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
              memory_limit_mib: int | None) -> Job:
        """Spawn the job; raises StartFailed with the hold reason when it cannot run."""
        asyncio.get_running_loop()  # the job is watched on this loop
        proc, prep = self._launch(ad, slot, env_extra, memory_limit_mib)
        return self._watch(key, ad, slot, proc, prep, memory_limit_mib)

    async def start_async(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                          memory_limit_mib: int | None, sandbox: str | None = None) -> Job:
        """`start`, the loop going on meanwhile where it can: the fast spawn's child joins its
        groups and execs beside the startd (`begin_beside`, then `finish_beside`); with Popen the wait for a cgroup
        job's first process to stop (see `_into_group`) is awaited, not blocked on.
        ``sandbox``: a scratch directory made and filled by the caller (file transfer,
        agents/startd/sandbox.py), which also removes it."""
        job = await self._start_async(key, ad, slot, env_extra, memory_limit_mib, sandbox)
        job.sandbox = sandbox is not None
        return job

    async def _start_async(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                           memory_limit_mib: int | None, sandbox: str | None) -> Job:
        given = {"sandbox": sandbox} if sandbox is not None else {}
        if self.spawns_beside:
            beside = self.begin_beside(ad, slot, env_extra, memory_limit_mib, sandbox)
            try:
                return await self.finish_beside(key, ad, slot, memory_limit_mib, beside)
            except asyncio.CancelledError:
                self.abandon(beside)
                raise
        proc, prep = self._launch(ad, slot, env_extra, memory_limit_mib, wait_stopped=False, **given)
        if self._joins_stopped(prep.group, prep.account):
            assert prep.group is not None
            try:
                _into_group(proc, prep.group, _str(ad, "Cmd") or "the job", await _stopped(proc.pid))
            except BaseException:  # StartFailed, or cancelled: nothing of it may run on
                self._stop_unwatched(proc, prep.scratch, prep.group)
                raise
        return self._watch(key, ad, slot, proc, prep, memory_limit_mib)

    def _launch(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                memory_limit_mib: int | None = None, wait_stopped: bool = True, sandbox: str | None = None,
                ) -> tuple[subprocess.Popen | spawn.Child, _Prepared]:
        """Everything from the account to the job's exec, waited for. ``wait_stopped=False``
        leaves a cgroup job's stopped first process to the caller."""
        prep = self._prepare(ad, slot, env_extra, memory_limit_mib, sandbox)
        if self.fast_spawn:  # born in its groups, as its account; waited for until its exec
            proc = self._spawned(prep, lambda: self._begin(prep).result())
        else:
            proc = self._spawned(prep, lambda: self._popen(
                prep.argv, prep.iwd, prep.env, prep.streams, prep.account, prep.group, prep.scratch), wait_stopped)
        return proc, prep

    @property
    def spawns_beside(self) -> bool:
        """Whether a start can be split into `begin_beside` (now) and `finish_beside` (awaited):
        the fast spawn with a child that runs beside the startd (`spawn.CONCURRENT`)."""
        return self.fast_spawn and spawn.CONCURRENT

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
        prep = self._prepare(ad, slot, env_extra, memory_limit_mib, sandbox)
        launching = self._spawned(prep, lambda: self._begin(prep, after), last=False)
        known = asyncio.get_running_loop().create_future()
        beside = Beside(prep, launching, known)
        self._ready.watch(launching.fileno(), _settle, beside)
        if after is None:
            self._launching.add(known)
            known.add_done_callback(self._launching.discard)
        else:  # (a successor's outcome waits for its predecessor: no stop waits for it)
            after.successor = beside
            beside.again = lambda: self.begin_beside(ad, slot, env_extra, memory_limit_mib, sandbox)
        return beside

    def cancel_successor(self, job: Job) -> None:
        """Stop ``job``'s successor, if any, before its exec (`cancel`)."""
        beside, job.successor = job.successor, None
        if beside is not None:
            self.cancel(beside)

    def cancel(self, beside: Beside) -> None:
        """Stop a start begun by `begin_beside` now (SIGKILL takes a child waiting for its
        predecessor before any other system call) and mark it cancelled; what it prepared is
        cleaned up once its pipe says it is gone. One whose predecessor had exited already may
        have exec'd a moment ago: it is killed the same way."""
        if beside.cancelled:
            return
        beside.cancelled = True
        _kill_child(beside.launching.pid, signal.SIGKILL)
        self.abandon(beside)

    @property
    def spawns_ahead(self) -> bool:
        """Whether a claim's next job may be spawned while the job before it runs (`begin_beside`
        with ``after``): STARTER_SPAWN_AHEAD, with a child that runs beside the startd."""
        return self.spawn_ahead and self.spawns_beside

    @staticmethod
    def shares_output(ad: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        """Whether two jobs write the same output or error file: a successor opens (truncates)
        its files when it is spawned, so it is not spawned while such a job writes them."""
        def written(a: Mapping[str, Any]) -> set[str]:
            iwd = _str(a, "Iwd") or ""
            return {_resolve(p, iwd) for p in (_str(a, "Out"), _str(a, "Err")) if p and p != os.devnull}

        return not written(ad).isdisjoint(written(other))

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
        if beside.known.done():
            asyncio.get_running_loop().call_soon(call)
        else:
            beside.on_known = call

    def finish_known(self, key: str, ad: Mapping[str, Any], slot: str, memory_limit_mib: int | None,
                     beside: Beside) -> Job | Beside:
        """`finish_beside` once the outcome is known: the job, watched; StartFailed if it could
        not start; or, for a successor that failed before its wait, its start made anew (a
        Beside, to finish in turn)."""
        prep = beside.prep
        try:
            proc = self._spawned(prep, beside.launching.result)
        except StartFailed:
            if beside.again is None or beside.launching.failed_stage == "exec":
                raise
            # A successor that failed before its wait, at a step that could have gone otherwise
            # after the job before it (an Iwd that job makes, say): started anew now, as it would
            # have been at that exit without spawning ahead, where it runs or fails for good.
            return beside.again()
        return self._watch(key, ad, slot, proc, prep, memory_limit_mib)

    def abandon(self, beside: Beside) -> None:
        """A start begun by `begin_beside` that nobody will finish: once its outcome is known,
        what it started is stopped and cleaned up."""
        beside.known.add_done_callback(lambda _: self._abandon(beside.prep, beside.launching))

    @staticmethod
    def _begin(prep: _Prepared, after: Job | None = None) -> spawn.Launching:
        """The fast spawn of a prepared job (its outcome taken later, `spawn.Launching.result`)."""
        return spawn.begin(prep.argv, executable=prep.executable, cwd=prep.iwd, env=prep.env, fds=prep.streams,
                           account=prep.account, group=prep.group, after=after.pidfd if after is not None else None)

    def _abandon(self, prep: _Prepared, launching: spawn.Launching) -> None:
        try:
            proc = self._spawned(prep, launching.result)
        except StartFailed:  # it never ran, and is cleaned up
            return
        self._stop_unwatched(proc, prep.scratch, prep.group)

    def _prepare(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                 memory_limit_mib: int | None, sandbox: str | None) -> _Prepared:
        """Everything before the spawn: the account, argv and environment, the scratch directory,
        the standard streams opened as the job's account, its cgroup. Raises StartFailed with
        nothing of it left behind."""
        try:
            account = self.policy.account_for(_str(ad, "Owner"))
        except RunAsRefused as exc:
            raise StartFailed(exc.reason, exc.code) from None
        cmd = _str(ad, "Cmd")
        if not cmd:
            raise StartFailed("the job ad has no Cmd: the starter does not know what to run", HOLD_FAILED_TO_CREATE_PROCESS)
        try:
            args = job_argv(ad)
            job_env = job_environment(ad)
        except ArgumentError as exc:
            raise StartFailed(f"cannot parse the job's arguments or environment: {exc}", HOLD_FAILED_TO_CREATE_PROCESS) from None
        seq = next(_SEQ)
        scratch = sandbox or os.path.join(self.execute, f"dir_{os.getpid()}_{seq}")
        try:
            if sandbox is None:
                scratch = self._scratch_for(account, scratch)
        except OSError as exc:
            raise StartFailed(f"cannot make the scratch directory {scratch}: {exc.strerror}", HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0) from None
        prep = _Prepared(account=account, scratch=scratch)
        try:
            iwd = _str(ad, "Iwd") or scratch
            if not os.path.isabs(iwd):
                raise StartFailed(f"Iwd {iwd!r} is not an absolute path", HOLD_IWD)
            prep.iwd = iwd
            prep.executable = executable = cmd if os.path.isabs(cmd) else os.path.join(iwd, cmd)
            stdin = self._open(ad, "In", iwd, account, write=False, fds=prep.fds)
            stdout = self._open(ad, "Out", iwd, account, write=True, fds=prep.fds)
            err_path = _str(ad, "Err")
            out_path = _str(ad, "Out")
            if err_path and out_path and _resolve(err_path, iwd) == _resolve(out_path, iwd):
                stderr = stdout  # one file for both, so the two streams interleave in order
            else:
                stderr = self._open(ad, "Err", iwd, account, write=True, fds=prep.fds)
            prep.streams = (stdin, stdout, stderr)
            prep.env = {
                "_CONDOR_SCRATCH_DIR": scratch,
                "_CONDOR_SLOT": slot.split("@", 1)[0],
                "TMPDIR": scratch,
                "TMP": scratch,
                "TEMP": scratch,
                "BATCH_SYSTEM": "HTCondor",
                **env_extra,
                **job_env,
            }
            prep.argv = [executable, *args]
            if self.cgroups is not None:
                prep.group = self._make_cgroup(ad, f"job_{os.getpid()}_{seq}", memory_limit_mib)
            if prep.group is None:  # found by the scan: a descendant that leaves the session, by its mark
                prep.mark = prep.env[proctree.MARK_VAR] = proctree.new_mark()
                prep.born_after = proctree.uptime_ticks()
        except StartFailed:
            self._unprepare(prep)
            raise
        return prep

    def _scratch_for(self, account: Account, new: str) -> str:
        """An empty scratch directory owned by ``account``: one its earlier job left (emptied), a
        spare made ahead, or ``new``, made now."""
        ids = (account.uid, account.gid)
        self._reusable_used[ids] = time.monotonic()
        kept = self._reusable.get(ids)
        if kept:
            return kept.pop()
        try:
            scratch = self._spare_dirs.pop()
        except IndexError:
            os.mkdir(new, 0o700)
            scratch = new
        try:
            if account.switch:
                os.chown(scratch, account.uid, account.gid)
        except OSError:
            self._clean_now(scratch)
            raise
        return scratch

    def _unprepare(self, prep: _Prepared) -> None:
        """What `_prepare` made, undone: the job did not start."""
        self._clean_now(prep.scratch)
        if prep.group is not None:
            prep.group.kill()
            prep.group.remove()
        self._close_streams(prep)

    @staticmethod
    def _close_streams(prep: _Prepared) -> None:
        fds, prep.fds = prep.fds, []
        for fd in fds:
            os.close(fd)

    def _spawned(self, prep: _Prepared, step: Callable[[], Any], wait_stopped: bool = True, last: bool = True) -> Any:
        """``step()`` (a spawn, or the outcome of one) with its failures as the hold reasons they
        mean, everything prepared undone when it failed, the job's streams closed once the job
        has them (``last``: this step leaves the job running)."""
        try:
            try:
                proc = step()
            except cgroups.JoinFailed as exc:  # the job never ran
                raise StartFailed(exc.reason, HOLD_FAILED_TO_CREATE_PROCESS, exc.errno) from None
            except OSError as exc:
                if exc.filename == prep.iwd and not os.path.isdir(prep.iwd):
                    raise StartFailed(f"cannot enter Iwd {prep.iwd}: {exc.strerror}", HOLD_IWD, exc.errno or 0) from None
                raise StartFailed(
                    f"cannot execute {prep.executable}: {exc.strerror or exc}", HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0
                ) from None
            except (subprocess.SubprocessError, ValueError) as exc:
                raise StartFailed(f"cannot start {prep.executable}: {exc}", HOLD_FAILED_TO_CREATE_PROCESS) from None
            if last and wait_stopped and self._joins_stopped(prep.group, prep.account):
                assert prep.group is not None
                _into_group(proc, prep.group, prep.executable)
        except StartFailed:
            self._unprepare(prep)
            raise
        if last:
            self._close_streams(prep)
        return proc

    def _popen(self, argv: list[str], iwd: str, env: dict[str, str], fds: tuple[int, int, int], account: Account,
               group: cgroups.JobCgroup | None, scratch: str) -> subprocess.Popen:
        """The job started by ``subprocess.Popen`` (without the fast spawn)."""
        executable = argv[0]
        switch: dict[str, Any] = (
            {"user": account.uid, "group": account.gid, "extra_groups": list(account.groups)} if account.switch else {})
        if group is not None and group.version == 2:
            # v2 has no joining by thread: the job's first process is a shell that joins.
            # (A Python preexec_fn would join without the shell, but it rules out vfork: it
            # cost the startd more than twice the cpu per job, measured.)
            _check_executable(executable)  # the shell below would turn a bad one into exit 127
            if account.switch:
                script = STOP_THEN_EXEC
            else:
                script = JOIN_THEN_EXEC.format(join=group.join_script(), code=JOIN_FAILED,
                                               mark=shlex.quote(os.path.join(scratch, JOIN_FAILED_MARK)))
            argv = [STARTER_SHELL, "-c", script, *argv]
        popen = functools.partial(
            subprocess.Popen,
            argv,
            executable=argv[0],
            cwd=iwd,
            env=env,
            stdin=fds[0],
            stdout=fds[1],
            stderr=fds[2],
            start_new_session=True,  # its own session and process group: one kill reaches them all
            close_fds=True,
            **switch,
        )
        popen = functools.partial(_with_no_signal_blocked, popen)
        # v1: forked by a thread in the job's groups, the job is born in them.
        return popen() if group is None or group.version == 2 else self._born_in(group, popen)

    def _joins_stopped(self, group: cgroups.JobCgroup | None, account: Account) -> bool:
        """Whether the job's first process stops itself for the startd to move it into its group:
        Popen, a v2 group and a job of another account (which may not write the group's files
        itself; the fast spawn's child joins before it takes the account)."""
        return not self.fast_spawn and group is not None and group.version == 2 and account.switch

    def _born_in(self, group: cgroups.JobCgroup, popen: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        """``popen()`` by a thread that is in ``group`` meanwhile (cgroup v1), so the job is born
        there: this thread (the startd's loop runs on one of its own, see gridbus/agent/runner.py;
        or a spawner thread), else, on the main thread, which may not join (see
        `cgroups.JobCgroup.thread_joined`), the starter's own thread (a cross-thread round per
        job: in-process uses, tests and benchmarks)."""
        if threading.current_thread() is threading.main_thread():
            return self._born_in_executor().submit(self._born_in, group, popen).result()
        with group.thread_joined():
            return popen()

    def _born_in_executor(self) -> ThreadPoolExecutor:
        if self._born_in_thread is None:
            self._born_in_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cgroup-spawner")
        return self._born_in_thread

    def _make_cgroup(self, ad: Mapping[str, Any], name: str, memory_limit_mib: int | None) -> cgroups.JobCgroup:
        assert self.cgroups is not None
        cpus = lookup(ad, "RequestCpus")
        try:
            group = self._idle_groups.pop()
        except IndexError:
            group = self.cgroups.job(name)
        for attempt in (1, 2):
            try:
                group.create()
                group.set_limits(
                    memory_mib=memory_limit_mib if self.enforce_memory else None,
                    policy=self.memory_policy,
                    cpus=float(cpus) if is_number(cpus) else 1.0,
                    pids_max=self.pids_limit,
                )
                return group
            except OSError as exc:
                group.remove()
                if attempt == 1 and group.rel != f"{self.cgroups.base}/{name}":
                    # A reused group may refuse a limit below what it still holds (page cache of
                    # the previous job): a fresh group instead.
                    group = self.cgroups.job(name)
                    continue
                raise StartFailed(f"cannot make the job's cgroup {group.rel}: {exc.strerror or exc}",
                                  HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0) from None
        raise AssertionError("unreachable")

    def _stop_unwatched(self, proc: subprocess.Popen | spawn.Child, scratch: str, group: cgroups.JobCgroup | None) -> None:
        """A job started for a start that was cancelled meanwhile: killed, reaped, cleaned up."""
        proctree.signal_group(proc.pid, signal.SIGKILL)
        if group is not None:
            group.kill()
        proc.wait()  # a SIGKILLed child: at once
        self._clean_now(scratch)
        if group is not None:
            _remove_when_empty(group, 5.0)

    def _watch(self, key: str, ad: Mapping[str, Any], slot: str, proc: subprocess.Popen | spawn.Child, prep: _Prepared,
               memory_limit_mib: int | None) -> Job:
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
            memory_limit_kib=memory_limit_mib * 1024 if (memory_limit_mib and self.enforce_memory) else None,
            cgroup=prep.group,
            kill_signal=_kill_signal(ad),
            done=loop.create_future(),
            mark=prep.mark,
            born_after=prep.born_after,
        )
        self.running[key] = job
        self._ready.watch(pidfd, self._reap, job)
        return job

    def _open(self, ad: Mapping[str, Any], attr: str, iwd: str, account: Account, *, write: bool, fds: list[int]) -> int:
        path = _str(ad, attr)
        if not path:
            return subprocess.DEVNULL  # Popen keeps one /dev/null open for every job
        target = _resolve(path, iwd)
        if target == os.devnull:  # the schedd's default Out and Err: the /dev/null kept open
            return subprocess.DEVNULL
        code = HOLD_UNABLE_TO_OPEN_OUTPUT if write else HOLD_UNABLE_TO_OPEN_INPUT
        if not may_access(target, account, write):
            owner = _str(ad, "Owner")
            # A root-started personal pool runs root's jobs as nobody: say so, or the refusal puzzles.
            why = f" (jobs of {owner} run as {account.name} on this machine)" if owner and owner != account.name else ""
            raise StartFailed(f"{account.name} may not {'write' if write else 'read'} {attr} file {target}{why}", code, 13)
        try:
            if write:
                existed = os.path.exists(target)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
                if account.switch and not existed:
                    os.fchown(fd, account.uid, account.gid)
            else:
                fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise StartFailed(f"cannot open {attr} file {target}: {exc.strerror}", code, exc.errno or 0) from None
        fds.append(fd)
        return fd

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
            if job.cgroup.populated(unreaped=1):  # (the leader, a zombie until the wait below)
                job.cgroup.kill()
                group_usage = job.cgroup.usage()
            else:
                group_usage = job.cgroup.final_usage()
        try:
            _, status, ru = os.wait4(job.pid, 0)
            user_cpu, sys_cpu, maxrss = ru.ru_utime, ru.ru_stime, ru.ru_maxrss
        except ChildProcessError:  # reaped elsewhere: the status is lost
            status, user_cpu, sys_cpu, maxrss = -1, 0.0, 0.0, 0
        job.proc.returncode = status  # Popen must never wait for it again
        if job.kill_timer is not None:
            job.kill_timer.cancel()
            job.kill_timer = None
        job.ended = time.time()
        if group_usage is not None:
            self._take_group_usage(job, group_usage)
        job.user_cpu = max(job.user_cpu, user_cpu)
        job.sys_cpu = max(job.sys_cpu, sys_cpu)
        job.peak_rss_kib = max(job.peak_rss_kib, maxrss)
        wall = job.ended - job.started
        if wall > 0:
            job.cpus_usage = (job.user_cpu + job.sys_cpu) / wall
        if status == -1:
            exit_info: dict[str, Any] = {"ExitBySignal": False, "ExitCode": -1}
        elif (job.cgroup is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == JOIN_FAILED
              and os.path.exists(os.path.join(job.scratch, JOIN_FAILED_MARK))):
            exit_info = {"ExitBySignal": False, "ExitCode": -1, "HoldReasonCode": HOLD_FAILED_TO_CREATE_PROCESS,
                         "HoldReasonSubCode": 0, "HoldReason": f"cannot start {_str(job.ad, 'Cmd')}: the job's "
                         f"first process could not join its cgroup {job.cgroup.rel}"}
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
        job.exit = exit_info
        self.running.pop(job.key, None)
        try:
            self.on_exit(job)  # the exit report is queued before anything else happens
        finally:
            if job.cgroup is not None:
                # Done once the group is empty and removed: a stop returns when nothing is left.
                # (Its session is not watched: nothing of it is outside its group, killed and
                # emptied; watching it cost a /proc scan every second on the loop.)
                self._retire_group(job, time.monotonic() + 10)
            else:
                # The scan path watches the session a while for descendants that outlived the
                # leader (`_apply`).
                self._finished_sessions[job.pid] = (proctree.uptime_ticks(), time.monotonic() + 30, job.mark,
                                                    job.born_after)
                if job.done is not None and not job.done.done():
                    job.done.set_result(None)
            if not job.sandbox:  # a transferred sandbox is removed once its output is back
                self._to_clean.append((job.scratch, (job.account.uid, job.account.gid)))
            if not self._clean_scheduled:
                # Later than the report's publish (which starts on the next loop iteration).
                self._clean_scheduled = True
                loop.call_later(0.05, self._clean)

    def _take_group_usage(self, job: Job, u: cgroups.CgroupUsage) -> None:
        job.user_cpu = max(job.user_cpu, u.user_cpu)
        job.sys_cpu = max(job.sys_cpu, u.sys_cpu)
        job.memory_peak_kib = max(job.memory_peak_kib, u.memory_peak_bytes // 1024)
        job.peak_rss_kib = max(job.peak_rss_kib, u.memory_bytes // 1024)
        if u.oom_kills and self._kernel_limits_memory(job):
            job.memory_exceeded = True

    def _kernel_limits_memory(self, job: Job) -> bool:
        return (job.cgroup is not None and job.memory_limit_kib is not None and self.memory_policy == "hard"
                and "memory" in job.cgroup.h.controllers)

    def _retire_group(self, job: Job, deadline: float) -> None:
        """Remove the job's emptied group (members SIGKILLed a moment ago may still be dying),
        then mark the job done."""
        group = job.cgroup
        assert group is not None
        if group.final_raw is None and group.populated():  # (found empty at the exit: it stays so)
            if time.monotonic() < deadline:
                group.kill()
                asyncio.get_running_loop().call_later(0.005, self._retire_group, job, deadline)
                return
            log.error("cgroup %s of the job on %s is still not empty; leaving it", group.rel, job.slot)
        elif len(self._idle_groups) < MAX_IDLE_GROUPS and group.reset():
            self._idle_groups.append(group)  # the next job moves in: cheaper than a new group
        else:
            group.remove()
        if job.done is not None and not job.done.done():
            job.done.set_result(None)

    def _clean(self) -> None:
        # Emptying and rmdir cost a few hundred microseconds on a busy disk: a worker thread does
        # them, off the loop that spawns and reaps the jobs (the system calls release the GIL).
        self._clean_scheduled = False
        batch, self._to_clean = self._to_clean, []
        if not batch:
            return
        room = MAX_SPARE_DIRS - sum(map(len, self._reusable.values()))
        paths = [(path, ids if i < room else None) for i, (path, ids) in enumerate(batch)]
        # Spares made for each directory removed rather than kept, and the store topped up to
        # SPARE_DIRS (for an account with none kept yet): at hundreds of jobs a second a fixed
        # eight ran out between two cleanings, and most starts made theirs on the loop.
        removed = sum(1 for _, ids in paths if ids is None)
        wanted = min(removed + SPARE_DIRS - len(self._spare_dirs), MAX_SPARE_DIRS - len(self._spare_dirs))
        make = [os.path.join(self.execute, f"dir_{os.getpid()}_{next(_SEQ)}") for _ in range(max(0, wanted))]
        self._cleaning_round(_recycle, paths, make).add_done_callback(self._spares_made)

    def _cleaning_round(self, work: Callable[..., Any], *args: Any) -> asyncio.Future:
        """``work(*args)`` on a worker thread, kept in ``_cleaning`` until done (a shutdown waits
        for it)."""
        done = asyncio.get_running_loop().run_in_executor(None, work, *args)
        self._cleaning.add(done)
        done.add_done_callback(self._cleaning.discard)
        return done

    def _spares_made(self, done: asyncio.Future) -> None:
        made, kept = done.result() if not done.cancelled() and done.exception() is None else ([], [])
        if self._shut_down:  # made while the starter stopped: nothing will take them
            _rmtree_all(made + [path for _, path in kept])
            return
        self._spare_dirs.extend(made)
        now = time.monotonic()
        for ids, path in kept:
            self._reusable.setdefault(ids, []).append(path)
            self._reusable_used.setdefault(ids, now)  # (its account's may have expired meanwhile)

    def _clean_now(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------ stop
    def stop(self, job: Job, graceful: bool, reason: str) -> None:
        """Stop a job: its kill signal now and SIGKILL after KILLING_TIMEOUT, or SIGKILL now.
        Its successor, if any, first: the claim's next job never follows a job the startd stops."""
        self.cancel_successor(job)
        if job.exit is not None:
            return
        job.stop_reason = job.stop_reason or reason
        if job.suspended:
            self.resume(job)  # a frozen process takes no signal but SIGKILL
        if graceful and self.killing_timeout > 0:
            if job.cgroup is not None:
                # On v2 the job's first process joins its group itself, a moment after it is
                # spawned: signal it by pid too, or a stop in that moment reaches nobody. (It starts
                # no other process before it has joined, so nothing else can be outside the group.)
                _kill_child(job.pid, job.kill_signal)
                job.cgroup.signal_all(job.kill_signal)
            else:
                proctree.signal_group(job.pid, job.kill_signal)
            if job.kill_timer is None:
                job.kill_timer = asyncio.get_running_loop().call_later(self.killing_timeout, self._hard_kill, job)
        else:
            self._hard_kill(job)

    def _hard_kill(self, job: Job) -> None:
        job.kill_timer = None
        if job.exit is None:
            if job.cgroup is not None:
                _kill_child(job.pid, signal.SIGKILL)  # not in its group yet, if it has just started
                job.cgroup.kill()
                return
            proctree.signal_group(job.pid, signal.SIGKILL)
            # members that moved to another process group, or left the session
            proctree.kill_session(job.pid, mark=job.mark, born_after=job.born_after)

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
        the scan finds nothing (processes born after the job ended are a reused session id's)."""
        loop = asyncio.get_running_loop()
        end_ticks = self._finished_sessions.get(job.pid, (proctree.uptime_ticks(), 0.0))[0]
        deadline = time.monotonic() + timeout
        while True:
            left = await loop.run_in_executor(None, proctree.kill_session, job.pid, end_ticks, job.mark, job.born_after)
            if not left or time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ suspend
    def suspend(self, job: Job) -> int:
        """Stop every process of the job where it is (the freezer, or SIGSTOP on the scan path);
        returns how many processes were suspended."""
        if job.exit is not None:
            return 0
        self.cancel_successor(job)  # (a suspended job's exit is the resumed job's, later)
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

    def _signal_session(self, job: Job, sig: int) -> int:
        count = 0
        marks = {job.mark: job.pid} if job.mark else None
        for st in proctree.scan({job.pid}, marks, job.born_after).get(job.pid, []):
            count += proctree.kill_quietly(st.pid, sig)
        return count

    async def shutdown(self) -> None:
        """Kill every job (the startd is going away) and wait until they are reaped."""
        for job in list(self.running.values()):
            self.cancel_successor(job)
        if self._launching:  # a job being spawned now is running (or failed) when this returns
            await asyncio.wait(list(self._launching), timeout=5)
            await asyncio.sleep(0)  # let start_async register what it launched
        jobs = list(self.running.values())
        for job in jobs:
            self.stop(job, graceful=False, reason="shutdown")
        waits = [j.done for j in jobs if j.done is not None]
        if waits:
            await asyncio.wait(waits, timeout=5)
        if self._cleaning:  # its spare directories are in the store, and removed below, once it is done
            await asyncio.wait(list(self._cleaning), timeout=5)
        self._shut_down = True
        self._ready.close()  # nothing is waited for any more
        paths = [path for path, _ in self._to_clean] + self._spare_dirs
        paths += [path for kept in self._reusable.values() for path in kept]
        self._to_clean, self._spare_dirs, self._reusable = [], [], {}
        _rmtree_all(paths)  # the loop may not run the scheduled cleaning any more
        for group in self._idle_groups:
            group.remove()
        self._idle_groups.clear()
        if self._born_in_thread is not None:
            self._born_in_thread.shutdown(wait=False)
            self._born_in_thread = None

    # ------------------------------------------------------------------ monitoring
    async def monitor(self) -> None:
        """Sample every running job's tree: usage, the memory limit, stray processes."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.check_interval)
            now = time.monotonic()
            for sid, (_, forget, _, _) in list(self._finished_sessions.items()):
                if forget < now:
                    del self._finished_sessions[sid]
            self._drop_idle_scratch(now)
            if not self.running and not self._finished_sessions:
                continue
            grouped = [(j, j.cgroup) for j in self.running.values() if j.cgroup is not None]
            groups = await loop.run_in_executor(None, _group_usages, grouped) if grouped else {}
            sessions = {j.pid for j in self.running.values() if j.cgroup is None} | set(self._finished_sessions)
            tracked = [(j.pid, j.mark, j.born_after) for j in self.running.values() if j.mark]
            tracked += [(sid, mark, born) for sid, (_, _, mark, born) in self._finished_sessions.items() if mark]
            marks = {mark: sid for sid, mark, _ in tracked}
            born_after = min((born for _, _, born in tracked), default=0)
            tree = await loop.run_in_executor(None, proctree.scan, sessions, marks, born_after) if sessions else {}
            self._apply(tree, groups)

    def _drop_idle_scratch(self, now: float) -> None:
        """Remove the kept scratch directories of accounts no job of which started for
        KEPT_SCRATCH_IDLE seconds: an idle startd's EXECUTE holds only the few spares."""
        idle = [ids for ids, used in self._reusable_used.items() if now - used > KEPT_SCRATCH_IDLE]
        paths = []
        for ids in idle:
            del self._reusable_used[ids]
            paths += self._reusable.pop(ids, [])
        if paths:
            self._cleaning_round(_rmtree_all, paths)

    def _apply(self, tree: dict[int, list[proctree.ProcStat]],
               groups: dict[str, tuple[cgroups.CgroupUsage, proctree.TreeUsage]] | None = None) -> None:
        now = time.monotonic()
        due: list[Job] = []
        for job in list(self.running.values()):
            if job.exit is not None:
                continue
            if job.cgroup is not None:
                sample = (groups or {}).get(job.key)
                if sample is None:
                    continue
                cg, u = sample
                self._take_group_usage(job, cg)
                if job.memory_exceeded and job.stop_reason is None:
                    log.info("job on %s was OOM-killed in its cgroup (limit %d KiB): stopping it", job.slot,
                             job.memory_limit_kib or 0)
                    self.stop(job, graceful=False, reason="memory")
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
            if (job.memory_limit_kib is not None and self.memory_policy == "hard"
                    and u.rss_kib > job.memory_limit_kib and not job.memory_exceeded):
                log.info("job on %s is over its memory limit (%d KiB > %d KiB): killing it", job.slot, u.rss_kib, job.memory_limit_kib)
                job.memory_exceeded = True
                self.stop(job, graceful=False, reason="memory")
                continue
            if now - job.last_usage_report >= self.usage_interval:
                job.last_usage_report = now
                due.append(job)
        # Descendants that outlived their job's leader (they left its process group or session).
        for sid, (end_ticks, _, _, _) in self._finished_sessions.items():
            for st in tree.get(sid, []):
                if st.marked or st.start_ticks <= end_ticks:
                    proctree.kill_quietly(st.pid, signal.SIGKILL)
        if due and self.on_usage is not None:
            self.on_usage(due)


def _group_usages(grouped: list[tuple[Job, cgroups.JobCgroup]]) -> dict[str, tuple[cgroups.CgroupUsage, proctree.TreeUsage]]:
    """Each job group's counters; where the group has no memory controller, its members' summed
    /proc usage too (their memory is then sampled, as on the scan path)."""
    out = {}
    for job, group in grouped:
        u = group.usage()
        procs = proctree.TreeUsage()
        if "memory" not in group.h.controllers:
            procs = proctree.usage_of([st for pid in group.pids() if (st := proctree.read_stat(pid)) is not None])
        out[job.key] = (u, procs)
    return out


_MASK_WARNED: set[str] = set()  # threads found with signals blocked at a start (logged once)


def _with_no_signal_blocked(popen: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """``popen()`` from a thread with no signal blocked: a child starts with its parent thread's
    signal mask (Popen passes it on), and a job must start with none blocked, as the fast spawn's
    child and HTCondor's starter give it. A mask found set is logged: nothing of the startd blocks
    signals on its threads, so one would be a library's, or a bug."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    if not blocked:
        return popen()
    thread = threading.current_thread().name
    if thread not in _MASK_WARNED:  # once per thread: it would be the same at every start
        _MASK_WARNED.add(thread)
        log.warning("thread %s has signals blocked (%s) at a job's start; its jobs start with none",
                    thread, ", ".join(sorted(str(s) for s in blocked)))
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    try:
        return popen()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _check_executable(path: str) -> None:
    if not os.path.isfile(path):
        raise StartFailed(f"cannot execute {path}: No such file or directory", HOLD_FAILED_TO_CREATE_PROCESS, 2)
    if not os.access(path, os.X_OK):
        raise StartFailed(f"cannot execute {path}: Permission denied", HOLD_FAILED_TO_CREATE_PROCESS, 13)


async def _stopped(pid: int, timeout: float = 30.0) -> int:
    """The wait status once the child has stopped itself (or ended; -1 if it is not ours)."""
    delay = 0.0002
    deadline = time.monotonic() + timeout
    while True:
        try:
            found, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            return -1
        if found or time.monotonic() > deadline:
            return status if found else -1
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.005)


def _into_group(proc: subprocess.Popen, group: cgroups.JobCgroup, executable: str, status: int | None = None) -> None:
    """Wait for the child to stop itself (unless ``status`` says it has), move it into the job's
    group, let it exec the job."""
    if status is None:
        try:
            _, status = os.waitpid(proc.pid, os.WUNTRACED)
        except ChildProcessError:
            status = -1
    if status == -1 or not os.WIFSTOPPED(status):
        if status != -1 and (os.WIFEXITED(status) or os.WIFSIGNALED(status)):
            proc.returncode = status  # reaped here: Popen must not wait for it
        raise StartFailed(f"cannot start {executable}: the starter's shell ended before the job ran",
                          HOLD_FAILED_TO_CREATE_PROCESS)
    try:
        cgroups.move(proc.pid, group.procs_files)
    except OSError as exc:
        proc.kill()
        proc.wait()
        raise StartFailed(f"cannot put the job in its cgroup {group.rel}: {exc.strerror or exc}",
                          HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0) from None
    os.kill(proc.pid, signal.SIGCONT)


def _remove_when_empty(group: cgroups.JobCgroup, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not group.remove() and time.monotonic() < deadline:
        group.kill()
        time.sleep(0.005)


def _recycle(paths: list[tuple[str, _Ids | None]], make: list[str]) -> tuple[list[str], list[tuple[_Ids, str]]]:
    """The cleaning thread's round: each scratch directory emptied and kept for its account's
    next job (`_emptied`), or removed (no ids, or it cannot be made as new); then the spares
    ``make`` made. Returns (spares made, [((uid, gid), directory kept)])."""
    kept = [(ids, path) for path, ids in paths if ids is not None and _emptied(path, *ids)]
    kept_paths = {path for _, path in kept}
    return _rmtree_all([path for path, _ in paths if path not in kept_paths], make), kept


def _emptied(path: str, uid: int, gid: int) -> bool:
    """Make a used scratch directory as a new one for the next job of ``uid``, its owner: empty,
    owned by ``uid``:``gid``, mode 0700, no ACL or extended attribute the last job set on it (a
    default ACL would give someone else the next job's files). Only the same account gets it: a
    process of the last job still alive (without cgroups one can outlive its job) could write
    into any directory of that account anyway. False if it is not that account's directory or
    cannot be made so."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            return False
        with os.scandir(path) as entries:
            for entry in entries:  # usually none
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        if st.st_gid != gid:  # (the job may give it another of its groups)
            os.chown(path, -1, gid, follow_symlinks=False)
        for name in os.listxattr(path, follow_symlinks=False):
            if not name.startswith("security."):  # (the system's labels are not the job's)
                os.removexattr(path, name, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
        with os.scandir(path) as entries:
            return next(entries, None) is None  # (nothing made meanwhile)
    except OSError:
        return False


def _rmtree_all(paths: list[str], make: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    """Remove the scratch directories ``paths``, then make the empty ones ``make`` for the next
    jobs (in this one thread: a mkdir and an rmdir of one parent directory wait on each other);
    returns those made."""
    for path in paths:
        try:
            os.rmdir(path)  # the common case: the job left its scratch directory empty
        except FileNotFoundError:
            pass
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
    made = []
    for path in make:
        try:
            os.mkdir(path, 0o700)
        except OSError:
            break  # the next start makes its own, and says why if it cannot
        made.append(path)
    return made


def _resolve(path: str, iwd: str) -> str:
    return path if os.path.isabs(path) else os.path.join(iwd, path)


def _str(ad: Mapping[str, Any], name: str) -> str | None:
    value = lookup(ad, name)
    return value if isinstance(value, str) else None


def _kill_child(pid: int, sig: int) -> None:
    """Signal the job's first process, our unreaped child (so its pid cannot have been reused)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _kill_signal(ad: Mapping[str, Any]) -> int:
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
