"""The schedd agent: the job queue, Submit/Query/actions, policy, ads and events.

The job-state API the shadows (agents/schedd/shadows.py, ShadowMixin) use
--------------------------------------------------------------------------
All on the `Schedd` instance, on the agent's event loop:

- ``self.queue.idle_jobs(owner: str | None) -> Iterator[dict]``: idle, materialized jobs in
  JobPrio desc / QDate / ClusterId / ProcId order, each a full ad (cluster attributes merged, with
  ClusterId, ProcId, Owner, GlobalJobId, JobStatus). Lazy: taking the first job is cheap.
  ``self.queue.idle_procs(owner)`` yields the `Proc` records instead (``.cluster.id``, ``.id``).
- ``self.queue.get(cluster, proc) -> dict | None``: a job's full ad.
- ``await self.job_started(cluster, proc, *, remote_host, slot, claim_id)``: JobStatus 2,
  RemoteHost (= slot, or remote_host without one), JobCurrentStartDate, NumJobStarts + 1, execute
  event. The claim id is never put in the job ad (job ads are readable by their owner).
- ``await self.job_exited(cluster, proc, report)``: ``report`` is a JobReports exit report
  (ExitCode | ExitBySignal/ExitSignal, RemoteUserCpu, RemoteSysCpu, ImageSize, MemoryUsage,
  ResidentSetSize, MemoryExceeded, or HoldReason/HoldReasonCode). Applies OnExitHold,
  OnExitRemove and JobMaxRetries: the job completes (terminated event, history), is held
  (held event), or goes back to Idle (evicted event).
- ``await self.job_evicted(cluster, proc, reason)``: back to Idle, counts kept, evicted event.
- ``await self.job_update(cluster, proc, attrs)``: usage (ImageSize, MemoryUsage, ...); an
  image_size event when ImageSize grows.
- The reverse hook: when Hold, Remove or a policy hits a running job, the schedd marks the job
  (JobStatus 5 or 3) at once, answers, and then awaits ``self.stop_running_job(cluster, proc)``
  (ShadowMixin's; skipped while it does not exist). When that returns, the job is taken as
  stopped: a removed job leaves for the history, a held one loses its RemoteHost. A later
  exit/evict report for a job that is no longer Running is recorded (usage) and otherwise ignored.
- ``self.ads_changed()`` is called here after every change of the Submitter counts.

These calls return after the change is made in memory; the SQLite commit follows within
SCHEDD_WRITE_BEHIND seconds (default 5 ms), batched with every other change of that moment.
A Submit and a job action are answered only after their commit.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from gridbus.agent import Agent, Call, method
from gridbus.agent.objects import ManagedObject
from gridbus.agents.schedd import policy, submission
from gridbus.agents.schedd.actions import Totals, parse_value
from gridbus.agents.schedd.jobattrs import (
    ATTR_NAME,
    RESERVED_WORDS,
    SCHEDD_OWNED,
    STATUS_NAMES,
    HoldCode,
    JobStatus,
    parse_job_id,
)
from gridbus.agents.schedd.jobevents import JobEvents
from gridbus.agents.schedd.jobqueue import Cluster, JobQueue, Proc
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import ShadowMixin
from gridbus.eventlog import writer
from gridbus.status import MethodError, Status, forbidden, invalid, unknown_object

IDLE, RUNNING, REMOVED, COMPLETED, HELD = (int(s) for s in (
    JobStatus.IDLE, JobStatus.RUNNING, JobStatus.REMOVED, JobStatus.COMPLETED, JobStatus.HELD))

QUERY_CHUNK = 1000
FETCH_MAX = 1 << 20  # bytes one Fetch answers at most
RATE_WINDOW = 300.0  # seconds over which the Scheduler ad's rates are measured

QUERY_AUTOCLUSTER = 1
QUERY_SUMMARY = 8
AUTOCLUSTER_ATTRS = ("Owner", "JobUniverse", "Requirements", "Rank", "RequestCpus", "RequestMemory",
                     "RequestDisk", "ConcurrencyLimits")


class Schedd(ShadowMixin, Agent):
    kind = "schedd"
    # "job" is listed so getObjects(_class="job") reaches this agent (class.job binding); its
    # objects are made on demand by find_objects/resolve_object, never registered.
    classes = ("scheduler", "job")
    my_type = "Scheduler"
    durable_requests = True

    def __init__(self, name: str | None = None, url: str | None = None, *, settings: ScheddSettings | None = None,
                 spool: str | Path | None = None, **kw: Any):
        if settings is None:
            if spool is None:
                raise ValueError("a Schedd needs a spool directory (settings.spool or spool=)")
            settings = ScheddSettings(spool=Path(spool))
        kw.setdefault("update_interval", settings.update_interval)
        super().__init__(name or socket.gethostname(), url, **kw)
        self.settings = settings
        # One object per class is made by the framework, named by the address; only the
        # scheduler is a real object here (jobs are named by their ids).
        self.objects = {self.address: ManagedObject("scheduler", self.address, self.object_properties,
                                                    self.object_statistics)}
        spool_dir = Path(settings.spool)
        spool_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.queue = JobQueue(spool_dir / "job_queue.sqlite3", self.name, synchronous=settings.queue_sync)
        self.reload_seconds = time.monotonic() - started
        self.events = JobEvents(self.publish_event, self.address)
        self.queue.on_flush.append(self.events.write_logs)
        self.super_users = frozenset(settings.super_users)
        self._flush_handle: asyncio.TimerHandle | None = None
        self._policy_clusters: set[int] = {c.id for c in self.queue.clusters.values() if self._cluster_has_policy(c)}
        self._rates: deque[tuple[float, str, int]] = deque()
        self.cum = {"JobsSubmitted": 0, "JobsStarted": 0, "JobsCompleted": 0, "JobsExited": 0, "JobsRemoved": 0}

    @classmethod
    def from_config(cls, cfg: Any, *, name: str | None = None, url: str | None = None, **overrides: Any) -> Schedd:
        settings = ScheddSettings.from_config(cfg, **overrides)
        return cls(name or cfg.get("SCHEDD_NAME") or None, url or cfg.url(), settings=settings)

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        self.events.start()
        await super().setup()

    async def on_start(self) -> None:
        self.spawn(self.events.pump(), "job-events")
        self.spawn(self._periodic_loop(), "periodic-policy")
        await super().on_start()

    async def on_stop(self) -> None:
        try:
            await super().on_stop()
        finally:
            self.commit()
            await self.events.drain()
            self.queue.store.close()

    # ------------------------------------------------------------------ commits
    def commit(self) -> None:
        """Write every pending change now (one transaction), then append the user logs."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        made = self.queue.take_materialized()
        by_cluster: dict[int, list[Proc]] = {}
        for p in made:
            by_cluster.setdefault(p.cluster.id, []).append(p)
        for procs in by_cluster.values():
            self._log_submit(procs[0].cluster, procs)
        self.queue.flush()

    def _settle(self) -> None:
        """Commit the changes waiting for the write-behind before reading the history from disk."""
        if self.queue.dirty:
            self.commit()

    def commit_soon(self) -> None:
        """Batch the shadows' changes: one commit a few milliseconds after the first of them."""
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(self.settings.write_behind, self._flush_later)

    def _flush_later(self) -> None:
        self._flush_handle = None
        try:
            self.commit()
        except Exception:
            self.log.exception("committing the job queue failed; retrying")
            self.commit_soon()

    def _count(self, what: str, n: int = 1) -> None:
        self.cum[what] += n
        now = time.time()
        self._rates.append((now, what, n))
        while self._rates and self._rates[0][0] < now - RATE_WINDOW:
            self._rates.popleft()

    # ------------------------------------------------------------------ identity and authorization
    def is_super(self, user: str | None) -> bool:
        return bool(user) and (user in self.super_users or self.is_admin(user))

    def may_act(self, user: str | None, p: Proc) -> bool:
        return bool(user) and (user == p.cluster.owner or self.is_super(user))

    # ------------------------------------------------------------------ ads
    def object_statistics(self) -> dict[str, Any]:
        t = self.queue.totals()
        return {**self.stats, "TotalIdleJobs": t[IDLE], "TotalRunningJobs": t[RUNNING], "TotalHeldJobs": t[HELD],
                "TotalJobAds": sum(t)}

    def daemon_ad(self) -> dict[str, Any]:
        t = self.queue.totals()
        now = time.time()
        window = {k: 0 for k in self.cum}
        for stamp, what, n in self._rates:
            if stamp >= now - RATE_WINDOW:
                window[what] += n
        span = max(1.0, min(RATE_WINDOW, now - self.start_time))
        return {
            **super().daemon_ad(),
            "ScheddName": self.name,
            "TotalIdleJobs": t[IDLE],
            "TotalRunningJobs": t[RUNNING],
            "TotalHeldJobs": t[HELD],
            "TotalRemovedJobs": t[REMOVED],
            "TotalJobAds": sum(t),
            "NumUsers": len(self.queue.owners()),
            "JobsSubmitted": window["JobsSubmitted"],
            "JobsStarted": window["JobsStarted"],
            "JobsCompleted": window["JobsCompleted"],
            "JobsExited": window["JobsExited"],
            "JobSubmissionRate": window["JobsSubmitted"] / span,
            "JobStartRate": window["JobsStarted"] / span,
            "JobCompletionRate": window["JobsCompleted"] / span,
            "JobsSubmittedCum": self.cum["JobsSubmitted"],
            "JobsStartedCum": self.cum["JobsStarted"],
            "JobsCompletedCum": self.cum["JobsCompleted"],
            "JobsExitedCum": self.cum["JobsExited"],
            "WindowedStatWidth": int(RATE_WINDOW),
        }

    def submitter_ads(self) -> list[dict[str, Any]]:
        out = []
        for owner in self.queue.owners():
            t = self.queue.totals(owner)
            out.append({
                "MyType": "Submitter",
                "Name": f"{owner}@{self.name}",
                "Owner": owner,
                "ScheddName": self.name,
                "MyAddress": self.address,
                "IdleJobs": t[IDLE],
                "RunningJobs": t[RUNNING],
                "HeldJobs": t[HELD],
            })
        return out

    def ads(self) -> list[dict[str, Any]]:
        return [self.daemon_ad(), *self.submitter_ads()]

    # ------------------------------------------------------------------ Submit
    @method("scheduler")
    async def Submit(self, call: Call, Ad: Any, Procs: list, Count: int, Submit: dict, SubmissionId: str) -> dict:
        caller = call.require_user()
        ad = submission.normalize_ad(Ad)
        owner = submission.resolve_owner(ad, caller, self.is_super(caller))
        digest = ""
        if SubmissionId:
            # The fingerprint is of the request as sent, so a retry matches whatever time it comes.
            digest = submission.digest(ad, [p for p in Procs if isinstance(p, dict)], Count, Submit)
            seen = self.queue.submission(owner, SubmissionId)
            if seen is not None:
                if seen[0] != digest:
                    raise submission.reused_id(SubmissionId, seen[1]["ClusterId"])
                return seen[1]
        if Submit:
            expanded, Procs, Count = self._expand_submit_description(ad, Submit)
            ad = submission.normalize_ad(expanded)
        diffs = submission.proc_diffs(Procs) if Procs else []
        count = len(diffs) if diffs else Count
        if count < 1:
            raise invalid("Submit: a cluster needs at least one proc (Count >= 1 or a non-empty Procs)")
        submission.check_required(ad)
        qdate = int(time.time())
        probe, _status = submission.build_cluster_ad(ad, owner=owner, uid_domain=self.settings.uid_domain,
                                                     cluster_id=self.queue.next_cluster, qdate=qdate)
        if self.settings.submit_requirements:
            first = {**probe, **(diffs[0] if diffs else {}), "ProcId": 0, "JobStatus": _status}
            submission.check_requirements(self.settings.submit_requirements, first, self.daemon_ad())
        max_idle = _int_attr(ad, "JobMaterializeMaxIdle")
        limit = _int_attr(ad, "JobMaterializeLimit")
        cluster_id = self.queue.new_cluster_id()
        cluster_ad, status = submission.build_cluster_ad(ad, owner=owner, uid_domain=self.settings.uid_domain,
                                                         cluster_id=cluster_id, qdate=qdate)
        c = self.queue.add_cluster(cluster_id, owner, cluster_ad, diffs or None, count, status=status,
                                   max_idle=max_idle, limit=limit)
        answer = {"ClusterId": cluster_id, "FirstProc": 0, "NumProcs": count, "Id": f"{self.name}#{cluster_id}.0"}
        if SubmissionId:
            self.queue.record_submission(owner, SubmissionId, digest, answer)
        if self._cluster_has_policy(c):
            self._policy_clusters.add(cluster_id)
        try:
            self.commit()  # answered only after this commit
        except Exception:
            self.log.exception("committing cluster %d failed", cluster_id)
            raise MethodError(Status.EXCEPTION, f"Submit: the job queue could not be written ({cluster_id} not created)") from None
        if c.factory is None:
            self._log_submit(c, list(c.procs.values()))
            self.events.write_logs()
        self._count("JobsSubmitted", count)
        self.ads_changed()
        return answer

    def _expand_submit_description(self, ad: Any, desc: dict) -> tuple[Any, list, int]:
        """Submit={"Text", "ItemData", "Count"}: expand a submit description here, with gridbus.submit."""
        text = desc.get("Text")
        if not isinstance(text, str) or not text.strip():
            raise invalid("Submit: the Submit map needs Text, a submit description")
        try:
            from gridbus.submit import Submit as SubmitDescription
        except ImportError:
            raise MethodError(Status.NOT_IMPLEMENTED, "Submit: this schedd cannot expand submit descriptions "
                              "(gridbus.submit is not installed); send the job ad instead") from None
        count = desc.get("Count") or 0
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise invalid(f"Submit: Submit.Count must be a non-negative integer, got {count!r}")
        try:
            # No await until the cluster is made, so next_cluster is the id it gets ($(Cluster)).
            built = SubmitDescription(text).build(cluster_id=self.queue.next_cluster, count=count,
                                                  itemdata=desc.get("ItemData"))
            cluster, procs = dict(built.cluster_ad), list(built.proc_ads)
        except Exception as exc:
            raise invalid(f"Submit: the submit description is not valid: {exc}") from None
        if isinstance(ad, dict):
            cluster.update(ad)
        return cluster, procs, len(procs)

    def _log_submit(self, c: Cluster, procs: list[Proc]) -> None:
        if not procs:
            return
        now = time.time()
        texts = [writer.submit(c.id, p.id, now, self.address) for p in procs] if c.ad.get("UserLog") else []
        self.events.emit_cluster("submit", c.ad, [p.id for p in procs], texts)

    # ------------------------------------------------------------------ the job-state API (shadows)
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
        if p.status != RUNNING:
            self._stopped(p)
            return
        now = time.time()
        self.queue.set_status(p, IDLE, self._run_end_attrs(p, now), when=now)
        ad = self.queue.ad(p)
        cpu_u, cpu_s = _num(ad.get("RemoteUserCpu")), _num(ad.get("RemoteSysCpu"))
        self.events.emit("evicted", ad, writer.evicted(cluster, proc, now, cpu_u, cpu_s), {"Reason": str(reason)})
        self.commit_soon()
        self.ads_changed()

    async def job_exited(self, cluster: int, proc: int, report: dict[str, Any]) -> None:
        p = self.queue.proc(cluster, proc)
        if p is None:
            self.log.info("exit report for %d.%d, which is no longer in the queue", cluster, proc)
            return
        now = float(report.get("Time") or time.time())
        usage = {k: report[k] for k in ("ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage")
                 if isinstance(report.get(k), (int, float))}
        # The report gives this run's CPU; the job's RemoteUserCpu/RemoteSysCpu add up every run.
        for k in ("RemoteUserCpu", "RemoteSysCpu"):
            if isinstance(report.get(k), (int, float)):
                usage[k] = _num(p.get(k)) + float(report[k])
        if p.status != RUNNING:  # held or removed while running: the stop is already handled
            self.queue.update(p, usage)
            self._stopped(p)
            self.commit_soon()
            return
        self._count("JobsExited")
        attrs = {**usage, **self._run_end_attrs(p, now)}
        if report.get("MemoryExceeded"):
            request = p.get("RequestMemory")
            peak = report.get("MemoryUsage", report.get("ResidentSetSize"))
            reason = (f"Error from {p.get('RemoteHost', 'the execute node')}: Job has gone over memory limit of "
                      f"{request} megabytes. Peak usage: {peak} megabytes.")
            self._hold(p, reason, int(HoldCode.JOB_OUT_OF_RESOURCES), 0, attrs, now)
        elif report.get("HoldReason"):
            code = report.get("HoldReasonCode")
            self._hold(p, str(report["HoldReason"]), int(code) if isinstance(code, int) else 0,
                       int(report.get("HoldReasonSubCode") or 0), attrs, now)
        else:
            by_signal = bool(report.get("ExitBySignal"))
            if by_signal:
                attrs.update({"ExitBySignal": True, "ExitSignal": int(report.get("ExitSignal") or 0)})
            else:
                attrs.update({"ExitBySignal": False, "ExitCode": int(report.get("ExitCode") or 0)})
            attrs["NumJobCompletions"] = int(p.get("NumJobCompletions", 0)) + 1
            trial = {**self.queue.ad(p), **attrs}
            decision = policy.at_exit(trial)
            if decision.action == policy.HOLD:
                self._hold(p, decision.reason, decision.code, decision.subcode, attrs, now)
            elif decision.action == policy.REQUEUE:
                self.queue.set_status(p, IDLE, attrs, when=now)
                ad = self.queue.ad(p)
                self.events.emit("evicted", ad, writer.evicted(cluster, proc, now, _num(ad.get("RemoteUserCpu")),
                                                               _num(ad.get("RemoteSysCpu"))), {"Reason": decision.reason})
            else:
                attrs["CompletionDate"] = int(now)
                self.queue.set_status(p, COMPLETED, attrs, when=now)
                ad = self.queue.ad(p)
                text = writer.terminated(cluster, proc, now, exit_code=ad.get("ExitCode"),
                                         signal=ad.get("ExitSignal") if by_signal else None,
                                         user_cpu=_num(report.get("RemoteUserCpu")), sys_cpu=_num(report.get("RemoteSysCpu")),
                                         total_user_cpu=_num(ad.get("RemoteUserCpu")), total_sys_cpu=_num(ad.get("RemoteSysCpu")))
                extra = {"ExitCode": ad.get("ExitCode")} if not by_signal else {"ExitSignal": ad.get("ExitSignal")}
                self.events.emit("terminated", ad, text, extra)
                self._count("JobsCompleted")
                if ad.get("LeaveJobInQueue") is not True:
                    self.queue.retire(p, when=now)
        self.commit_soon()
        self.ads_changed()

    def _run_end_attrs(self, p: Proc, now: float) -> dict[str, Any]:
        """Attributes a run's end sets: wall clock accumulated, RemoteHost moved to LastRemoteHost."""
        started = p.get("JobCurrentStartDate")
        wall = _num(p.get("RemoteWallClockTime")) + (now - started if isinstance(started, (int, float)) else 0.0)
        out: dict[str, Any] = {"RemoteWallClockTime": float(wall), "RemoteHost": None}  # None deletes
        if p.get("RemoteHost") is not None:
            out["LastRemoteHost"] = p.get("RemoteHost")
        return out

    def _stopped(self, p: Proc) -> None:
        """A held or removed job's run has ended (stop_running_job returned, or a late report)."""
        if p.status == REMOVED:
            self.queue.retire(p)
            self._count("JobsRemoved")
        elif p.status == HELD and p.get("RemoteHost") is not None:
            self.queue.update(p, {"LastRemoteHost": p.get("RemoteHost"), "RemoteHost": None})
        self.ads_changed()

    def _hold(self, p: Proc, reason: str, code: int, subcode: int, attrs: dict[str, Any] | None = None,
              now: float | None = None) -> None:
        now = now if now is not None else time.time()
        changes = dict(attrs or {})
        changes.update({"HoldReason": reason, "HoldReasonCode": code, "HoldReasonSubCode": subcode})
        self.queue.set_status(p, HELD, changes, when=now)
        ad = self.queue.ad(p)
        self.events.emit("held", ad, writer.held(p.cluster.id, p.id, now, reason, code, subcode),
                         {"HoldReason": reason, "HoldReasonCode": code})

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

    # ------------------------------------------------------------------ actions
    def _select(self, ids: list, constraint: Any, totals: Totals, *, for_remove: bool = False) -> list[Proc]:
        if not ids and not (isinstance(constraint, str) and constraint.strip()) and type(constraint).__name__ != "ExprTree":
            raise invalid("name the jobs to act on: give Ids ('c.p' or 'c') or a Constraint")
        out: list[Proc] = []
        seen: set[tuple[int, int]] = set()
        for raw in ids:
            try:
                cid, pid = parse_job_id(raw)
            except ValueError as exc:
                raise invalid(str(exc)) from None
            c = self.queue.clusters.get(cid)
            if pid is None:
                if c is None:
                    totals.not_found += 1
                    continue
                procs = [c.procs[k] for k in sorted(c.procs)]
                if not procs:
                    totals.not_found += 1
                out.extend(p for p in procs if p.key not in seen)
                seen.update(p.key for p in procs)
                if for_remove:
                    totals.factories.append(c)
                continue
            p = c.procs.get(pid) if c else None
            if p is None:
                totals.not_found += 1
            elif p.key not in seen:
                seen.add(p.key)
                out.append(p)
        if constraint is not None and str(constraint).strip():
            test = _compile_constraint(constraint)
            for p in self.queue.procs():
                if p.key not in seen and test(self.queue.ad(p)):
                    seen.add(p.key)
                    out.append(p)
        return out

    def _act(self, call: Call, action: str, ids: list, constraint: Any, reason: str,
             attr: tuple[str, Any] | None = None) -> dict[str, Any]:
        user = call.require_user()
        totals = Totals()
        procs = self._select(ids, constraint, totals, for_remove=action == "Remove")
        totals.job_ads = len(procs)
        reason = reason or f"via gridbus {action.lower()}"
        full_reason = f"{reason} (by user {user})"
        stops: list[Proc] = []
        now = time.time()
        # A cluster removed whole stops materializing first, or each removal would make a new proc.
        for c in totals.factories:
            if c.owner == user or self.is_super(user):
                self.queue.stop_factory(c)
        for p in procs:
            if not self.may_act(user, p):
                totals.denied += 1
                totals.denials.append(f"{p.cluster.id}.{p.id} (owner {p.cluster.owner})")
                continue
            try:
                outcome = self._apply(action, p, full_reason, attr, now, stops)
            except MethodError:
                raise
            except Exception:
                self.log.exception("%s of %d.%d failed", action, p.cluster.id, p.id)
                totals.error += 1
                continue
            totals.add(outcome)
        self.commit()
        for p in stops:
            self.spawn(self._stop_then(p), "stop-job")
        if totals.changed:
            self.ads_changed()
        result = totals.as_ad()
        if totals.denied and not totals.success:
            who = ", ".join(totals.denials[:5]) + (" ..." if len(totals.denials) > 5 else "")
            raise MethodError(
                Status.FORBIDDEN,
                f"{user} may not {action.lower() if action != 'SetAttribute' else 'edit'} job(s) {who}: "
                "only a job's owner or a queue super user (QUEUE_SUPER_USERS) may change a job",
                {"Totals": result},
            )
        return {"Totals": result}

    def _apply(self, action: str, p: Proc, reason: str, attr: tuple[str, Any] | None, now: float,
               stops: list[Proc]) -> str:
        """Apply one action to one job; returns 'success', 'bad_status' or 'already_done'."""
        if action == "Hold":
            if p.status == HELD:
                return "already_done"
            if p.status in (REMOVED, COMPLETED):
                return "bad_status"
            was_running = p.status == RUNNING
            self._hold(p, reason, int(HoldCode.USER_REQUEST), 0, None, now)
            if was_running:
                stops.append(p)
            return "success"
        if action == "Release":
            if p.status != HELD:
                return "bad_status"
            last = {"LastHoldReason": p.get("HoldReason"), "LastHoldReasonCode": p.get("HoldReasonCode"),
                    "ReleaseReason": reason, "HoldReason": None, "HoldReasonCode": None,
                    "HoldReasonSubCode": None}
            self.queue.set_status(p, IDLE, last, when=now)
            ad = self.queue.ad(p)
            self.events.emit("released", ad, writer.released(p.cluster.id, p.id, now, reason), {"Reason": reason})
            return "success"
        if action == "Remove":
            if p.status == REMOVED:
                return "already_done"
            was_running = p.status == RUNNING
            self.queue.set_status(p, REMOVED, {"RemoveReason": reason}, when=now)
            ad = self.queue.ad(p)
            self.events.emit("aborted", ad, writer.aborted(p.cluster.id, p.id, now, reason), {"Reason": reason})
            if was_running:
                stops.append(p)
            else:
                self.queue.retire(p, when=now)
                self._count("JobsRemoved")
            return "success"
        if action == "SetAttribute":
            assert attr is not None
            name, value = attr
            if p.status in (REMOVED, COMPLETED):
                return "bad_status"
            self.queue.update(p, {name: value})
            if name.lower() in policy.POLICY_ATTRS_LOWER:
                self._policy_clusters.add(p.cluster.id)
            return "success"
        raise invalid(f"unknown action {action}")

    @method("scheduler")
    async def Hold(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return self._act(call, "Hold", Ids, Constraint, Reason)

    @method("scheduler")
    async def Release(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return self._act(call, "Release", Ids, Constraint, Reason)

    @method("scheduler")
    async def Remove(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return self._act(call, "Remove", Ids, Constraint, Reason)

    @method("scheduler")
    async def SetAttribute(self, call: Call, Ids: list, Constraint: Any, Name: str, Value: Any) -> dict:
        name = _check_attr_name(Name)
        return self._act(call, "SetAttribute", Ids, Constraint, "", (name, parse_value(Value, name)))

    @method("scheduler")
    async def GetAd(self, call: Call, Id: str) -> dict:
        return {"JobAd": self._job_ad(Id)}

    @method("scheduler")
    async def Fetch(self, call: Call, Id: str, File: str, Start: int, End: int) -> dict:
        return {"Data": self._fetch(call, Id, File, Start, End)}

    # ---- the same on job objects (named by GlobalJobId or "c.p")
    @method("job", "Hold")
    async def JobHold(self, call: Call, Reason: str) -> dict:
        return self._act(call, "Hold", [call.object], "", Reason)

    @method("job", "Release")
    async def JobRelease(self, call: Call, Reason: str) -> dict:
        return self._act(call, "Release", [call.object], "", Reason)

    @method("job", "Remove")
    async def JobRemove(self, call: Call, Reason: str) -> dict:
        return self._act(call, "Remove", [call.object], "", Reason)

    @method("job", "SetAttribute")
    async def JobSetAttribute(self, call: Call, Name: str, Value: Any) -> dict:
        name = _check_attr_name(Name)
        return self._act(call, "SetAttribute", [call.object], "", "", (name, parse_value(Value, name)))

    @method("job", "GetAd")
    async def JobGetAd(self, call: Call) -> dict:
        return {"JobAd": self._job_ad(call.object)}

    @method("job", "Fetch")
    async def JobFetch(self, call: Call, File: str, Start: int, End: int) -> dict:
        return {"Data": self._fetch(call, call.object, File, Start, End)}

    def _job_ad(self, job: str) -> dict[str, Any]:
        try:
            cid, pid = parse_job_id(job)
        except ValueError as exc:
            raise invalid(str(exc)) from None
        if pid is None:
            raise invalid(f"{job!r} names a cluster; GetAd needs one job ('cluster.proc')")
        ad = self.queue.get(cid, pid)
        if ad is None:
            self._settle()
            ad = self.queue.store.history_ad(cid, pid)
        if ad is None:
            raise unknown_object(f"{self.address} has no job {cid}.{pid} (not in the queue nor in the history)")
        return ad

    def _fetch(self, call: Call, job: str, which: str, start: int, end: int) -> str:
        user = call.require_user()
        ad = self._job_ad(job)
        if user != ad.get("Owner") and not self.is_super(user):
            raise forbidden(f"{user} may not read the files of job {ad['ClusterId']}.{ad['ProcId']} "
                            f"(owner {ad.get('Owner')}): only its owner or a queue super user may")
        attr = {"out": "Out", "stdout": "Out", "err": "Err", "stderr": "Err", "userlog": "UserLog",
                "log": "UserLog"}.get(which.lower())
        if attr is None:
            raise invalid(f"Fetch: File must be Out, Err or UserLog, not {which!r}")
        path = ad.get(attr)
        if not isinstance(path, str) or not path or path == "/dev/null":
            raise invalid(f"Fetch: job {ad['ClusterId']}.{ad['ProcId']} has no {attr} file")
        if not os.path.isabs(path):
            path = os.path.join(str(ad.get("Iwd", "/")), path)
        if end < start and not (start < 0 and end <= 0):
            raise invalid(f"Fetch: invalid start and end values ({start}, {end}): End must not be before Start")
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if start < 0:
                    first = max(0, size + start)
                    last = size + end if end < 0 else size
                else:
                    first = start
                    last = end if end > 0 else size
                last = min(last, size, first + FETCH_MAX)
                fh.seek(first)
                data = fh.read(max(0, last - first))
        except FileNotFoundError:
            raise MethodError(Status.USER + 10, f"Fetch: {path} does not exist (yet)") from None
        except OSError as exc:
            raise MethodError(Status.USER + 10, f"Fetch: cannot read {path}: {exc.strerror}") from None
        return data.decode("utf-8", "replace")

    # ------------------------------------------------------------------ Query and History
    @method("scheduler")
    async def Query(self, call: Call, Constraint: Any, Projection: list, Limit: int, Opts: int,
                    Compact: bool) -> AsyncIterator[dict]:
        trivial = _trivial(Constraint)
        test = None if trivial else _compile_constraint(Constraint)
        projection = _projection(Projection)
        if Opts & QUERY_SUMMARY:
            yield {"Jobs": self._summary(test)}
            return
        if Opts & QUERY_AUTOCLUSTER:
            yield {"Jobs": self._autocluster_rows(test, Limit)}
            return
        if Compact:
            async for part in self._query_compact(test, projection, Limit):
                yield part
            return
        chunk: list[dict[str, Any]] = []
        sent = 0
        for p in self.queue.procs():
            ad = self.queue.ad(p)
            if test is not None and not test(ad):
                continue
            chunk.append(_project(ad, projection))
            sent += 1
            if len(chunk) >= QUERY_CHUNK:
                yield {"Jobs": chunk}
                chunk = []
            if 0 <= Limit <= sent:
                break
        if chunk or not sent:
            yield {"Jobs": chunk}  # an empty answer still says Jobs = []

    async def _query_compact(self, test: Any, projection: list[str] | None, limit: int) -> AsyncIterator[dict]:
        """Each cluster ad once, each job as its own attributes: a listing of 100,000 jobs of a few
        clusters moves and decodes a few hundred bytes a job instead of the whole ad."""
        chunk: list[list[Any]] = []
        clusters: list[list[Any]] = []
        sent_clusters: set[int] = set()
        sent = 0
        for p in self.queue.procs():
            if test is not None and not test(self.queue.ad(p)):
                continue
            c = p.cluster
            if c.id not in sent_clusters:
                sent_clusters.add(c.id)
                clusters.append([c.id, _project(c.ad, projection)])
            own: dict[str, Any] = {"ProcId": p.id, "JobStatus": p.status, "GlobalJobId": self.queue.global_job_id(p)}
            deleted = []
            if p.attrs:
                for k, v in p.attrs.items():
                    if v is None:
                        deleted.append(k)
                    else:
                        own[k] = v
            chunk.append([c.id, _project(own, projection)] + ([deleted] if deleted else []))
            sent += 1
            if len(chunk) >= QUERY_CHUNK:
                yield {"Jobs": chunk, "ClusterAds": clusters}
                chunk, clusters = [], []
            if 0 <= limit <= sent:
                break
        if chunk or not sent:
            yield {"Jobs": chunk, "ClusterAds": clusters}

    def _summary(self, test: Any) -> list[dict[str, Any]]:
        per_owner: dict[str, list[int]] = {}
        if test is None:
            per_owner = {o: self.queue.totals(o) for o in self.queue.owners()}
        else:
            for p in self.queue.procs():
                if test(self.queue.ad(p)):
                    per_owner.setdefault(p.cluster.owner, [0] * 8)[p.status] += 1
        out = [_summary_ad(counts, owner) for owner, counts in sorted(per_owner.items())]
        total = [0] * 8
        for counts in per_owner.values():
            total = [a + b for a, b in zip(total, counts, strict=True)]
        out.append(_summary_ad(total, None))
        return out

    def _autocluster_rows(self, test: Any, limit: int) -> list[dict[str, Any]]:
        # (not `_autoclusters`: ShadowMixin keeps its AutoClusters object under that name)
        groups: dict[tuple, dict[str, Any]] = {}
        for p in self.queue.procs():
            if p.status != IDLE:
                continue
            ad = self.queue.ad(p)
            if test is not None and not test(ad):
                continue
            key = tuple(str(ad.get(a)) for a in AUTOCLUSTER_ATTRS)
            g = groups.get(key)
            if g is None:
                g = {a: ad[a] for a in AUTOCLUSTER_ATTRS if a in ad}
                g.update({"AutoClusterId": len(groups), "JobCount": 0, "JobIds": []})
                groups[key] = g
            g["JobCount"] += 1
            if len(g["JobIds"]) < 100:
                g["JobIds"].append(f"{p.cluster.id}.{p.id}")
        out = list(groups.values())
        return out if limit < 0 else out[:limit]

    @method("scheduler")
    async def History(self, call: Call, Constraint: Any, Projection: list, Limit: int, Since: str) -> AsyncIterator[dict]:
        test = None if _trivial(Constraint) else _compile_constraint(Constraint)
        projection = _projection(Projection)
        self._settle()
        since_seq = 0
        if Since:
            try:
                cid, pid = parse_job_id(Since)
            except ValueError as exc:
                raise invalid(f"History: Since: {exc}") from None
            found = self.queue.store.history_seq_of(cid, pid)
            if found is None:
                raise invalid(f"History: Since names job {Since}, which is not in the history")
            since_seq = found
        chunk: list[dict[str, Any]] = []
        sent = 0
        from gridbus.agents.schedd.store import unpack

        for _seq, _c, _p, blob in self.queue.store.history(since_seq):
            ad = unpack(blob)
            if test is not None and not test(ad):
                continue
            chunk.append(_project(ad, projection))
            sent += 1
            if len(chunk) >= QUERY_CHUNK:
                yield {"Jobs": chunk}
                chunk = []
            if 0 <= Limit <= sent:
                break
        if chunk or not sent:
            yield {"Jobs": chunk}  # an empty answer still says Jobs = []

    # ------------------------------------------------------------------ job objects (getObjects)
    def resolve_object(self, name: str) -> str | None:
        if name == self.address:
            return "scheduler"
        try:
            cid, pid = parse_job_id(name)
        except ValueError:
            return None
        if pid is None:
            return None
        if self.queue.proc(cid, pid) is not None:
            return "job"
        self._settle()
        if self.queue.store.history_seq_of(cid, pid) is not None:
            return "job"
        return None

    async def find_objects(self, class_name: str | None, filters: dict[str, Any], user: str | None) -> list[dict]:
        if class_name != "job":
            return await super().find_objects(class_name, filters, user)
        methods = self._method_names("job")
        out = []
        for p in self._filtered_procs(filters):
            ad = self.queue.ad(p)
            props = {**ad, "CustomId": f"{self.name}#{p.cluster.id}.{p.id}"}
            if any(props.get(k) != v for k, v in filters.items()):
                continue
            out.append({"class": "job", "name": ad["GlobalJobId"], "agent": self.address, "properties": props,
                        "statistics": {}, "methods": methods})
            if len(out) >= self.settings.max_job_objects:
                self.log.warning("getObjects(job) answered the first %d jobs only (SCHEDD_MAX_JOB_OBJECTS)", len(out))
                break
        return out

    def _filtered_procs(self, filters: dict[str, Any]) -> Iterable[Proc]:
        """Jobs that may match ``filters``, using the ids and owner index where the filter names them."""
        gid = filters.get("GlobalJobId") or filters.get("CustomId")
        if isinstance(gid, str):
            try:
                cid, pid = parse_job_id(gid)
            except ValueError:
                return []
            p = self.queue.proc(cid, pid) if pid is not None else None
            return [p] if p else []
        cid = filters.get("ClusterId")
        if isinstance(cid, int):
            c = self.queue.clusters.get(cid)
            return [c.procs[k] for k in sorted(c.procs)] if c else []
        owner = filters.get("Owner")
        return self.queue.procs(owner if isinstance(owner, str) else None)

    # ------------------------------------------------------------------ periodic policy
    def _cluster_has_policy(self, c: Cluster) -> bool:
        return policy.has_periodic(c.keys) or any(
            p.attrs and any(k.lower() in policy.POLICY_ATTRS_LOWER for k in p.attrs) for p in c.procs.values()
        )

    async def _periodic_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.periodic_interval)
            try:
                self.evaluate_periodic()
                self.prune_history()
            except Exception:
                self.log.exception("periodic policy evaluation failed")

    def evaluate_periodic(self) -> int:
        """Evaluate PeriodicHold/Release/Remove of every job that has them; returns actions taken."""
        acted = 0
        now = time.time()
        stops: list[Proc] = []
        for cid in sorted(self._policy_clusters):
            c = self.queue.clusters.get(cid)
            if c is None:
                self._policy_clusters.discard(cid)
                continue
            for pid in sorted(c.procs):
                p = c.procs.get(pid)
                if p is None:
                    continue
                decision = policy.periodic(self.queue.ad(p))
                if decision is None:
                    continue
                acted += 1
                was_running = p.status == RUNNING
                if decision.action == policy.HOLD:
                    self._hold(p, decision.reason, decision.code, decision.subcode, None, now)
                    if was_running:
                        stops.append(p)
                elif decision.action == policy.RELEASE:
                    self.queue.set_status(p, IDLE, {"ReleaseReason": decision.reason, "HoldReason": None,
                                                    "HoldReasonCode": None, "HoldReasonSubCode": None}, when=now)
                    self.events.emit("released", self.queue.ad(p),
                                     writer.released(cid, pid, now, decision.reason), {"Reason": decision.reason})
                elif decision.action == policy.REMOVE:
                    self.queue.set_status(p, REMOVED, {"RemoveReason": decision.reason}, when=now)
                    self.events.emit("aborted", self.queue.ad(p),
                                     writer.aborted(cid, pid, now, decision.reason), {"Reason": decision.reason})
                    if was_running:
                        stops.append(p)
                    else:
                        self.queue.retire(p, when=now)
        if acted:
            self.commit()
            for p in stops:
                self.spawn(self._stop_then(p), "stop-job")
            self.ads_changed()
        return acted

    def prune_history(self) -> int:
        return self.queue.store.prune_history(time.time() - self.settings.history_retention,
                                              self.settings.history_max_jobs)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _int_attr(ad: dict[str, Any], name: str) -> int:
    value = submission.lookup(ad, name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid(f"Submit: {name} must be a non-negative integer, got {value!r}")
    return value


def _check_attr_name(name: str) -> str:
    if not ATTR_NAME.fullmatch(name or "") or name.lower() in RESERVED_WORDS:
        raise invalid(f"SetAttribute: {name!r} is not a valid attribute name (letters, digits and _, not a reserved word)")
    if name.lower() in SCHEDD_OWNED:
        raise forbidden(f"SetAttribute may not change {name}: the schedd keeps it "
                        "(use Hold, Release or Remove to change a job's status)")
    return name


def _trivial(constraint: Any) -> bool:
    text = str(constraint).strip().lower() if constraint is not None else ""
    return text in ("", "true", "1")


def _compile_constraint(constraint: Any) -> Any:
    from gridbus import classad

    text = str(constraint)
    try:
        compiled = classad.compile(text)
    except Exception as exc:
        raise invalid(f"the constraint {text!r} is not a valid ClassAd expression: {exc}") from None
    return compiled.test


def _projection(projection: list) -> list[str] | None:
    if not projection:
        return None
    names = []
    for name in projection:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise invalid(f"Projection: {name!r} is not an attribute name")
        names.append(name)
    return names


def _project(ad: dict[str, Any], names: list[str] | None) -> dict[str, Any]:
    if names is None:
        return ad
    out = {}
    lowered: dict[str, str] | None = None
    for name in names:
        if name in ad:
            out[name] = ad[name]
            continue
        if lowered is None:
            lowered = {k.lower(): k for k in ad}
        key = lowered.get(name.lower())
        if key is not None:
            out[key] = ad[key]
    return out


def _summary_ad(counts: list[int], owner: str | None) -> dict[str, Any]:
    ad: dict[str, Any] = {"MyType": "Summary", "Jobs": sum(counts)}
    for status, name in STATUS_NAMES.items():
        ad[name] = counts[status]
    if owner is not None:
        ad["Owner"] = owner
    return ad

