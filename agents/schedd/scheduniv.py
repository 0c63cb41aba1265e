"""The scheduler universe: jobs the schedd runs itself, on the submit host (JobUniverse 7; the local
universe, 12, the same way).

HTCondor runs DAGMan this way: never matched, started by the schedd as the job's Owner (the Unix
account of that name when the schedd is root; a personal pool's schedd runs them as its own user),
(or, with SCHEDD_RUN_LOCAL_JOBS_AS_SELF, its own when the Owner has no account here), in the job's
Iwd with its Environment, stdin/stdout/stderr from In/Out/Err. ``CONDOR_ID`` in the
environment names the job and ``GRIDBUS_SCHEDD`` the schedd, so a DAGMan submits its nodes here.
Its exit goes through the schedd's usual exit path (OnExitRemove decides whether it leaves the
queue or is started again: a DAGMan killed by a signal comes back in recovery).

Removing a job stops it with its RemoveKillSig (DAGMan's is SIGUSR1: remove your nodes), holding
with its KillSig (default SIGTERM); a job that ignores it is killed after SCHEDD_LOCAL_KILL_TIMEOUT
seconds. Removing one removes the jobs whose DAGManJobId is its cluster (a DAGMan's nodes), and
those its OtherJobRemoveRequirements names.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from gridbus.agents.schedd.jobattrs import IDLE, REMOVED
from gridbus.agents.schedd.jobqueue import Proc
from gridbus.agents.schedd.parts import ScheddParts
from gridbus.agents.schedd.queries import compile_constraint
from gridbus.config import knob
from gridbus.jobargs import ArgumentError, job_argv, job_environment

LOCAL_UNIVERSES = frozenset({7, 12})  # scheduler, local

knob("SCHEDD_MAX_SCHEDULER_JOBS", 200, "scheduler/local universe jobs the schedd runs at once (0: no limit)")
knob("SCHEDD_RUN_LOCAL_JOBS_AS_SELF", False,
     "a root schedd runs scheduler universe jobs whose Owner has no account here as its own user "
     "(a personal pool run as root); otherwise they are held")
knob("SCHEDD_LOCAL_KILL_TIMEOUT", 10.0, "seconds a scheduler universe job has to exit after its kill signal")


def runs_on_submit_host(ad: dict[str, Any]) -> bool:
    """True for jobs the schedd runs itself: never offered to the negotiator or a claim."""
    return ad.get("JobUniverse") in LOCAL_UNIVERSES


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


class SchedulerUniverseMixin(ScheddParts):
    """Mixed in before ShadowMixin: its stop_running_job comes first for the jobs it runs."""

    def _local_init(self) -> None:
        if getattr(self, "_local_jobs", None) is None:
            from gridbus.config import Config

            cfg = Config.load(daemon="schedd")
            self._local_jobs: dict[tuple[int, int], asyncio.subprocess.Process] = {}
            self._local_max = int(cfg.get("SCHEDD_MAX_SCHEDULER_JOBS"))
            self._local_kill_timeout = float(cfg.get("SCHEDD_LOCAL_KILL_TIMEOUT"))
            self._local_as_self = bool(cfg.get("SCHEDD_RUN_LOCAL_JOBS_AS_SELF"))
            self._local_wake = asyncio.Event()

    async def on_start(self) -> None:
        await super().on_start()  # type: ignore[misc]
        self._local_init()
        self.spawn(self._local_loop(), "scheduler-universe")  # type: ignore[attr-defined]

    async def on_stop(self) -> None:
        # The jobs stay Running in the queue; a restarted schedd finds no process, puts them back
        # to Idle and starts them again (DAGMan then recovers from its nodes log).
        for proc in list(getattr(self, "_local_jobs", {}).values()):
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        await super().on_stop()  # type: ignore[misc]

    def wake_local(self) -> None:
        if getattr(self, "_local_wake", None) is not None:
            self._local_wake.set()

    async def _local_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._local_wake.wait(), 0.5)
            except TimeoutError:
                pass
            self._local_wake.clear()
            try:
                await self._start_local_jobs()
            except Exception:
                self.log.exception("starting scheduler universe jobs failed")

    async def _start_local_jobs(self) -> None:
        for p in list(self.queue.idle_procs(None)):
            if self._local_max and len(self._local_jobs) >= self._local_max:
                return
            if p.status != IDLE or (p.cluster.id, p.id) in self._local_jobs:
                continue
            ad = self.queue.ad(p)
            if runs_on_submit_host(ad):
                await self._start_local(p, ad)

    async def _start_local(self, p: Proc, ad: dict[str, Any]) -> None:
        from gridbus.agents.startd.accounts import RunAsPolicy, RunAsRefused

        key = (p.cluster.id, p.id)
        try:
            try:
                account = RunAsPolicy(allow_runas_owner=True).account_for(str(ad.get("Owner") or ""))
            except RunAsRefused:
                if not self._local_as_self:
                    raise
                account = None  # SCHEDD_RUN_LOCAL_JOBS_AS_SELF: as the schedd's own user
            iwd = str(ad.get("Iwd") or "/")
            cmd = str(ad.get("Cmd") or "")
            argv = [cmd if os.path.isabs(cmd) else os.path.join(iwd, cmd), *job_argv(ad)]
            env = {"PATH": "/usr/bin:/bin", **job_environment(ad), "CONDOR_ID": f"{key[0]}.{key[1]}",
                   "GRIDBUS_SCHEDD": self.address}
            files = [self._local_file(ad, name, iwd, write) for name, write in
                     (("In", False), ("Out", True), ("Err", True))]
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
        self._local_jobs[key] = proc
        await self.job_started(key[0], key[1], remote_host=self.address, slot="", claim_id="")  # type: ignore[attr-defined]
        self.spawn(self._wait_local(key, proc), f"local-{key[0]}.{key[1]}")  # type: ignore[attr-defined]

    @staticmethod
    def _local_file(ad: dict[str, Any], attr: str, iwd: str, write: bool) -> Any:
        path = ad.get(attr)
        if not isinstance(path, str) or not path:
            path = os.devnull
        path = path if os.path.isabs(path) else os.path.join(iwd, path)
        return open(path, "ab" if write else "rb")  # noqa: SIM115 (handed to the child, closed after)

    def _local_hold(self, p: Proc, reason: str) -> None:
        from gridbus.agents.schedd.jobattrs import HoldCode

        self.log.warning("%d.%d: %s", p.cluster.id, p.id, reason)
        self._hold(p, reason, int(HoldCode.UNSPECIFIED), 0, None, time.time())  # type: ignore[attr-defined]
        self.commit_soon()  # type: ignore[attr-defined]

    async def _wait_local(self, key: tuple[int, int], proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        self._local_jobs.pop(key, None)
        report: dict[str, Any] = {"Time": time.time()}
        if code < 0:
            report.update({"ExitBySignal": True, "ExitSignal": -code})
        else:
            report["ExitCode"] = code
        await self.job_exited(key[0], key[1], report)  # type: ignore[attr-defined]
        self.wake_local()  # a job put back to Idle (OnExitRemove false) starts again

    # ------------------------------------------------------------------ Hold / Remove
    async def stop_running_job(self, cluster: int, proc: int) -> bool:
        self._local_init()
        running = self._local_jobs.get((cluster, proc))
        if running is None:
            return await super().stop_running_job(cluster, proc)  # type: ignore[misc]
        p = self.queue.proc(cluster, proc)
        ad = self.queue.ad(p) if p is not None else {}
        removing = p is not None and p.status == REMOVED
        sig = _signal(ad.get("RemoveKillSig") if removing else None, _signal(ad.get("KillSig"), signal.SIGTERM))
        try:
            running.send_signal(sig)
            await asyncio.wait_for(running.wait(), self._local_kill_timeout)
        except ProcessLookupError:
            pass
        except TimeoutError:
            try:
                os.killpg(running.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return True

    def _remove_job(self, p: Proc, reason: str, now: float, stops: list[Proc]) -> None:
        super()._remove_job(p, reason, now, stops)  # type: ignore[misc]
        ad = self.queue.ad(p)
        if not runs_on_submit_host(ad):
            return
        # The jobs a scheduler universe job (DAGMan) submitted go with it: those whose DAGManJobId
        # is its cluster, and those its OtherJobRemoveRequirements names.
        tests = [lambda other: other.get("DAGManJobId") == p.cluster.id]
        extra = ad.get("OtherJobRemoveRequirements")
        if isinstance(extra, str) and extra.strip():
            try:
                tests.append(compile_constraint(extra))
            except Exception:
                self.log.warning("%d.%d: OtherJobRemoveRequirements %r does not parse", p.cluster.id, p.id, extra)
        for q in list(self.queue.procs()):
            if q is p or q.status == REMOVED:
                continue
            other = self.queue.ad(q)
            if any(t(other) for t in tests):
                self._remove_job(q, f"{reason} (removed with DAGMan job {p.cluster.id}.{p.id})", now, stops)
