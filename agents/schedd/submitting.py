"""NewCluster and Submit: a cluster from finished job ads, committed before the answer, idempotent by
SubmissionId; the submit events. The rules it applies are submission.py's.

The schedd never reads submit text (a description's `include command :` or `queue from script |`
would run as the schedd): the submitting client asks NewCluster for the cluster id, expands the
description itself and sends the job ads, as condor_submit does. For late materialization it sends
a proc template that this schedd fills in per proc (gridbus.submit.materialize), nothing more."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gridbus import attrs
from gridbus.agent import Call, method
from gridbus.agents.schedd import limits, submission
from gridbus.agents.schedd.ads import Counters
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobevents import JobEvents
from gridbus.agents.schedd.jobqueue import Cluster, JobQueue, Proc
from gridbus.agents.schedd.policy_loop import PeriodicPolicy
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.userlogs import UserLogs
from gridbus.agents.schedd.users import Users
from gridbus.eventlog import writer
from gridbus.status import MethodError, Status, forbidden, invalid

log = logging.getLogger("gridbus.schedd.submission")

# Cluster ids handed out by NewCluster and not yet used that the schedd remembers (per schedd).
MAX_RESERVED = 10_000
SUBMIT_LOG_WAIT = 10.0  # seconds a Submit waits at most for its submit events to be in the user log


class Submission:
    def __init__(self, name: str, address: str, queue: JobQueue, commits: Commits, events: JobEvents,
                 user_logs: UserLogs, counters: Counters, users: Users, policy: PeriodicPolicy,
                 settings: ScheddSettings, daemon_ad: Callable[[], dict[str, Any]], ads_changed: Callable[[], None]):
        self.name = name
        self.address = address
        self.queue = queue
        self.commits = commits
        self.events = events
        self.user_logs = user_logs
        self.counters = counters
        self.users = users
        self.policy = policy
        self.settings = settings
        self._daemon_ad = daemon_ad
        self._ads_changed = ads_changed
        # Cluster ids NewCluster handed out and no Submit used yet: id -> the user it went to.
        self._new_clusters: dict[int, str] = {}

    @method("scheduler")
    async def NewCluster(self, call: Call) -> dict:
        """HTCondor's NewCluster: a cluster id for the caller's next Submit (an unused one is harmless)."""
        caller = call.require_user()
        cluster_id = self.queue.new_cluster_id()
        reserved = self._new_clusters
        reserved[cluster_id] = caller
        while len(reserved) > MAX_RESERVED:  # the oldest ids handed out and never used are forgotten
            del reserved[next(iter(reserved))]
        # Written with the next batch, not at once: an id a crashed schedd hands out again is harmless,
        # since its reservation is gone too (a Submit naming it is refused and the client asks anew).
        self.commits.soon()
        return {"ClusterId": cluster_id}

    @method("scheduler")
    async def Submit(self, call: Call, Ad: Any, Procs: list, Count: int, Submit: dict, SubmissionId: str,
                     ClusterId: int) -> dict:
        caller = call.require_user()
        ad = submission.normalize_ad(Ad)
        owner = submission.resolve_owner(ad, caller, self.users.is_super(caller))
        late = submission.check_late(Submit)
        digest = ""
        if SubmissionId:
            # The fingerprint is of the request as sent, so a retry matches whatever time it comes.
            digest = submission.digest(ad, [p for p in Procs if isinstance(p, dict)], Count, Submit, ClusterId)
            seen = self.queue.submission(owner, SubmissionId)
            if seen is not None:
                if seen[0] != digest:
                    raise submission.reused_id(SubmissionId, seen[1]["ClusterId"])
                return seen[1]
        diffs = submission.proc_diffs(Procs) if Procs else []
        if late is not None:
            if diffs:
                raise invalid("Submit: send either Procs or a proc template (Submit.Template), not both")
            count = late.count
        else:
            count = len(diffs) if diffs else Count
        if count < 1:
            raise invalid("Submit: a cluster needs at least one proc (Count >= 1 or a non-empty Procs)")
        first_diff = late.proc(0) if late is not None else (diffs[0] if diffs else {})
        submission.check_required({**ad, **first_diff})
        for diff in diffs[1:]:
            # A required attribute may differ from proc to proc (initialdir = dir_$(Process)).
            if submission.touches_required(diff):
                submission.check_required({**ad, **diff})
        max_idle = _int_attr(ad, "JobMaterializeMaxIdle")
        limit = _int_attr(ad, "JobMaterializeLimit")
        if late is not None and not (max_idle or limit):
            raise invalid("Submit: a proc template (Submit.Template) is for a cluster materialized late "
                          "(JobMaterializeMaxIdle or JobMaterializeLimit in the Ad); send Procs otherwise")
        if max_idle or limit:
            # A factory makes its procs as it goes: MAX_JOBS_PER_SUBMISSION bounds the procs it
            # keeps in the queue at once, as it bounds HTCondor's job factories.
            per_submission = self.settings.max_jobs_per_submission
            if per_submission < 1:  # (a factory's Limit of 0 is no limit: none may be made, so refuse)
                limits.check_submit(self.settings, owner, 0, 1)
            limit = min(limit or per_submission, per_submission)
        else:
            limits.check_submit(self.settings, owner, sum(self.queue.counts.get(owner, ())), count)
        if ClusterId:
            self._take_reserved(ClusterId, caller)
        qdate = int(time.time())
        cluster_id = ClusterId or self.queue.next_cluster
        if self.settings.job_transforms or self.settings.submit_requirements:
            if self.settings.job_transforms:
                # The transforms first, then the submit requirements see the transformed job.
                base = self._first_job(ad, {}, owner, cluster_id, qdate)
                submission.apply_transforms(self.settings.job_transforms, base, first_diff, ad, diffs,
                                            late.template if late is not None else None)
                first_diff = late.proc(0) if late is not None else (diffs[0] if diffs else {})
            first = self._first_job(ad, first_diff, owner, cluster_id, qdate)
            if self.settings.job_transforms:
                submission.check_required(first)
            if self.settings.submit_requirements:
                submission.check_requirements(self.settings.submit_requirements, first, self._daemon_ad())
        if not ClusterId:
            cluster_id = self.queue.new_cluster_id()
        else:
            self._new_clusters.pop(ClusterId, None)
        cluster_ad, status = submission.build_cluster_ad(ad, owner=owner, uid_domain=self.settings.uid_domain,
                                                         cluster_id=cluster_id, qdate=qdate)
        c = self.queue.add_cluster(cluster_id, owner, cluster_ad, diffs or None, count, status=status,
                                   max_idle=max_idle, limit=limit,
                                   template=late.wire() if late is not None else None)
        answer = {"ClusterId": cluster_id, "FirstProc": 0, "NumProcs": count, "Id": f"{self.name}#{cluster_id}.0"}
        if SubmissionId:
            self.queue.record_submission(owner, SubmissionId, digest, answer)
        self.policy.watch(c)
        if c.factory is None:
            # Recorded now, written with the commit: claim reuse may start a proc (and see it end)
            # before the commit is on disk, and its submit event must come before the others.
            # (A late-materializing cluster's procs are logged as they are made: on_materialized.)
            self.log_submit(c, list(c.procs.values()))
        try:
            await self.commits.now()  # answered only after this commit
        except Exception:
            log.exception("committing cluster %d failed", cluster_id)
            # Memory stays the truth (commits.py): the cluster is kept and goes with the next commit.
            again = f"; the same SubmissionId ({SubmissionId}) answers its outcome" if SubmissionId else ""
            raise MethodError(Status.EXCEPTION, f"Submit: the job queue could not be written now: cluster {cluster_id} "
                              f"is kept and will be written with the next commit{again}") from None
        # The submit events are in the log when answered, as condor_submit's are; but an owner's
        # hung log never holds the answer for long (nor anyone else's).
        await self.user_logs.written([owner], timeout=SUBMIT_LOG_WAIT)
        self.counters.count("JobsSubmitted", count)
        self._ads_changed()
        return answer

    def _first_job(self, ad: dict[str, Any], first_diff: dict[str, Any], owner: str, cluster_id: int,
                   qdate: int) -> dict[str, Any]:
        """The cluster's first job as it would be queued: what transforms and requirements see."""
        probe, status = submission.build_cluster_ad(ad, owner=owner, uid_domain=self.settings.uid_domain,
                                                    cluster_id=cluster_id, qdate=qdate)
        return {**probe, **first_diff, "ProcId": 0, "JobStatus": status}

    def _take_reserved(self, cluster_id: int, caller: str) -> None:
        if cluster_id in self.queue.clusters:
            raise invalid(f"Submit: cluster {cluster_id} already exists; ask NewCluster for a new cluster id")
        given_to = self._new_clusters.get(cluster_id)
        if given_to is None:
            raise submission.unknown_cluster_id(cluster_id)
        if given_to != caller:
            raise forbidden(f"{caller} may not submit to cluster {cluster_id}: NewCluster gave that id to {given_to}")

    def log_submit(self, c: Cluster, procs: list[Proc]) -> None:
        """The submit event of ``procs`` (all of a cluster, or those a late materialization made)."""
        if not procs:
            return
        now = time.time()
        notes = c.ad.get("LogNotes") if isinstance(c.ad.get("LogNotes"), str) else None
        texts = ([writer.submit(c.id, p.id, now, self.address, notes) for p in procs]
                 if c.ad.get("UserLog") or c.ad.get("DAGManNodesLog") else [])
        self.events.emit_cluster("submit", c.ad, [p.id for p in procs], texts)


def _int_attr(ad: dict[str, Any], name: str) -> int:
    value = attrs.get(ad, name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid(f"Submit: {name} must be a non-negative integer, got {value!r}")
    return value
