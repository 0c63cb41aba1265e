"""NewCluster and Submit: a cluster from finished job ads, committed before the answer, idempotent by
SubmissionId; the submit events. The rules it applies are submission.py's.

The schedd never reads submit text (a description's `include command :` or `queue from script |`
would run as the schedd): the submitting client asks NewCluster for the cluster id, expands the
description itself and sends the job ads, as condor_submit does. For late materialization it sends
a proc template that this schedd fills in per proc (gridbus.submit.materialize), nothing more."""

from __future__ import annotations

import time
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd import owner_shadow, submission
from gridbus.agents.schedd.jobqueue import Cluster, Proc
from gridbus.agents.schedd.parts import ScheddParts
from gridbus.eventlog import writer
from gridbus.status import MethodError, Status, forbidden, invalid

# Cluster ids handed out by NewCluster and not yet used that the schedd remembers (per schedd).
MAX_RESERVED = 10_000


class SubmitMixin(ScheddParts):
    @method("scheduler")
    async def NewCluster(self, call: Call) -> dict:
        """HTCondor's NewCluster: a cluster id for the caller's next Submit (an unused one is harmless)."""
        caller = call.require_user()
        cluster_id = self.queue.new_cluster_id()
        reserved = self._reserved_clusters()
        reserved[cluster_id] = caller
        while len(reserved) > MAX_RESERVED:  # the oldest ids handed out and never used are forgotten
            del reserved[next(iter(reserved))]
        # Written with the next batch, not at once: an id a crashed schedd hands out again is harmless,
        # since its reservation is gone too (a Submit naming it is refused and the client asks anew).
        self.commit_soon()
        return {"ClusterId": cluster_id}

    @method("scheduler")
    async def Submit(self, call: Call, Ad: Any, Procs: list, Count: int, Submit: dict, SubmissionId: str,
                     ClusterId: int) -> dict:
        caller = call.require_user()
        ad = submission.normalize_ad(Ad)
        owner = submission.resolve_owner(ad, caller, self.is_super(caller))
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
        if ClusterId:
            self._take_reserved(ClusterId, caller)
        qdate = int(time.time())
        cluster_id = ClusterId or self.queue.next_cluster
        probe, _status = submission.build_cluster_ad(ad, owner=owner, uid_domain=self.settings.uid_domain,
                                                     cluster_id=cluster_id, qdate=qdate)
        if self.settings.submit_requirements:
            first = {**probe, **first_diff, "ProcId": 0, "JobStatus": _status}
            submission.check_requirements(self.settings.submit_requirements, first, self.daemon_ad())
        max_idle = _int_attr(ad, "JobMaterializeMaxIdle")
        limit = _int_attr(ad, "JobMaterializeLimit")
        if late is not None and not (max_idle or limit):
            raise invalid("Submit: a proc template (Submit.Template) is for a cluster materialized late "
                          "(JobMaterializeMaxIdle or JobMaterializeLimit in the Ad); send Procs otherwise")
        if not ClusterId:
            cluster_id = self.queue.new_cluster_id()
        else:
            self._reserved_clusters().pop(ClusterId, None)
        cluster_ad, status = submission.build_cluster_ad(ad, owner=owner, uid_domain=self.settings.uid_domain,
                                                         cluster_id=cluster_id, qdate=qdate)
        c = self.queue.add_cluster(cluster_id, owner, cluster_ad, diffs or None, count, status=status,
                                   max_idle=max_idle, limit=limit,
                                   template=late.wire() if late is not None else None)
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
            await owner_shadow.logs_written(self)  # the submit events are in the log when answered
        self._count("JobsSubmitted", count)
        self.ads_changed()
        return answer

    def _reserved_clusters(self) -> dict[int, str]:
        """Cluster ids NewCluster handed out and no Submit used yet: id -> the user it went to."""
        reserved = self.__dict__.get("_new_clusters")
        if reserved is None:
            reserved = self.__dict__["_new_clusters"] = {}
        return reserved

    def _take_reserved(self, cluster_id: int, caller: str) -> None:
        if cluster_id in self.queue.clusters:
            raise invalid(f"Submit: cluster {cluster_id} already exists; ask NewCluster for a new cluster id")
        given_to = self._reserved_clusters().get(cluster_id)
        if given_to is None:
            raise submission.unknown_cluster_id(cluster_id)
        if given_to != caller:
            raise forbidden(f"{caller} may not submit to cluster {cluster_id}: NewCluster gave that id to {given_to}")

    def _log_submit(self, c: Cluster, procs: list[Proc]) -> None:
        """The submit event of ``procs`` (all of a cluster, or those a late materialization made)."""
        if not procs:
            return
        now = time.time()
        notes = c.ad.get("LogNotes") if isinstance(c.ad.get("LogNotes"), str) else None
        texts = ([writer.submit(c.id, p.id, now, self.address, notes) for p in procs]
                 if c.ad.get("UserLog") or c.ad.get("DAGManNodesLog") else [])
        self.events.emit_cluster("submit", c.ad, [p.id for p in procs], texts)


def _int_attr(ad: dict[str, Any], name: str) -> int:
    value = submission.lookup(ad, name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid(f"Submit: {name} must be a non-negative integer, got {value!r}")
    return value
