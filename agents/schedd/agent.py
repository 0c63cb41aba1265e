"""The schedd: a few objects with one job each, composed here and handed to one another.

::

                          gridbus submit / q / rm ...        negotiator          startds
                                    |                          |                   |
        Submission  Queries  JobActions  JobObjects     Negotiation           Reports  Leases
        (Submit)    (Query,  (Hold, Rm,  (GetAd,        (GetResource-         (Job-    (Alive)
                    History) SetAttr)    Fetch)          Requests, Match)      Reports)
            |          |         |           |               |                   |       |
            |          |         +--> JobState <------------ Shadows <-----------+-------+
            |          |              (status, policy,       (activations, claim reuse,
            |          |               events)  |             applying reports)
            |          |                 |      |                  |
            |          |       PeriodicPolicy   +--> JobEvents --> UserLogs --> owner shadows
            |          |                 |           (bus events)   (per-owner    (processes
            v          v                 v                           writers)      as owners)
        JobQueue (jobqueue.py: in memory; store.py: SQLite) <-- Commits (commits.py: worker thread)
                                                            <-- Claims  (claims.py: shadow_claims)

- The job queue: ``JobQueue`` (jobqueue.py) holds the queue in memory; ``Commits`` (commits.py)
  writes it to SQLite (store.py) in a worker thread, now (a Submit, an action, a JobReports
  batch: answered only after it) or soon (the write-behind, SCHEDD_WRITE_BEHIND).
- The job state: ``JobState`` (jobstate.py) makes every status change, applies the exit policy
  (policy.py) and records the job's events (jobevents.py), whose user-log text the owners'
  shadows write (userlogs.py, owner_shadow.py); ``PeriodicPolicy`` (policy_loop.py) runs the
  periodic expressions; ``LocalUniverse`` (scheduniv.py) runs scheduler-universe jobs (DAGMan).
- The shadows: ``Claims`` (claims.py) are the claimed slots, ``Shadows`` (shadows.py) the jobs'
  lives on them, ``Negotiation`` (negotiation.py), ``Reports`` (reports.py) and ``Leases``
  (leases.py) the calls that drive them.
- The client calls: ``Submission`` (submitting.py, rules in submission.py), ``Queries``
  (queries.py), ``JobActions`` (job_actions.py), ``JobObjects`` (job_objects.py); ``Ads``
  (ads.py) the Scheduler and Submitter ads; ``Users`` (users.py) who may act on whose jobs.
- File transfer: ``Transfers`` (transfers.py) opens a job's sandbox transfer for the startd that
  runs it (OpenTransfer), through the owner's shadow; ``Spooling`` (spooling.py) keeps the input
  and output of remotely submitted jobs in the spool and serves their transfers itself.

Each part is given what it uses in its constructor; the parts with @method handlers are listed
in ``part_classes`` and served through ``Agent.add_parts`` (gridbus/agent/core.py). Two links go
back up and are wired here, through this object, because both ends need the other: the job
state stops a running job through ``stop_running_job`` (the scheduler universe's process, else
the claim's startd), and the user-log writer holds the jobs of a log it cannot write through
``JobState.hold_for_log``. docs/architecture.md follows a job through these parts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from pathlib import Path
from typing import Any

from gridbus.agent import Agent
from gridbus.agent.connection import declare_event_stream
from gridbus.agent.objects import ManagedObject
from gridbus.agents.schedd import limits, owner_shadow
from gridbus.agents.schedd.ads import Ads, Counters
from gridbus.agents.schedd.checkpoints import Checkpointing, CheckpointStore
from gridbus.agents.schedd.claims import Claims
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.inline_sandboxes import InlineSandboxes
from gridbus.agents.schedd.job_actions import JobActions
from gridbus.agents.schedd.job_objects import JobObjects
from gridbus.agents.schedd.jobattrs import RUNNING
from gridbus.agents.schedd.jobevents import JobEvents
from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.jobstate import JobState
from gridbus.agents.schedd.leases import Leases
from gridbus.agents.schedd.negotiation import Negotiation
from gridbus.agents.schedd.outbox import Outbox
from gridbus.agents.schedd.policy_loop import PeriodicPolicy
from gridbus.agents.schedd.queries import Queries
from gridbus.agents.schedd.reports import Reports
from gridbus.agents.schedd.scheduniv import LocalUniverse
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import Shadows
from gridbus.agents.schedd.spooling import Spooling
from gridbus.agents.schedd.submitting import Submission
from gridbus.agents.schedd.transfers import Transfers
from gridbus.agents.schedd.userlogs import UserLogs
from gridbus.agents.schedd.users import Users
from gridbus.autocluster import AutoClusters
from gridbus.rpc import MethodResult

# The schedd's knobs a reconfig applies (SUBMIT_REQUIREMENT_<Name> and JOB_TRANSFORM_<Name> too; besides those every agent
# applies, Agent.RUNTIME_KNOBS, but for UPDATE_INTERVAL), and those that need a restart.
LOCAL_START_LOG_WAIT = 60.0  # seconds the scheduler universe waits at the start for owed user-log text

SCHEDD_KNOBS = frozenset({
    "SCHEDD_INTERVAL", "PERIODIC_EXPR_INTERVAL", "SCHEDD_HISTORY_RETENTION", "SCHEDD_HISTORY_MAX_JOBS",
    "SCHEDD_WRITE_BEHIND", "SCHEDD_MAX_JOB_OBJECTS", "QUEUE_SUPER_USERS", "SUBMIT_REQUIREMENT_NAMES", "UID_DOMAIN",
    "CLAIM_WORKLIFE", "JOB_LEASE_DURATION", "SHADOW_CALL_TIMEOUT", "SCHEDD_MAX_SCHEDULER_JOBS",
    "SCHEDD_RUN_LOCAL_JOBS_AS_SELF", "SCHEDD_LOCAL_KILL_TIMEOUT", "OWNER_SHADOW_CHECK_INTERVAL",
    "TRANSFER_STALL_TIMEOUT", "MAX_INLINE_TRANSFER_KB", "TRANSFER_DIRECT_IO_MIN_MB",
    "SPOOL_SWEEP_INTERVAL",
    "JOB_TRANSFORM_NAMES", "MAX_JOBS_PER_OWNER", "MAX_JOBS_PER_SUBMISSION", "MAX_JOBS_RUNNING",
})
RESTART_KNOBS = frozenset({"SCHEDD_NAME", "SPOOL", "SCHEDD_QUEUE_SYNC", "SCHEDD_REQUEST_QUEUE_TYPE",
                           "SCHEDD_DURABLE_EVENTS", "JOB_EVENT_STREAM_MAX_AGE"})


class Schedd(Agent):
    kind = "schedd"
    # "job" is listed so getObjects(_class="job") reaches this agent (class.job binding); its
    # objects are made on demand by find_objects/resolve_object, never registered.
    classes = ("scheduler", "job")
    my_type = "Scheduler"
    durable_requests = True
    part_classes = (Submission, Queries, JobActions, JobObjects, Negotiation, Reports, Transfers, Spooling)

    def __init__(self, name: str | None = None, url: str | None = None, *, settings: ScheddSettings | None = None,
                 spool: str | Path | None = None, owner_shadows: owner_shadow.OwnerShadows | None = None, **kw: Any):
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
        # The job queue.
        self.queue = JobQueue(spool_dir / "job_queue.sqlite3", self.name, synchronous=settings.queue_sync)
        self.reload_seconds = time.monotonic() - started
        self.commits = Commits(self.queue, settings.write_behind)
        # The job state, its events and the user logs (through the owners' shadows, as the owners).
        self.owner_shadows = owner_shadows or owner_shadow.for_schedd(lambda: self.config, self.url.url)
        # What the commits owe the user logs and the bus, kept in the job queue until delivered.
        self.outbox = (Outbox(self.queue.store, self.queue.add_writes, self.commits.soon)
                       if settings.durable_events else None)
        self.user_logs = UserLogs(self.owner_shadows, lambda owner, path, why: self.state.hold_for_log(owner, path, why),
                                  self.outbox.delivered_rows if self.outbox is not None else None)
        self.events = JobEvents(self.publish_event, self.address, self.user_logs, self.outbox)
        self.queue.on_take.append(self.events.seal)
        self.queue.on_flush.append(self.events.write_logs)
        self.counters = Counters()
        self.users = Users(settings, self.is_admin)
        self.state = JobState(self.queue, self.commits, self.events, self.counters,
                              lambda cluster, proc: self.stop_running_job(cluster, proc),
                              self.ads_changed, self.spawn)
        self.policy = PeriodicPolicy(self.queue, self.state, self.commits, settings, self.ads_changed)
        self.local = LocalUniverse(self.address, self.queue, self.state, self.spawn, settings,
                                   self.owner_shadows.account_for)
        # The shadows.
        self.claims = Claims(self.queue, self.commits, self._call_daemon, self.spawn, settings)
        self.shadows = Shadows(self.queue, self.claims, self.state, self.spawn, settings)
        self.checkpoint_store = CheckpointStore(settings.spool, self.owner_shadows.account_for)
        self.shadows.checkpoints = Checkpointing(self.queue, self.commits, self.events, self.checkpoint_store,
                                                 self.ads_changed, self.state.run_so_far)
        self.queue.on_left_idle.append(self.shadows.job_left_idle)  # a job queued ahead is withdrawn
        self.autoclusters = AutoClusters()
        self.negotiation = Negotiation(self.address, self.queue, self.claims, self.shadows, self.autoclusters,
                                       self.spawn, settings)
        self.reports = Reports(self.claims, self.shadows, self.state, self.commits)
        self.leases = Leases(self.address, self.queue, self.claims, self.state, self.spawn, settings)
        # The client calls and the ads.
        self.submission = Submission(self.name, self.address, self.queue, self.commits, self.events, self.user_logs,
                                     self.counters, self.users, self.policy, settings, self.daemon_ad,
                                     self.ads_changed)
        self.queries = Queries(self.queue, self.commits, self.autoclusters)
        self.actions = JobActions(self.queue, self.state, self.claims, self.events, self.users, self.policy,
                                  self.commits, self.spawn, self.ads_changed)
        self.job_objects = JobObjects(self.name, self.address, self.queue, self.owner_shadows, self.users, settings)
        self.scheduler_ads = Ads(self.name, self.address, self.queue, self.counters)
        # File transfer and spooling.
        self.spooling = Spooling(self.address, self.queue, self.state, self.commits, self.users, settings,
                                 lambda: self._connection, self.spawn, self.ads_changed)
        self.user_logs.schedd_owned = self.spooling.owns_log  # a spooled job's log is in the spool
        self.inline_sandboxes = InlineSandboxes(self.address, self.queue, self.claims, self.owner_shadows,
                                                self.spooling.is_spooled, lambda: self.settings.inline_transfer_max,
                                                self.checkpoint_store)
        self.transfers = Transfers(self.queue, self.claims, self.owner_shadows, self.spooling, settings,
                                   self.checkpoint_store, self.inline_sandboxes.stats)
        self.shadows.attach_inline = self.inline_sandboxes.attach
        self.reports.inline = self.inline_sandboxes
        self.queue.on_materialized.append(self.submission.log_submit)
        self.add_parts(self.submission, self.queries, self.actions, self.job_objects, self.negotiation, self.reports,
                       self.transfers, self.spooling)

    @classmethod
    def from_config(cls, cfg: Any, *, name: str | None = None, url: str | None = None, **overrides: Any) -> Schedd:
        settings = ScheddSettings.from_config(cfg, **overrides)
        return cls(name or cfg.get("SCHEDD_NAME") or None, url or cfg.url(), settings=settings)

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        self.events.start()
        self.events.replay()  # what a crash left owed goes before anything new
        await super().setup()
        if self._channel is not None:  # None: set up without a broker (unit tests)
            self.connection.watch(await self.leases.listen(self._channel))
            if self.settings.event_stream_max_age and self.connection.robust is not None:
                # The replay path for consumers that were away (docs/protocols.md, "Events").
                await declare_event_stream(self.connection.robust, self.settings.event_stream_max_age, self.log)

    async def on_start(self) -> None:
        self.local.kill_leftovers()  # a dead run's DAGMans, before their jobs are started again
        self.spawn(self.events.pump(), "job-events")
        self.spawn(self._retain_shadows(), "owner-shadows")
        self.spawn(self.policy.run(), "periodic-policy")
        await super().on_start()
        self.spawn(self._local_after_logs(), "scheduler-universe")
        self.spawn(self.spooling.sweep_loop(), "spool-sweep")
        await self.shadows.reconcile_after_restart()
        self.spawn(self.leases.run(), "claim-leases")

    async def _local_after_logs(self) -> None:
        """The scheduler universe starts once the user-log text owed at the start is written: a
        DAGMan started again after a crash recovers from its nodes log, and a submit event still
        owed there (the previous run's, or that of a Submit its killed predecessor sent just
        before) would have it submit the node a second time."""
        if not await self.user_logs.written(timeout=LOCAL_START_LOG_WAIT):
            self.log.warning("user-log text owed at the start not written in %.0f s: starting the "
                             "scheduler universe jobs anyway", LOCAL_START_LOG_WAIT)
        await self.local.run()

    async def on_stop(self) -> None:
        # Runs first in Agent.stop, while the connection is up: commit what is there and
        # publish the events still queued. Handlers and tasks may still change jobs and claims
        # until stop() below has closed the connection; the last commit comes after that.
        self.local.stop_all()
        try:
            await super().on_stop()
        finally:
            try:
                await self.commits.now()
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
            # The appends under way end first, so the last commit deletes their outbox rows
            # (else the next start would write them again).
            await self.user_logs.written(timeout=5.0)
            await self.commits.close()
            await self.user_logs.close()

    async def _retain_shadows(self) -> None:
        """Stop the shadows of owners without running jobs (nor jobs being started, nor file
        transfers), every OWNER_SHADOW_CHECK_INTERVAL."""
        while True:
            await asyncio.sleep(self.settings.shadow_check_interval)
            counts = self.queue.counts
            running = {o for o, c in counts.items() if c[RUNNING] > 0}
            await self.owner_shadows.retain(running | self.claims.owners_starting())

    # ------------------------------------------------------------------ wiring between parts
    async def _call_daemon(self, address: str, method_name: str, args: dict[str, Any], timeout: float) -> MethodResult:
        return await self.client.call(address, method_name, args, timeout=timeout)

    async def stop_running_job(self, cluster: int, proc: int) -> bool:
        """Stop a running job for a Hold or Remove: the scheduler universe's own, else on its claim."""
        if await self.local.stop(cluster, proc):
            return True
        return await self.claims.stop_running_job(cluster, proc)

    # ------------------------------------------------------------------ the framework's hooks
    def daemon_ad(self) -> dict[str, Any]:
        s = self.settings
        return {**super().daemon_ad(), **self.scheduler_ads.scheduler(self.start_time),
                "MaxJobsRunning": s.max_jobs_running, "MaxJobsPerOwner": s.max_jobs_per_owner,
                "MaxJobsPerSubmission": s.max_jobs_per_submission}

    def ads(self) -> list[dict[str, Any]]:
        return [self.daemon_ad(), *self.scheduler_ads.submitters()]

    def object_statistics(self) -> dict[str, Any]:
        return {**self.stats, **self.scheduler_ads.statistics(), **self.claims.statistics(), **self.inline_sandboxes.stats}

    def is_super(self, user: str | None) -> bool:
        return self.users.is_super(user)

    def object_owner(self, class_name: str, name: str) -> str | None:
        return self.job_objects.object_owner(class_name, name)

    def resolve_object(self, name: str) -> str | None:
        return self.job_objects.resolve_object(name)

    async def find_objects(self, class_name: str | None, filters: dict[str, Any], user: str | None) -> list[dict]:
        if class_name != "job":
            return await super().find_objects(class_name, filters, user)
        return self.job_objects.find_jobs(filters, self._method_names("job"))

    # ------------------------------------------------------------------ reconfiguration
    async def reconfig(self) -> list[str]:
        """Re-read the configuration and apply the schedd's knobs that change without a restart;
        returns (and so the runner logs) only the knobs applied. The schedd's ads follow
        SCHEDD_INTERVAL, never UPDATE_INTERVAL, which the base would apply."""
        interval, lifetime = self.update_interval, self.lifetime
        changed = await super().reconfig()
        self.update_interval, self.lifetime = interval, lifetime
        try:
            new = ScheddSettings.from_config(self.config, spool=self.settings.spool)
        except ValueError as exc:
            self.log.warning("reconfig: the configuration was not applied: %s", exc)
            return []
        live = SCHEDD_KNOBS | (self.RUNTIME_KNOBS - {"UPDATE_INTERVAL"})
        applied = [n for n in changed if n in live or n.startswith(("SUBMIT_REQUIREMENT_", "JOB_TRANSFORM_"))]
        # Every part holds this settings object: it changes in place. What needs a restart keeps
        # its value: the file, the queue's sync mode, the queue type.
        for f in dataclasses.fields(new):
            if f.name not in ("spool", "queue_sync", "request_queue_type", "durable_events"):
                setattr(self.settings, f.name, getattr(new, f.name))
        self.commits.write_behind = new.write_behind
        if "MAX_JOBS_RUNNING" in changed:
            self.spawn(limits.preempt_over_limit(self.claims, self.settings), "MAX_JOBS_RUNNING")
        if "SCHEDD_INTERVAL" in changed:
            was_default_lifetime = self.lifetime == 3 * self.update_interval
            self.update_interval = new.update_interval
            if was_default_lifetime:
                self.lifetime = 3 * self.update_interval
            self.ads_changed()
        later = [n for n in changed if n in RESTART_KNOBS]
        if later:
            self.log.warning("reconfig: %s changed but apply only at the schedd's restart", ", ".join(later))
        if applied:
            self.log.info("reconfig applied %s", ", ".join(applied))
        return applied

    # ------------------------------------------------------------------ identity and authorization
