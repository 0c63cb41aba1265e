"""The job-state API the shadows call (documented at the top of agent.py), and the status changes
the job actions and the periodic policy share: hold, release, remove, and the stop of a running
job through the shadows."""

from __future__ import annotations

import time
from typing import Any

from gridbus.agents.schedd import policy
from gridbus.agents.schedd.jobattrs import (
    COMPLETED,
    HELD,
    IDLE,
    REMOVED,
    RUNNING,
    SCHEDD_OWNED,
    SUSPENDED,
    HoldCode,
)
from gridbus.agents.schedd.jobqueue import Proc
from gridbus.agents.schedd.parts import ScheddParts
from gridbus.classad.values import is_number
from gridbus.eventlog import writer


class JobStateMixin(ScheddParts):
    # ------------------------------------------------------------------ the shadows' calls
    async def job_started(self, cluster: int, proc: int, *, remote_host: str, slot: str, claim_id: str) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            self.log.warning("job_started for %d.%d, which is not in the queue", cluster, proc)
            return
        now = time.time()
        attrs: dict[str, Any] = {
            "RemoteHost": slot or remote_host,
            "StartdAddress": remote_host,
            "JobCurrentStartDate": int(now),
            "NumJobStarts": int(p.get("NumJobStarts", 0)) + 1,
            "NumShadowStarts": int(p.get("NumShadowStarts", 0)) + 1,
        }
        if p.get("JobStartDate") is None:
            attrs["JobStartDate"] = int(now)
        self.queue.set_status(p, RUNNING, attrs, when=now)
        ad = self.queue.ad(p)
        self.events.emit("execute", ad, writer.execute(cluster, proc, now, remote_host, slot),
                         {"RemoteHost": attrs["RemoteHost"]})
        self._count("JobsStarted")
        self.commit_soon()
        self.ads_changed()

    async def job_update(self, cluster: int, proc: int, attrs: dict[str, Any]) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None or not isinstance(attrs, dict):
            return
        clean = {k: v for k, v in attrs.items() if isinstance(k, str) and k.lower() not in SCHEDD_OWNED}
        old_size = p.get("ImageSize", 0)
        self.queue.update(p, clean)
        new_size = p.get("ImageSize", 0)
        if isinstance(new_size, int) and isinstance(old_size, int) and new_size > old_size:
            ad = self.queue.ad(p)
            mem = ad.get("MemoryUsage")
            rss = ad.get("ResidentSetSize")
            text = writer.image_size(cluster, proc, time.time(), new_size,
                                     mem if isinstance(mem, int) else None, rss if isinstance(rss, int) else None)
            self.events.emit("image_size", ad, text, {"ImageSize": new_size})
        self.commit_soon()

    async def job_evicted(self, cluster: int, proc: int, reason: str) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            return
        if p.status not in (RUNNING, SUSPENDED):
            self._stopped(p)
            return
        now = time.time()
        self._requeue(p, self._run_end_attrs(p, now), str(reason), now)
        self.commit_soon()
        self.ads_changed()

    async def job_exited(self, cluster: int, proc: int, report: dict[str, Any]) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            self.log.info("exit report for %d.%d, which is no longer in the queue", cluster, proc)
            return
        now = float(report.get("Time") or time.time())
        usage = {k: report[k] for k in ("ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage", "CpusUsage")
                 if isinstance(report.get(k), (int, float))}
        # The report gives this run's CPU; the job's RemoteUserCpu/RemoteSysCpu add up every run.
        for k in ("RemoteUserCpu", "RemoteSysCpu"):
            if isinstance(report.get(k), (int, float)):
                usage[k] = _num(p.get(k)) + float(report[k])
        if p.status not in (RUNNING, SUSPENDED):  # held or removed while running: the stop is already handled
            self.queue.update(p, usage)
            self._stopped(p)
            self.commit_soon()
            return
        self._count("JobsExited")
        attrs = {**usage, **self._run_end_attrs(p, now)}
        if report.get("MemoryExceeded"):
            request = p.get("RequestMemory")
            peak = report.get("MemoryUsage", report.get("ResidentSetSize"))
            # The startd's reason names the limit it enforced (the slot's memory, by policy).
            what = report.get("HoldReason") or (f"Job has gone over memory limit of {request} megabytes. "
                                                f"Peak usage: {peak} megabytes.")
            reason = f"Error from {p.get('RemoteHost', 'the execute node')}: {what}"
            self._hold(p, reason, int(HoldCode.JOB_OUT_OF_RESOURCES), 0, attrs, now)
        elif report.get("HoldReason"):
            code = report.get("HoldReasonCode")
            self._hold(p, str(report["HoldReason"]), int(code) if isinstance(code, int) else 0,
                       int(report.get("HoldReasonSubCode") or 0), attrs, now)
        else:
            self._exit_by_policy(p, report, attrs, now)
        self.commit_soon()
        self.ads_changed()

    def _exit_by_policy(self, p: Proc, report: dict[str, Any], attrs: dict[str, Any], now: float) -> None:
        """A run that ended on its own: OnExitHold, OnExitRemove and JobMaxRetries decide whether
        the job is held, goes back to Idle, or completes."""
        by_signal = bool(report.get("ExitBySignal"))
        if by_signal:
            attrs.update({"ExitBySignal": True, "ExitSignal": int(report.get("ExitSignal") or 0)})
        else:
            attrs.update({"ExitBySignal": False, "ExitCode": int(report.get("ExitCode") or 0)})
        attrs["NumJobCompletions"] = int(p.get("NumJobCompletions", 0)) + 1
        decision = policy.at_exit({**self.queue.ad(p), **attrs})
        if decision.action == policy.HOLD:
            self._hold(p, decision.reason, decision.code, decision.subcode, attrs, now)
            return
        if decision.action == policy.REQUEUE:
            self._requeue(p, attrs, decision.reason, now)
            return
        attrs["CompletionDate"] = int(now)
        self.queue.set_status(p, COMPLETED, attrs, when=now)
        ad = self.queue.ad(p)
        text = writer.terminated(p.cluster.id, p.id, now, exit_code=ad.get("ExitCode"),
                                 signal=ad.get("ExitSignal") if by_signal else None,
                                 user_cpu=_num(report.get("RemoteUserCpu")), sys_cpu=_num(report.get("RemoteSysCpu")),
                                 total_user_cpu=_num(ad.get("RemoteUserCpu")), total_sys_cpu=_num(ad.get("RemoteSysCpu")))
        extra = {"ExitCode": ad.get("ExitCode")} if not by_signal else {"ExitSignal": ad.get("ExitSignal")}
        self.events.emit("terminated", ad, text, extra)
        self._count("JobsCompleted")
        if ad.get("LeaveJobInQueue") is not True:
            self.queue.retire(p, when=now)

    def _requeue(self, p: Proc, attrs: dict[str, Any], reason: str, now: float) -> None:
        """Back to Idle after a run (evicted, or an exit JobMaxRetries retries): the evicted event."""
        self.queue.set_status(p, IDLE, attrs, when=now)
        ad = self.queue.ad(p)
        text = writer.evicted(p.cluster.id, p.id, now, _num(ad.get("RemoteUserCpu")), _num(ad.get("RemoteSysCpu")))
        self.events.emit("evicted", ad, text, {"Reason": reason})

    def _run_end_attrs(self, p: Proc, now: float) -> dict[str, Any]:
        """Attributes a run's end sets: wall clock accumulated, RemoteHost moved to LastRemoteHost."""
        started = p.get("JobCurrentStartDate")
        wall = _num(p.get("RemoteWallClockTime")) + (now - started if is_number(started) else 0.0)
        out: dict[str, Any] = {"RemoteWallClockTime": float(wall), "RemoteHost": None}  # None deletes
        if p.get("RemoteHost") is not None:
            out["LastRemoteHost"] = p.get("RemoteHost")
        return out

    # ------------------------------------------------------------------ hold, release, remove
    def _hold(self, p: Proc, reason: str, code: int, subcode: int, attrs: dict[str, Any] | None = None,
              now: float | None = None) -> None:
        now = now if now is not None else time.time()
        changes = dict(attrs or {})
        changes.update({"HoldReason": reason, "HoldReasonCode": code, "HoldReasonSubCode": subcode})
        self.queue.set_status(p, HELD, changes, when=now)
        ad = self.queue.ad(p)
        self.events.emit("held", ad, writer.held(p.cluster.id, p.id, now, reason, code, subcode),
                         {"HoldReason": reason, "HoldReasonCode": code})

    def _hold_job(self, p: Proc, reason: str, code: int, subcode: int, now: float, stops: list[Proc]) -> None:
        """Hold by an action or a policy; a running job is added to ``stops`` (see `_commit_and_stop`)."""
        if p.status in (RUNNING, SUSPENDED):
            stops.append(p)
        self._hold(p, reason, code, subcode, None, now)

    def _release_job(self, p: Proc, reason: str, now: float) -> None:
        """A held job back to Idle; its hold is remembered as LastHoldReason(Code)."""
        last = {"LastHoldReason": p.get("HoldReason"), "LastHoldReasonCode": p.get("HoldReasonCode"),
                "ReleaseReason": reason, "HoldReason": None, "HoldReasonCode": None, "HoldReasonSubCode": None}
        self.queue.set_status(p, IDLE, last, when=now)
        ad = self.queue.ad(p)
        self.events.emit("released", ad, writer.released(p.cluster.id, p.id, now, reason), {"Reason": reason})

    def _remove_job(self, p: Proc, reason: str, now: float, stops: list[Proc]) -> None:
        """Removed: a job that does not run leaves for the history now, a running one once stopped."""
        was_running = p.status in (RUNNING, SUSPENDED)
        self.queue.set_status(p, REMOVED, {"RemoveReason": reason}, when=now)
        ad = self.queue.ad(p)
        self.events.emit("aborted", ad, writer.aborted(p.cluster.id, p.id, now, reason), {"Reason": reason})
        if was_running:
            stops.append(p)
        else:
            self.queue.retire(p, when=now)
            self._count("JobsRemoved")

    def _commit_and_stop(self, stops: list[Proc]) -> None:
        """Commit the changes, then stop the running jobs among them through the shadows."""
        self.commit()
        for p in stops:
            self.spawn(self._stop_then(p), "stop-job")

    async def _stop_then(self, p: Proc) -> None:
        """Stop a running job through the shadows, then finish the hold or removal."""
        stop = getattr(self, "stop_running_job", None)
        if stop is not None:
            try:
                await stop(p.cluster.id, p.id)
            except Exception:
                self.log.exception("stopping job %d.%d failed", p.cluster.id, p.id)
        if self.queue.proc(p.cluster.id, p.id) is p:
            self._stopped(p)
            self.commit_soon()

    def _stopped(self, p: Proc) -> None:
        """A held or removed job's run has ended (stop_running_job returned, or a late report)."""
        if p.status == REMOVED:
            self.queue.retire(p)
            self._count("JobsRemoved")
        elif p.status == HELD and p.get("RemoteHost") is not None:
            self.queue.update(p, {"LastRemoteHost": p.get("RemoteHost"), "RemoteHost": None})
        self.ads_changed()


def _num(value: Any) -> float:
    return float(value) if is_number(value) else 0.0
