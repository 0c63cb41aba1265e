"""The Submit method: a cluster from a job ad (or a submit description), committed before the
answer, idempotent by SubmissionId; the submit events. The rules it applies are submission.py's."""

from __future__ import annotations

import time
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd import submission
from gridbus.agents.schedd.jobqueue import Cluster, Proc
from gridbus.agents.schedd.parts import ScheddParts
from gridbus.eventlog import writer
from gridbus.status import MethodError, Status, invalid


class SubmitMixin(ScheddParts):
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
