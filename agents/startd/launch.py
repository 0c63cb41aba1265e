"""A job's launch: everything from its account to its exec, as a child process of the startd.

No shell and no process per job on the startd's side: the job is spawned directly (Cmd and its
arguments, Iwd, environment, In/Out/Err, as the account the run-as policy picks) as the leader of
its own session.

The job's first process comes from the fast spawn where it is built (agents/startd/spawn.py): on
x86-64 and aarch64 its child joins the job's groups, takes the account and execs beside the
startd, whose loop goes on meanwhile and learns the outcome from the child's pipe (`begin_beside`;
its outcome taken by `outcome`). Without it (no C compiler at install, or STARTER_FAST_SPAWN
false) ``subprocess.Popen`` starts it, on the loop.

In a cgroup (agents/startd/jobcgroups.py) the job runs from its first instruction: the fast
spawn's child joins before its exec; with Popen, on cgroup v1 it is born there (forked by a
thread that joins the group for that moment, `cgroups.JobCgroup.thread_joined`), on v2 its first
process is a shell that joins before it execs the job. Without a cgroup its processes carry a
mark in their environment that the process scan finds them by.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gridbus.agents.startd import cgroups, containers, proctree, spawn
from gridbus.agents.startd.accounts import Account, RunAsRefused, may_access
from gridbus.agents.startd.arguments import ArgumentError, job_argv, job_environment, lookup
from gridbus.agents.startd.job import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    HOLD_IWD,
    HOLD_UNABLE_TO_OPEN_INPUT,
    HOLD_UNABLE_TO_OPEN_OUTPUT,
    Beside,
    Job,
    Prepared,
    StarterKnobs,
    StartFailed,
    ad_str,
    next_seq,
    resolve,
    settle,
)
from gridbus.agents.startd.jobcgroups import JobCgroups, remove_when_empty
from gridbus.agents.startd.readyfds import ReadyFds
from gridbus.agents.startd.scratch import ScratchDirs
from gridbus.classad.values import is_number

log = logging.getLogger("gridbus.startd.starter")

Process = subprocess.Popen | spawn.Child

# Without the fast spawn (agents/startd/spawn.py, where its extension is built), on cgroup v2
# (one tree: a thread cannot join a group alone, see `Launcher._born_in` for v1) the job's first
# process is a shell that joins the job's cgroup, then becomes the job ("$0" is the job's
# executable, "$@" its arguments): the job's first instruction runs inside the group.
# Running as root, the shell writes its own pid into the group's cgroup.procs files; if a write
# fails it never execs the job, leaves a mark in the scratch directory and exits JOIN_FAILED.
# Running as another account (which may not write there), it stops itself, and the startd moves
# it and continues it (one more round: a wait for the stop, the writes and SIGCONT on the startd).
STARTER_SHELL = "/bin/sh"
STOP_THEN_EXEC = 'kill -STOP $$; exec "$0" "$@"'
JOIN_THEN_EXEC = '{{ {join}; }} 2>/dev/null && exec "$0" "$@"; : >{mark}; exit {code}'
JOIN_FAILED = 125
JOIN_FAILED_MARK = ".gridbus-cgroup-join-failed"

NO_TOOL = "this machine has no Docker-compatible tool (DOCKER) to run the job's container"


def environment(scratch: str, slot: str, env_extra: Mapping[str, str], job_env: Mapping[str, str]) -> dict[str, str]:
    """The job's whole environment: what HTCondor's starter sets (the scratch directory, the
    slot), then what the startd adds for the slot (``env_extra``), then the job's own."""
    return {
        "_CONDOR_SCRATCH_DIR": scratch,
        "_CONDOR_SLOT": slot.split("@", 1)[0],
        "TMPDIR": scratch,
        "TMP": scratch,
        "TEMP": scratch,
        "BATCH_SYSTEM": "HTCondor",
        **env_extra,
        **job_env,
    }


class Launcher:
    """Prepares and spawns the jobs of one starter (watching them is agents/startd/reaping.py's)."""

    def __init__(self, knobs: StarterKnobs, scratch: ScratchDirs, groups: JobCgroups, ready: ReadyFds,
                 *, fast_spawn: bool, tool: containers.ContainerTool | None = None):
        self.knobs = knobs
        self.containers = tool  # DOCKER, where found
        self.scratch = scratch
        self.groups = groups
        self.ready = ready  # the spawns' pipes, watched on the loop
        self.fast_spawn = fast_spawn  # STARTER_FAST_SPAWN, where the extension is built
        self.launching: set[asyncio.Future] = set()  # the fast spawn's children not exec'd yet
        # The thread that forks cgroup v1 jobs for the main thread (see `_born_in`).
        self._born_in_thread: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ the whole spawn
    def launch(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
               memory_limit_mib: int | None = None, wait_stopped: bool = True, sandbox: str | None = None,
               ) -> tuple[Process, Prepared]:
        """Everything from the account to the job's exec, waited for. ``wait_stopped=False``
        leaves a cgroup job's stopped first process to the caller (`joins_stopped`)."""
        prep = self.prepare(ad, slot, env_extra, memory_limit_mib, sandbox)
        if self.fast_spawn:  # born in its groups, as its account; waited for until its exec
            proc = self.spawned(prep, lambda: self._begin(prep).result())
        else:
            proc = self.spawned(prep, lambda: self._popen(prep), wait_stopped)
        return proc, prep

    async def into_group_stopped(self, proc: Process, prep: Prepared, executable: str) -> None:
        """With Popen, a cgroup job of another account: its stopped first process moved into its
        group, the wait for its stop awaited, not blocked on. Nothing of it runs on if that fails."""
        if not self.joins_stopped(prep.spawn_group, prep.spawn_account):
            return
        assert prep.spawn_group is not None and isinstance(proc, subprocess.Popen)
        try:
            _into_group(proc, prep.spawn_group, executable, await _stopped(proc.pid))
        except BaseException:  # StartFailed, or cancelled: nothing of it may run on
            self.stop_unwatched(proc, prep.scratch, prep.group)
            raise

    # ------------------------------------------------------------------ beside the startd
    def begin_beside(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                     memory_limit_mib: int | None, sandbox: str | None = None, *, after: Job | None = None) -> Beside:
        """The first half of a start by the fast spawn, done at once (see `Starter.begin_beside`)."""
        prep = self.prepare(ad, slot, env_extra, memory_limit_mib, sandbox)
        launching = self.spawned(prep, lambda: self._begin(prep, after), last=False)
        known = asyncio.get_running_loop().create_future()
        beside = Beside(prep, launching, known)
        self.ready.watch(launching.fileno(), settle, beside)
        if after is None:
            self.launching.add(known)
            known.add_done_callback(self.launching.discard)
        else:  # (a successor's outcome waits for its predecessor: no stop waits for it)
            after.successor = beside
            beside.again = lambda: self.begin_beside(ad, slot, env_extra, memory_limit_mib, sandbox)
        return beside

    def outcome(self, beside: Beside) -> Process | Beside:
        """The process of a start whose outcome is known; StartFailed if it could not start; or,
        for a successor that failed before its wait, its start made anew."""
        try:
            return self.spawned(beside.prep, beside.launching.result)
        except StartFailed:
            if beside.again is None or beside.launching.failed_stage == "exec":
                raise
            # A successor that failed before its wait, at a step that could have gone otherwise
            # after the job before it (an Iwd that job makes, say): started anew now, as it would
            # have been at that exit without spawning ahead, where it runs or fails for good.
            return beside.again()

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
        kill_child(beside.launching.pid, signal.SIGKILL)
        self.abandon(beside)
        # Not exec'd, and gone only once its pipe says so: a stop waits for it as for any start
        # under way (its pipe is read no more once the starter has shut down: on a loaded machine
        # a successor killed by the startd's stop stayed an unreaped child, its scratch left behind).
        if not beside.known.done():
            self.launching.add(beside.known)
            beside.known.add_done_callback(self.launching.discard)

    def abandon(self, beside: Beside) -> None:
        """A start begun by `begin_beside` that nobody will finish: once its outcome is known,
        what it started is stopped and cleaned up."""
        beside.known.add_done_callback(lambda _: self._abandon(beside.prep, beside.launching))

    def _abandon(self, prep: Prepared, launching: spawn.Launching) -> None:
        try:
            proc = self.spawned(prep, launching.result)
        except StartFailed:  # it never ran, and is cleaned up
            return
        self.stop_unwatched(proc, prep.scratch, prep.group)

    @staticmethod
    def _begin(prep: Prepared, after: Job | None = None) -> spawn.Launching:
        """The fast spawn of a prepared job (its outcome taken later, `spawn.Launching.result`)."""
        return spawn.begin(prep.argv, executable=prep.executable, cwd=prep.iwd, env=prep.env, fds=prep.streams,
                           account=prep.spawn_account, group=prep.spawn_group,
                           after=after.pidfd if after is not None else None)

    # ------------------------------------------------------------------ before the spawn
    def prepare(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                memory_limit_mib: int | None, sandbox: str | None) -> Prepared:
        """Everything before the spawn: the account, argv and environment, the scratch directory,
        the standard streams opened as the job's account, its cgroup. Raises StartFailed with
        nothing of it left behind."""
        try:
            account = self.knobs.policy.account_for(ad_str(ad, "Owner"))
        except RunAsRefused as exc:
            raise StartFailed(exc.reason, exc.code) from None
        cmd = ad_str(ad, "Cmd") or ""
        in_container = containers.wanted(ad)
        if not cmd and not in_container:  # (a container job without one runs its image's command)
            raise StartFailed("the job ad has no Cmd: the starter does not know what to run", HOLD_FAILED_TO_CREATE_PROCESS)
        try:
            args = job_argv(ad)
            job_env = job_environment(ad)
        except ArgumentError as exc:
            raise StartFailed(f"cannot parse the job's arguments or environment: {exc}", HOLD_FAILED_TO_CREATE_PROCESS) from None
        seq = next_seq()
        scratch = sandbox or self.scratch.path(seq)
        try:
            if sandbox is None:
                scratch = self.scratch.take(account, scratch)
        except OSError as exc:
            raise StartFailed(f"cannot make the scratch directory {scratch}: {exc.strerror}", HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0) from None
        prep = Prepared(account=account, scratch=scratch)
        try:
            iwd = ad_str(ad, "Iwd") or scratch
            if not os.path.isabs(iwd):
                raise StartFailed(f"Iwd {iwd!r} is not an absolute path", HOLD_IWD)
            prep.iwd = iwd
            prep.executable = executable = cmd if not cmd or os.path.isabs(cmd) else os.path.join(iwd, cmd)
            stdin = self._open(ad, "In", iwd, account, write=False, fds=prep.fds)
            stdout = self._open(ad, "Out", iwd, account, write=True, fds=prep.fds)
            err_path = ad_str(ad, "Err")
            out_path = ad_str(ad, "Out")
            if err_path and out_path and resolve(err_path, iwd) == resolve(out_path, iwd):
                stderr = stdout  # one file for both, so the two streams interleave in order
            else:
                stderr = self._open(ad, "Err", iwd, account, write=True, fds=prep.fds)
            prep.streams = (stdin, stdout, stderr)
            prep.env = environment(scratch, slot, env_extra, job_env)
            prep.argv = [executable, *args] if executable else args
            if self.groups.hierarchy is not None:
                prep.group = self.groups.make(ad, f"job_{os.getpid()}_{seq}", memory_limit_mib)
            if prep.group is None:  # found by the scan: a descendant that leaves the session, by its mark
                prep.mark = prep.env[proctree.MARK_VAR] = proctree.new_mark()
                prep.born_after = proctree.uptime_ticks()
            if in_container:
                self._in_container(prep, ad, slot, memory_limit_mib, seq)
        except StartFailed:
            self._unprepare(prep)
            raise
        return prep

    def _in_container(self, prep: Prepared, ad: Mapping[str, Any], slot: str, memory_limit_mib: int | None,
                      seq: int) -> None:
        """A container job: its first process is the tool's run of the job prepared so far, as
        the startd's account and in the startd's groups (its memory and cpu are not the job's);
        the container's groups go below the job's."""
        tool = self.containers
        if tool is None:
            raise StartFailed(NO_TOOL, HOLD_FAILED_TO_CREATE_PROCESS)
        image = containers.image_of(ad)
        prep.container = tool.name_for(ad, slot, seq)
        knobs = self.knobs
        limit = memory_limit_mib if knobs.enforce_memory and knobs.memory_policy == "hard" else None
        cpus = lookup(ad, "RequestCpus")
        prep.argv = tool.run_argv(prep.container, image, prep, ad, prep.argv, limit,
                                  float(cpus) if is_number(cpus) else 1.0)
        prep.executable = tool.command
        prep.env = dict(os.environ)  # the tool's own; the job's goes in by --env
        prep.runs_as = containers.startd_account()
        if prep.group is not None:
            prep.group.nested = True
            try:
                prep.group.watch_oom()
            except OSError as exc:
                raise StartFailed(f"cannot watch the job's cgroup {prep.group.rel} for its memory: "
                                  f"{exc.strerror or exc}", HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0) from None

    def _unprepare(self, prep: Prepared) -> None:
        """What `prepare` made, undone: the job did not start."""
        self.scratch.remove_now(prep.scratch)
        if prep.group is not None:
            prep.group.kill()
            prep.group.remove()
        self._close_streams(prep)

    @staticmethod
    def _close_streams(prep: Prepared) -> None:
        fds, prep.fds = prep.fds, []
        for fd in fds:
            os.close(fd)

    def _open(self, ad: Mapping[str, Any], attr: str, iwd: str, account: Account, *, write: bool, fds: list[int]) -> int:
        path = ad_str(ad, attr)
        if not path:
            return subprocess.DEVNULL  # Popen keeps one /dev/null open for every job
        target = resolve(path, iwd)
        if target == os.devnull:  # the schedd's default Out and Err: the /dev/null kept open
            return subprocess.DEVNULL
        code = HOLD_UNABLE_TO_OPEN_OUTPUT if write else HOLD_UNABLE_TO_OPEN_INPUT
        if not may_access(target, account, write):
            owner = ad_str(ad, "Owner")
            # A root-started personal pool runs root's jobs as nobody: say so, or the refusal puzzles.
            why = f" (jobs of {owner} run as {account.name} on this machine)" if owner and owner != account.name else ""
            raise StartFailed(f"{account.name} may not {'write' if write else 'read'} {attr} file {target}{why}", code, 13)
        try:
            if write:
                existed = os.path.exists(target)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | output_mode(ad) | os.O_CLOEXEC, 0o644)
                if account.switch and not existed:
                    os.fchown(fd, account.uid, account.gid)
            else:
                fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise StartFailed(f"cannot open {attr} file {target}: {exc.strerror}", code, exc.errno or 0) from None
        fds.append(fd)
        return fd

    # ------------------------------------------------------------------ the spawn
    def spawned(self, prep: Prepared, step: Callable[[], Any], wait_stopped: bool = True, last: bool = True) -> Any:
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
            if last and wait_stopped and self.joins_stopped(prep.spawn_group, prep.spawn_account):
                assert prep.spawn_group is not None
                _into_group(proc, prep.spawn_group, prep.executable)
        except StartFailed:
            self._unprepare(prep)
            raise
        if last:
            self._close_streams(prep)
        return proc

    def _popen(self, prep: Prepared) -> subprocess.Popen:
        """The job started by ``subprocess.Popen`` (without the fast spawn)."""
        argv, account, group = prep.argv, prep.spawn_account, prep.spawn_group
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
                                               mark=shlex.quote(os.path.join(prep.scratch, JOIN_FAILED_MARK)))
            argv = [STARTER_SHELL, "-c", script, *argv]
        popen = functools.partial(
            subprocess.Popen,
            argv,
            executable=argv[0],
            cwd=prep.iwd,
            env=prep.env,
            stdin=prep.streams[0],
            stdout=prep.streams[1],
            stderr=prep.streams[2],
            start_new_session=True,  # its own session and process group: one kill reaches them all
            close_fds=True,
            **switch,
        )
        popen = functools.partial(_with_no_signal_blocked, popen)
        # v1: forked by a thread in the job's groups, the job is born in them.
        return popen() if group is None or group.version == 2 else self._born_in(group, popen)

    def joins_stopped(self, group: cgroups.JobCgroup | None, account: Account) -> bool:
        """Whether the job's first process stops itself for the startd to move it into its group:
        Popen, a v2 group and a job of another account (which may not write the group's files
        itself; the fast spawn's child joins before it takes the account)."""
        return not self.fast_spawn and group is not None and group.version == 2 and account.switch

    def _born_in(self, group: cgroups.JobCgroup, popen: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        """``popen()`` by a thread that is in ``group`` meanwhile (cgroup v1), so the job is born
        there: this thread (the startd's loop runs on one of its own, see gridbus/agent/runner.py;
        or a spawner thread), else, on the main thread, which may not join (see
        `cgroups.JobCgroup.thread_joined`), the launcher's own thread (a cross-thread round per
        job: in-process uses, tests and benchmarks)."""
        if threading.current_thread() is threading.main_thread():
            if self._born_in_thread is None:
                self._born_in_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cgroup-spawner")
            return self._born_in_thread.submit(self._born_in, group, popen).result()
        with group.thread_joined():
            return popen()

    def stop_unwatched(self, proc: Process, scratch: str, group: cgroups.JobCgroup | None) -> None:
        """A job started for a start that was cancelled meanwhile: killed, reaped, cleaned up."""
        proctree.signal_group(proc.pid, signal.SIGKILL)
        if group is not None:
            group.kill()
        proc.wait()  # a SIGKILLed child: at once
        self.scratch.remove_now(scratch)
        if group is not None:
            remove_when_empty(group, 5.0)

    def shutdown(self) -> None:
        if self._born_in_thread is not None:
            self._born_in_thread.shutdown(wait=False)
            self._born_in_thread = None


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


def kill_child(pid: int, sig: int) -> None:
    """Signal the job's first process, our unreaped child (so its pid cannot have been reused)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def output_mode(ad: Mapping[str, Any]) -> int:
    """How Out and Err are opened: appended to for a self-checkpointing job (WantFTOnCheckpoint) or
    one with EraseOutputAndErrorOnRestart false, as HTCondor's starter does (a run restarted from
    a checkpoint goes on writing the output its checkpoint brought back), else truncated."""
    want = ad.get("WantFTOnCheckpoint")
    erase = ad.get("EraseOutputAndErrorOnRestart")
    if want is True or str(want).lower() == "true" or erase is False or str(erase).lower() == "false":
        return os.O_APPEND
    return os.O_TRUNC
