"""The scheduler universe: jobs the schedd runs itself, on the submit host (JobUniverse 7; the local
universe, 12, the same way).

HTCondor runs DAGMan this way: never matched, started by the schedd as the job's Owner, under the
account the owner's shadow runs as (the Unix account of that name when the schedd is root, else
the run-as knobs': a personal pool's schedd runs them as its own user, one started by root as
STARTER_UNPRIVILEGED_USER, as its other jobs) (or, with SCHEDD_RUN_LOCAL_JOBS_AS_SELF, its own
when the Owner has no account here), in the job's
Iwd with its Environment, stdin/stdout/stderr from In/Out/Err. ``CONDOR_ID`` in the
environment names the job and ``GRIDBUS_SCHEDD`` the schedd, so a DAGMan submits its nodes here.
Its exit goes through the schedd's usual exit path (OnExitRemove decides whether it leaves the
queue or is started again: a DAGMan killed by a signal comes back in recovery).

Removing a job stops it with its RemoveKillSig (DAGMan's is SIGUSR1: remove your nodes), holding
with its KillSig (default SIGTERM); a job that ignores it is killed after SCHEDD_LOCAL_KILL_TIMEOUT
seconds. Removing one removes the jobs whose DAGManJobId is its cluster (a DAGMan's nodes), and
those its OtherJobRemoveRequirements names.

A schedd that dies (SIGKILL) leaves its running jobs behind: a DAGMan lives on, orphaned, while the
restarted schedd finds the job Running with no process and starts it again. Two DAGMans on one DAG
would each run it (a DAGMan that finished the DAG and one started after would run it all again),
so each running job's process is recorded under the spool (``local_jobs/<cluster>.<proc>``: its
pid and start time), and a schedd at its start kills the session of each one still alive, as
HTCondor's procd kills a dead schedd's job family; the DAGMan started again recovers from its
nodes log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridbus.agents.schedd.claims import Spawn
from gridbus.agents.schedd.jobattrs import IDLE, LOCAL_UNIVERSES, REMOVED, runs_on_submit_host
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.startd import proctree
from gridbus.dag.dagmanjob import current_dagman_argv
from gridbus.jobargs import ArgumentError, job_argv, job_environment

if TYPE_CHECKING:
    from gridbus.agents.schedd.jobstate import JobState
    from gridbus.agents.startd.accounts import Account

log = logging.getLogger("gridbus.schedd.local")

def _signal(value: Any, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        name = value.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
        found = getattr(signal, name, None)
        if isinstance(found, int):
            return int(found)
    return default


class LocalUniverse:
    def __init__(self, address: str, queue: JobQueue, state: JobState, spawn: Spawn, settings: ScheddSettings,
                 account_for: Callable[[str], Account] | None = None):
        from gridbus.agents.startd.accounts import RunAsPolicy

        self.address = address
        # The owner's account: the owner shadows' (`owner_shadow.for_schedd`), so a job of the
        # schedd's runs where its user logs are written.
        self.account_for = account_for or RunAsPolicy(allow_runas_owner=True).account_for
        self.queue = queue
        self.state = state
        self._spawn = spawn
        self.settings = settings
        self._jobs: dict[tuple[int, int], asyncio.subprocess.Process] = {}
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ a previous run's processes
    def _record_dir(self) -> Path:
        return Path(self.settings.spool) / "local_jobs"

    def _record(self, key: tuple[int, int], pid: int) -> None:
        st = proctree.read_stat(pid)
        if st is None:
            return
        directory = self._record_dir()
        directory.mkdir(exist_ok=True)
        (directory / f"{key[0]}.{key[1]}").write_text(f"{pid} {st.start_ticks}\n")

    def _forget(self, key: tuple[int, int]) -> None:
        (self._record_dir() / f"{key[0]}.{key[1]}").unlink(missing_ok=True)

    def kill_leftovers(self) -> int:
        """At the start, before any job is started again: kill the sessions of the jobs a previous
        run of this schedd started and left running (it died); how many were alive."""
        directory = self._record_dir()
        if not directory.is_dir():
            return 0
        killed = 0
        for record in directory.iterdir():
            try:
                pid, ticks = (int(x) for x in record.read_text().split())
            except (OSError, ValueError):
                record.unlink(missing_ok=True)
                continue
            st = proctree.read_stat(pid)
            # The leader gone, its session may live on (a PRE script); a pid reused since leads
            # a session of another start time, which is left alone.
            if st is None or st.start_ticks == ticks:
                found = proctree.kill_session(pid)
                if found:
                    killed += 1
                    log.warning("job %s: killed the %d process(es) a previous run of the schedd left running",
                                record.name, found)
            record.unlink(missing_ok=True)
        return killed

    def stop_all(self) -> None:
        """At the schedd's stop. The jobs stay Running in the queue; a restarted schedd finds no
        process, puts them back to Idle and starts them again (DAGMan then recovers from its
        nodes log)."""
        for proc in list(self._jobs.values()):
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Start the idle jobs this schedd runs itself, at each wake and every half second."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), 0.5)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._start_local_jobs()
            except Exception:
                log.exception("starting scheduler universe jobs failed")

    async def _start_local_jobs(self) -> None:
        # The universe is a cluster attribute: a queue of 40,000 vanilla jobs is not walked twice
        # a second when no cluster with idle jobs is of a local universe.
        if not any(c.idle and c.ad.get("JobUniverse") in LOCAL_UNIVERSES for c in self.queue.clusters.values()):
            return
        for p in list(self.queue.idle_procs(None)):
            if self.settings.max_local_jobs and len(self._jobs) >= self.settings.max_local_jobs:
                return
            if p.status != IDLE or (p.cluster.id, p.id) in self._jobs:
                continue
            if p.get("JobUniverse") not in LOCAL_UNIVERSES:  # most idle jobs: never build their ads
                continue
            ad = self.queue.ad(p)
            if runs_on_submit_host(ad):
                await self._start_local(p, ad)

    async def _start_local(self, p: Proc, ad: dict[str, Any]) -> None:
        from gridbus.agents.startd.accounts import RunAsRefused

        key = (p.cluster.id, p.id)
        try:
            try:
                account: Account | None = self.account_for(str(ad.get("Owner") or ""))
            except RunAsRefused:
                if not self.settings.local_jobs_as_self:
                    raise
                account = None  # SCHEDD_RUN_LOCAL_JOBS_AS_SELF: as the schedd's own user
            iwd = str(ad.get("Iwd") or "/")
            cmd = str(ad.get("Cmd") or "")
            # (a DAGMan job queued by an earlier version names DAGMan's module as it was then)
            argv = current_dagman_argv([cmd if os.path.isabs(cmd) else os.path.join(iwd, cmd), *job_argv(ad)])
            env = {"PATH": "/usr/bin:/bin", **job_environment(ad), "CONDOR_ID": f"{key[0]}.{key[1]}",
                   "GRIDBUS_SCHEDD": self.address}
            files: list[Any] = []
            try:
                for name, write in (("In", False), ("Out", True), ("Err", True)):
                    files.append(self._local_file(ad, name, iwd, write, account))
            except OSError:
                for f in files:
                    f.close()
                raise
        except (RunAsRefused, ArgumentError, OSError) as exc:
            self._local_hold(p, f"Cannot start scheduler universe job: {exc}")
            return
        extra: dict[str, Any] = {}
        if account is not None and account.switch:
            extra = {"user": account.uid, "group": account.gid, "extra_groups": list(account.groups)}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=iwd, env=env, stdin=files[0], stdout=files[1], stderr=files[2],
                start_new_session=True, **extra)
        except OSError as exc:
            self._local_hold(p, f"Cannot start scheduler universe job {argv[0]}: {exc.strerror or exc}")
            return
        finally:
            for f in files:
                f.close()
        self._jobs[key] = proc
        self._record(key, proc.pid)
        await self.state.job_started(key[0], key[1], remote_host=self.address, slot="", claim_id="")
        self._spawn(self._wait_local(key, proc), f"local-{key[0]}.{key[1]}")

    @staticmethod
    def _local_file(ad: dict[str, Any], attr: str, iwd: str, write: bool, account: Account | None) -> Any:
        """The job's In, Out or Err, opened by the schedd for it: only where the job's account may
        open it itself (a root schedd must not append a user's job's output to a file of root's),
        and a file it makes is the account's, as the starter does."""
        from gridbus.agents.startd.accounts import may_access

        path = ad.get(attr)
        if not isinstance(path, str) or not path:
            path = os.devnull
        path = path if os.path.isabs(path) else os.path.join(iwd, path)
        if account is not None and account.switch and not may_access(path, account, write):
            raise PermissionError(f"{account.name} may not {'write' if write else 'read'} {attr} file {path}")
        existed = os.path.exists(path)
        f = open(path, "ab" if write else "rb")  # noqa: SIM115 (handed to the child, closed after)
        if write and not existed and account is not None and account.switch:
            try:
                os.fchown(f.fileno(), account.uid, account.gid)
            except OSError:
                f.close()
                raise
        return f

    def _local_hold(self, p: Proc, reason: str) -> None:
        from gridbus.agents.schedd.jobattrs import HoldCode

        log.warning("%d.%d: %s", p.cluster.id, p.id, reason)
        self.state.hold(p, reason, int(HoldCode.UNSPECIFIED), 0, None, time.time())
        self.state.commits.soon()

    async def _wait_local(self, key: tuple[int, int], proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        self._jobs.pop(key, None)
        self._forget(key)
        report: dict[str, Any] = {"Time": time.time()}
        if code < 0:
            report.update({"ExitBySignal": True, "ExitSignal": -code})
        else:
            report["ExitCode"] = code
        await self.state.job_exited(key[0], key[1], report)
        self.wake()  # a job put back to Idle (OnExitRemove false) starts again

    # ------------------------------------------------------------------ Hold / Remove
    async def stop(self, cluster: int, proc: int) -> bool:
        """Stop a job this schedd runs itself (Hold, Remove); False if it runs none such."""
        running = self._jobs.get((cluster, proc))
        if running is None:
            return False
        p = self.queue.proc(cluster, proc)
        ad = self.queue.ad(p) if p is not None else {}
        removing = p is not None and p.status == REMOVED
        sig = _signal(ad.get("RemoveKillSig") if removing else None, _signal(ad.get("KillSig"), signal.SIGTERM))
        try:
            running.send_signal(sig)
            await asyncio.wait_for(running.wait(), self.settings.local_kill_timeout)
        except ProcessLookupError:
            pass
        except TimeoutError:
            try:
                os.killpg(running.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return True
