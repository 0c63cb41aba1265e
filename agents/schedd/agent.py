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
SCHEDD_WRITE_BEHIND seconds (default 5 ms), batched with every other change of that moment
(the shadows' claim rows included: ``self.commit_soon()`` after a claim change). A Submit and a
job action are answered only after their commit.

Where the parts live: the Submit method in submitting.py, the API above and the status changes
it shares with the actions in jobstate.py, Hold/Release/Remove/SetAttribute in job_actions.py,
GetAd/Fetch and job objects in job_objects.py, Query/History in queries.py, the Scheduler and
Submitter ads in ads.py, the periodic policy in policy_loop.py, the scheduler universe (jobs run on the submit host, DAGMan)
in scheduniv.py, the shadows in shadows.py; the
state they share is declared in parts.py. This module assembles them with the commits and the
stop order.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from pathlib import Path
from typing import Any

from gridbus.agent import Agent
from gridbus.agent.objects import ManagedObject
from gridbus.agents.schedd import owner_shadow
from gridbus.agents.schedd.ads import COUNTERS, AdsMixin
from gridbus.agents.schedd.job_actions import JobActionsMixin
from gridbus.agents.schedd.job_objects import JobObjectsMixin
from gridbus.agents.schedd.jobevents import JobEvents
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.jobstate import JobStateMixin
from gridbus.agents.schedd.policy_loop import PolicyLoopMixin
from gridbus.agents.schedd.queries import QueriesMixin
from gridbus.agents.schedd.scheduniv import SchedulerUniverseMixin
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import ShadowMixin
from gridbus.agents.schedd.submitting import SubmitMixin


class Schedd(SubmitMixin, JobActionsMixin, JobObjectsMixin, QueriesMixin, SchedulerUniverseMixin, JobStateMixin,
             PolicyLoopMixin, AdsMixin, ShadowMixin, Agent):
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
        self.request_queue_type = settings.request_queue_type
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
        owner_shadow.attach(self)  # user logs and Fetch go through the owners' shadows
        self.super_users = frozenset(settings.super_users)
        self._flush_handle: asyncio.TimerHandle | None = None
        self._queue_closed = False
        self._policy_clusters: set[int] = {c.id for c in self.queue.clusters.values() if self._cluster_has_policy(c)}
        self._rates: deque[tuple[float, str, int]] = deque()
        self.cum = dict.fromkeys(COUNTERS, 0)

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
        self.spawn(owner_shadow.retain_loop(self), "owner-shadows")
        self.spawn(self._periodic_loop(), "periodic-policy")
        await super().on_start()

    async def on_stop(self) -> None:
        # Runs first in Agent.stop, while the connection is up: commit what is there and
        # publish the events still queued. Handlers and tasks may still change jobs and claims
        # until stop() below has closed the connection; the last commit comes after that.
        try:
            await super().on_stop()
        finally:
            try:
                self.commit()
            except Exception:
                self.log.exception("committing the job queue at stop failed (retried at the close)")
            await self.events.drain()

    async def stop(self) -> None:
        """Graceful stop: Agent.stop (on_stop, the ads invalidated, background tasks cancelled,
        the connection closed), then the last commit of the job queue and the claims, and the
        close of the SQLite file. Nothing is left that could change a job or a claim by then:
        no handler runs, no task, and the write-behind timer is cancelled by that commit."""
        try:
            await super().stop()
        finally:
            self._close_queue()
            await owner_shadow.close(self)

    def _close_queue(self) -> None:
        if self._queue_closed:
            return
        try:
            self.commit()
        except Exception:
            self.log.exception("the last commit of the job queue failed")
        finally:
            self._queue_closed = True
            self.queue.store.close()

    # ------------------------------------------------------------------ commits
    def commit(self) -> None:
        """Write every pending change now, the shadows' claim rows in the same transaction, then
        append the user logs."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._queue_closed:
            raise RuntimeError(f"the job queue of {self.address} is closed (the schedd has stopped)")
        made = self.queue.take_materialized()
        by_cluster: dict[int, list[Proc]] = {}
        for p in made:
            by_cluster.setdefault(p.cluster.id, []).append(p)
        for procs in by_cluster.values():
            self._log_submit(procs[0].cluster, procs)
        self.queue.add_writes(self.take_claim_writes())
        self.queue.flush()

    def _settle(self) -> None:
        """Commit the changes waiting for the write-behind before reading the history from disk."""
        if self.queue.dirty:
            self.commit()

    def commit_soon(self) -> None:
        """Batch the shadows' changes: one commit a few milliseconds after the first of them."""
        if self._flush_handle is None and not self._queue_closed:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(self.settings.write_behind, self._flush_later)

    def _flush_later(self) -> None:
        self._flush_handle = None
        try:
            self.commit()
        except Exception:
            self.log.exception("committing the job queue failed; retrying")
            self.commit_soon()

    # ------------------------------------------------------------------ identity and authorization
    def is_super(self, user: str | None) -> bool:
        return bool(user) and (user in self.super_users or self.is_admin(user))

    def may_act(self, user: str | None, p: Proc) -> bool:
        return bool(user) and (user == p.cluster.owner or self.is_super(user))
