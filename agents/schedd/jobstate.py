"""The job state: every change of a job's status, its attributes at each change, the policy at
exit, and the job's events (to the bus and its user log, jobevents.py).

The shadows (shadows.py) and the scheduler universe (scheduniv.py) call ``job_started``,
``job_update``, ``job_exited`` (OnExitHold, OnExitRemove and JobMaxRetries decide: the job
completes and leaves for the history, is held, or goes back to Idle), ``job_evicted`` and
``job_report_failed``. The job actions (job_actions.py) and the periodic policy (policy_loop.py)
call ``hold_job``, ``release_job`` and ``remove_job``, then ``commit_and_stop``: the changes are
committed, answered, and a running job among them is stopped through ``stop`` (its claim's startd,
or the scheduler universe's process); when that returns the job is taken as stopped (a removed
job leaves for the history, a held one loses its RemoteHost). A later exit or evict report of a
job that is no longer Running is recorded (usage) and otherwise ignored.

Every change is made in memory and committed by the write-behind (commits.py) unless the caller
awaits the commit (an action answers after it; JobReports too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gridbus.agents.schedd import policy
from gridbus.agents.schedd.ads import Counters
from gridbus.agents.schedd.claims import Spawn
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobattrs import (
    COMPLETED,
    HELD,
    IDLE,
    REMOVED,
    RUNNING,
    SCHEDD_OWNED,
    SUSPENDED,
    HoldCode,
    runs_on_submit_host,
)
from gridbus.agents.schedd.jobevents import JobEvents, user_log_paths
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.queries import compile_constraint
from gridbus.agents.schedd.userlogs import HOLD_USER_LOG
from gridbus.classad.values import is_number
from gridbus.eventlog import writer
from gridbus.transfer.spec import ACCOUNTING_ATTRS as TRANSFER_ACCOUNTING

log = logging.getLogger("gridbus.schedd.jobstate")


class JobState:
    def __init__(self, queue: JobQueue, commits: Commits, events: JobEvents, counters: Counters,
                 stop: Callable[[int, int], Awaitable[bool]], ads_changed: Callable[[], None], spawn: Spawn):
        self.queue = queue
        self.commits = commits
        self.events = events
        self.counters = counters
        self._stop = stop
        self._ads_changed = ads_changed
        self._spawn = spawn
        self.run_so_far = RunSoFar()

    # ------------------------------------------------------------------ the shadows' calls
    async def job_started(self, cluster: int, proc: int, *, remote_host: str, slot: str, claim_id: str) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            log.warning("job_started for %d.%d, which is not in the queue", cluster, proc)
            return
        self.run_so_far.forget(p.key)  # a new run
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
        self.counters.count("JobsStarted")
        self.commits.soon()
        self._ads_changed()

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
        self.commits.soon()

    async def job_report_failed(self, cluster: int, proc: int, reason: str) -> None:
        """The job's exit report could not be applied: it is held (if it still ran) with ``reason``."""
        p = self.queue.proc(cluster, proc)
        if p is None or p.status not in (RUNNING, SUSPENDED):
            return
        now = time.time()
        self.hold(p, reason, int(HoldCode.UNSPECIFIED), 0, self._run_end_attrs(p, now), now)
        self.commits.soon()
        self._ads_changed()

    def job_not_startable(self, cluster: int, proc: int, reason: str, code: int) -> None:
        """An idle job that cannot be sent to the slot it was matched to (a ``$$()`` the slot
        cannot expand) is held with ``reason``."""
        p = self.queue.proc(cluster, proc)
        if p is None or p.status != IDLE:
            return
        self.hold(p, reason, code, 0)
        self.commits.soon()
        self._ads_changed()

    async def job_evicted(self, cluster: int, proc: int, reason: str) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            return
        if p.status not in (RUNNING, SUSPENDED):
            self.stopped(p)
            return
        now = time.time()
        self._requeue(p, self._run_end_attrs(p, now), str(reason), now)
        self.commits.soon()
        self._ads_changed()

    async def job_exited(self, cluster: int, proc: int, report: dict[str, Any]) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            log.info("exit report for %d.%d, which is no longer in the queue", cluster, proc)
            return
        now = float(report.get("Time") or time.time())
        usage = run_usage(p, report)
        run = self.run_so_far.whole(p.key, report)
        if p.status not in (RUNNING, SUSPENDED):  # held or removed while running: the stop is already handled
            self.queue.update(p, usage)
            self.stopped(p)
            self.commits.soon()
            return
        self.counters.count("JobsExited")
        attrs = {**usage, **self._run_end_attrs(p, now)}
        if report.get("MemoryExceeded"):
            request = p.get("RequestMemory")
            peak = report.get("MemoryUsage", report.get("ResidentSetSize"))
            # The startd's reason names the limit it enforced (the slot's memory, by policy).
            what = report.get("HoldReason") or (f"Job has gone over memory limit of {request} megabytes. "
                                                f"Peak usage: {peak} megabytes.")
            reason = f"Error from {p.get('RemoteHost', 'the execute node')}: {what}"
            self.hold(p, reason, int(HoldCode.JOB_OUT_OF_RESOURCES), 0, attrs, now)
        elif report.get("HoldReason"):
            code = report.get("HoldReasonCode")
            self.hold(p, str(report["HoldReason"]), int(code) if isinstance(code, int) else 0,
                       int(report.get("HoldReasonSubCode") or 0), attrs, now)
        else:
            self._exit_by_policy(p, run, attrs, now)
        self.commits.soon()
        self._ads_changed()

    def _exit_by_policy(self, p: Proc, report: dict[str, Any], attrs: dict[str, Any], now: float) -> None:
        """A run that ended on its own: OnExitHold, OnExitRemove and JobMaxRetries decide whether
        the job is held, goes back to Idle, or completes. ``report``: the whole run's (its exit
        report with its checkpoints' figures added: `RunSoFar`)."""
        by_signal = bool(report.get("ExitBySignal"))
        if by_signal:
            attrs.update({"ExitBySignal": True, "ExitSignal": int(report.get("ExitSignal") or 0)})
        else:
            attrs.update({"ExitBySignal": False, "ExitCode": int(report.get("ExitCode") or 0)})
        attrs["NumJobCompletions"] = int(p.get("NumJobCompletions", 0)) + 1
        decision = policy.at_exit({**self.queue.ad(p), **attrs})
        if decision.action == policy.HOLD:
            self.hold(p, decision.reason, decision.code, decision.subcode, attrs, now)
            return
        if decision.action == policy.REQUEUE:
            exited = {"signal": attrs["ExitSignal"]} if by_signal else {"exit_code": attrs["ExitCode"]}
            self._requeue(p, attrs, decision.reason, now, exited, job_bytes(report))
            return
        attrs["CompletionDate"] = int(now)
        self.queue.set_status(p, COMPLETED, attrs, when=now)
        ad = self.queue.ad(p)
        text = writer.terminated(p.cluster.id, p.id, now, exit_code=ad.get("ExitCode"),
                                 signal=ad.get("ExitSignal") if by_signal else None,
                                 user_cpu=_num(report.get("RemoteUserCpu")), sys_cpu=_num(report.get("RemoteSysCpu")),
                                 total_user_cpu=_num(ad.get("RemoteUserCpu")), total_sys_cpu=_num(ad.get("RemoteSysCpu")),
                                 total_sent=int(_num(ad.get("BytesSent"))), total_received=int(_num(ad.get("BytesRecvd"))),
                                 **job_bytes(report))
        extra = {"ExitCode": ad.get("ExitCode")} if not by_signal else {"ExitSignal": ad.get("ExitSignal")}
        self.events.emit("terminated", ad, text, extra)
        self.counters.count("JobsCompleted")
        if ad.get("LeaveJobInQueue") is not True:
            self.queue.retire(p, when=now)

    def _requeue(self, p: Proc, attrs: dict[str, Any], reason: str, now: float,
                 exited: dict[str, int] | None = None, moved: dict[str, int] | None = None) -> None:
        """Back to Idle after a run: the evicted event; for an exit its policy requeued (``exited``:
        its exit_code or signal), in HTCondor's "terminated and was requeued" form with the reason."""
        self.queue.set_status(p, IDLE, attrs, when=now)
        ad = self.queue.ad(p)
        if exited is None:
            text = writer.evicted(p.cluster.id, p.id, now, _num(ad.get("RemoteUserCpu")), _num(ad.get("RemoteSysCpu")))
        else:
            text = writer.evicted(p.cluster.id, p.id, now, _num(ad.get("RemoteUserCpu")), _num(ad.get("RemoteSysCpu")),
                                  requeued=True, reason=reason, exit_code=exited.get("exit_code"),
                                  signal=exited.get("signal"), **(moved or {}))
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
    def hold(self, p: Proc, reason: str, code: int, subcode: int, attrs: dict[str, Any] | None = None,
              now: float | None = None) -> None:
        now = now if now is not None else time.time()
        changes = dict(attrs or {})
        changes.update({"HoldReason": reason, "HoldReasonCode": code, "HoldReasonSubCode": subcode})
        self.queue.set_status(p, HELD, changes, when=now)
        ad = self.queue.ad(p)
        self.events.emit("held", ad, writer.held(p.cluster.id, p.id, now, reason, code, subcode),
                         {"HoldReason": reason, "HoldReasonCode": code})

    def hold_job(self, p: Proc, reason: str, code: int, subcode: int, now: float, stops: list[Proc]) -> None:
        """Hold by an action or a policy; a running job is added to ``stops`` (see `commit_and_stop`)."""
        if p.status in (RUNNING, SUSPENDED):
            stops.append(p)
        self.hold(p, reason, code, subcode, None, now)

    def release_job(self, p: Proc, reason: str, now: float) -> None:
        """A held job back to Idle; its hold is remembered as LastHoldReason(Code)."""
        last = {"LastHoldReason": p.get("HoldReason"), "LastHoldReasonCode": p.get("HoldReasonCode"),
                "ReleaseReason": reason, "HoldReason": None, "HoldReasonCode": None, "HoldReasonSubCode": None}
        self.queue.set_status(p, IDLE, last, when=now)
        ad = self.queue.ad(p)
        self.events.emit("released", ad, writer.released(p.cluster.id, p.id, now, reason), {"Reason": reason})

    def remove_job(self, p: Proc, reason: str, now: float, stops: list[Proc]) -> None:
        """Removed: a job that does not run leaves for the history now, a running one once stopped."""
        was_running = p.status in (RUNNING, SUSPENDED)
        self.queue.set_status(p, REMOVED, {"RemoveReason": reason}, when=now)
        ad = self.queue.ad(p)
        self.events.emit("aborted", ad, writer.aborted(p.cluster.id, p.id, now, reason), {"Reason": reason})
        if was_running:
            stops.append(p)
        else:
            self.queue.retire(p, when=now)
            self.counters.count("JobsRemoved")
        self._remove_dependents(p, ad, reason, now, stops)

    def _remove_dependents(self, p: Proc, ad: dict[str, Any], reason: str, now: float, stops: list[Proc]) -> None:
        """The jobs a scheduler universe job (DAGMan) submitted go with it: those whose
        DAGManJobId is its cluster, and those its OtherJobRemoveRequirements names."""
        if not runs_on_submit_host(ad):
            return
        tests = [lambda other: other.get("DAGManJobId") == p.cluster.id]
        extra = ad.get("OtherJobRemoveRequirements")
        if isinstance(extra, str) and extra.strip():
            try:
                tests.append(compile_constraint(extra))
            except Exception:
                log.warning("%d.%d: OtherJobRemoveRequirements %r does not parse", p.cluster.id, p.id, extra)
        for q in list(self.queue.procs()):
            if q is p or q.status == REMOVED:
                continue
            other = self.queue.ad(q)
            if any(t(other) for t in tests):
                self.remove_job(q, f"{reason} (removed with DAGMan job {p.cluster.id}.{p.id})", now, stops)

    async def commit_and_stop(self, stops: list[Proc]) -> None:
        """Commit the changes, then stop the running jobs among them through the shadows."""
        await self.commits.now()
        for p in stops:
            self._spawn(self._stop_then(p), "stop-job")

    async def _stop_then(self, p: Proc) -> None:
        """Stop a running job through the shadows, then finish the hold or removal."""
        try:
            await self._stop(p.cluster.id, p.id)
        except Exception:
            log.exception("stopping job %d.%d failed", p.cluster.id, p.id)
        if self.queue.proc(p.cluster.id, p.id) is p:
            self.stopped(p)
            self.commits.soon()

    def stopped(self, p: Proc) -> None:
        """A held or removed job's run has ended (stop_running_job returned, or a late report)."""
        self.run_so_far.forget(p.key)
        if p.status == REMOVED:
            self.queue.retire(p)
            self.counters.count("JobsRemoved")
        elif p.status == HELD and p.get("RemoteHost") is not None:
            self.queue.update(p, {"LastRemoteHost": p.get("RemoteHost"), "RemoteHost": None})
        self._ads_changed()


    def hold_for_log(self, owner: str, path: str, sentence: str) -> None:
        """The owner's shadow cannot write user log ``path``: hold the owner's jobs that log
        there and are not held or done (HTCondor's UnableToInitUserLog)."""
        now = time.time()
        stops: list[Proc] = []
        reason = f"Cannot write the user log: {sentence}"
        for cluster in list(self.queue.by_owner.get(owner, {}).values()):
            for p in list(cluster.procs.values()):
                if p.status in (HELD, COMPLETED, REMOVED) or path not in user_log_paths(self.queue.ad(p)):
                    continue
                self.hold_job(p, reason, HOLD_USER_LOG, 0, now, stops)
        if stops:
            self._spawn(self.commit_and_stop(stops), "hold for a user log")
        else:
            self.commits.soon()


# A report counts the bytes moved from the shadow's side (its BytesSent: the input the shadow
# sent); the job ad and the user log count them from the job's side, as HTCondor's do. By the
# job's side, the report's attribute for each.
REPORTED_AS = {"BytesRecvd": "BytesSent", "BytesSent": "BytesRecvd"}


def job_bytes(report: Mapping[str, Any]) -> dict[str, int]:
    """A run's bytes as its terminated event gives them: from the job's side."""
    return {"sent": int(_num(report.get(REPORTED_AS["BytesSent"]))),
            "received": int(_num(report.get(REPORTED_AS["BytesRecvd"])))}


RUN_USAGE = ("ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage", "CpusUsage",
             *(k for k in TRANSFER_ACCOUNTING if k not in REPORTED_AS))


def run_usage(p: Proc, report: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's end (an exit, a checkpoint) reports of its usage, as the job's attributes: the
    run's sizes and transfer times as they are; its CPU added to the job's RemoteUserCpu and
    RemoteSysCpu, and its bytes to BytesSent and BytesRecvd (from the job's side), which add up
    every run."""
    usage = {k: report[k] for k in RUN_USAGE if isinstance(report.get(k), (int, float))}
    for k in ("RemoteUserCpu", "RemoteSysCpu"):
        if isinstance(report.get(k), (int, float)):
            usage[k] = _num(p.get(k)) + float(report[k])
    for job_side, reported in REPORTED_AS.items():
        if isinstance(report.get(reported), (int, float)):
            usage[job_side] = _num(p.get(job_side)) + float(report[reported])
    return usage


class RunSoFar:
    """What the checkpoints of each running job's current run have reported (its cpu and bytes,
    as the reports count them), so that the run's end gives the whole run's figures in its
    terminated or requeued event: HTCondor's run is its shadow's, which a restart in place after a
    checkpoint does not end. (The job ad's totals take each report as it comes.) In memory: a
    schedd restarted in the middle of a run counts that run from its restart."""

    FIELDS = ("RemoteUserCpu", "RemoteSysCpu", *REPORTED_AS.values())

    def __init__(self) -> None:
        self._runs: dict[tuple[int, int], dict[str, float]] = {}

    def add(self, key: tuple[int, int], report: Mapping[str, Any]) -> None:
        """A checkpoint of the run of job ``key`` reported these figures."""
        so_far = self._runs.setdefault(key, {})
        for name in self.FIELDS:
            if is_number(report.get(name)):
                so_far[name] = so_far.get(name, 0.0) + float(report[name])

    def whole(self, key: tuple[int, int], report: Mapping[str, Any]) -> dict[str, Any]:
        """The run-ending ``report`` with its run's earlier checkpoints added (then forgotten)."""
        so_far = self._runs.pop(key, None)
        if not so_far:
            return dict(report)
        return {**report, **{name: _num(report.get(name)) + value for name, value in so_far.items()}}

    def forget(self, key: tuple[int, int]) -> None:
        self._runs.pop(key, None)


def _num(value: Any) -> float:
    return float(value) if is_number(value) else 0.0
