"""The job queue in memory, backed by `store.Store`.

(One module over 500 lines: a proc's change of status updates every index of the queue here, in one place.)

What lives in memory is what matching and totals need, and little else: per cluster its ad (the
attributes its procs share) and per proc a small slotted record with its status and its
differences from the cluster ad (None for a proc that differs in nothing but its ProcId). A full
job ad is built on demand by `ad()`: the cluster ad, the proc's differences, and the attributes
computed from ids (ProcId, JobStatus, GlobalJobId).

Changes are made here; `take_batch()` hands them over as one batch, which commits.py writes to
SQLite in one transaction in a worker thread (at once for a Submit, an action or a JobReports
batch, a few milliseconds later for the rest). A listing takes a `Snapshot`: the jobs that change
while it streams hand it their state from before the change.

Late materialization: a cluster submitted with `JobMaterializeMaxIdle` (max_idle) or
`JobMaterializeLimit` (max_materialize) keeps a factory (how many procs in all, the next proc id,
and optionally the per-proc differences); proc records are created only while the cluster has
fewer idle (or live) procs than its bound, so a cluster of a million procs costs one row.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Container, Iterator
from pathlib import Path
from typing import Any

from gridbus.agents.schedd import matchexp
from gridbus.agents.schedd.jobattrs import JobStatus
from gridbus.agents.schedd.store import Batch, Store, pack, unpack
from gridbus.classad.values import is_number
from gridbus.submit import materialize

IDLE = int(JobStatus.IDLE)


class Proc:
    """One materialized job: its status and its differences from the cluster ad."""

    __slots__ = ("attrs", "cluster", "id", "status")

    def __init__(self, cluster: Cluster, proc_id: int, status: int, attrs: dict[str, Any] | None):
        self.cluster = cluster
        self.id = proc_id
        self.status = status
        self.attrs = attrs or None

    def get(self, name: str, default: Any = None) -> Any:
        """An attribute of the job (proc difference, else cluster ad); canonical case expected."""
        if self.attrs and name in self.attrs:
            value = self.attrs[name]
            return default if value is None else value
        return self.cluster.ad.get(name, default)

    @property
    def key(self) -> tuple[int, int]:
        return (self.cluster.id, self.id)

    def __repr__(self) -> str:
        return f"Proc({self.cluster.id}.{self.id}, status={self.status})"


class JobView:
    """One job of a listing, as it was when the listing began."""

    __slots__ = ("attrs", "cluster_ad", "cluster_id", "global_job_id", "proc_id", "status")

    def __init__(self, cluster_id: int, cluster_ad: dict[str, Any], proc_id: int, status: int,
                 attrs: dict[str, Any] | None, global_job_id: str):
        self.cluster_id = cluster_id
        self.cluster_ad = cluster_ad
        self.proc_id = proc_id
        self.status = status
        self.attrs = attrs
        self.global_job_id = global_job_id

    def ad(self) -> dict[str, Any]:
        return _full_ad(self.cluster_ad, self.attrs, self.proc_id, self.status, self.global_job_id)


class Snapshot:
    """The queue as it was when a listing began, however its jobs change, or leave, while the
    listing's chunks go out (a Query answer is streamed; other calls run between its chunks).

    Taking one costs a list of references per cluster (a cluster's procs are held in ProcId order,
    the order they were made in); the jobs' state is copied only when a job
    changes while the snapshot is open (the queue hands it the state before the change, once per
    job), so an open listing costs nothing to jobs that do not change. `close()` it at the end."""

    def __init__(self, queue: JobQueue):
        self._queue = queue
        self._clusters = [(c, list(c.procs.values())) for _cid, c in sorted(queue.clusters.items())]
        self._procs: dict[Proc, tuple[int, dict[str, Any] | None]] = {}
        self._ads: dict[int, dict[str, Any]] = {}
        queue._snapshots.append(self)

    def keep(self, p: Proc) -> None:
        """``p`` is about to change: keep its state as of the snapshot."""
        if p not in self._procs:
            self._procs[p] = (p.status, dict(p.attrs) if p.attrs else None)

    def keep_cluster(self, c: Cluster) -> None:
        if c.id not in self._ads:
            self._ads[c.id] = dict(c.ad)

    def jobs(self) -> Iterator[JobView]:
        name = self._queue.name
        for c, procs in self._clusters:
            for p in procs:
                status, attrs = self._procs.get(p) or (p.status, p.attrs)
                yield JobView(c.id, self._ads.get(c.id, c.ad), p.id, status, attrs, f"{name}#{c.id}.{p.id}#{c.qdate}")

    def close(self) -> None:
        if self in self._queue._snapshots:
            self._queue._snapshots.remove(self)


_COMPUTED = frozenset(("procid", "jobstatus", "globaljobid"))  # lower case


def _full_ad(cluster_ad: dict[str, Any], attrs: dict[str, Any] | None, proc_id: int, status: int,
             global_job_id: str) -> dict[str, Any]:
    out = dict(cluster_ad)
    if attrs:
        for k, v in attrs.items():
            if v is None:  # deleted for this proc (a cluster attribute it no longer has)
                out.pop(k, None)
            else:
                out[k] = v
    out["ProcId"] = proc_id
    out["JobStatus"] = status
    out["GlobalJobId"] = global_job_id
    return out


class Cluster:
    __slots__ = ("ad", "factory", "id", "idle", "idle_heads", "idle_own", "keys", "match_macros", "owner", "prio", "prio_procs",
                 "procs", "qdate", "reads_proc_id", "version")

    def __init__(self, cluster_id: int, owner: str, ad: dict[str, Any], factory: dict[str, Any] | None):
        self.id = cluster_id
        self.owner = owner
        self.ad = ad
        self.factory = factory
        self.procs: dict[int, Proc] = {}
        self.idle: set[int] = set()
        # The idle procs in queue order, as a heap whose entries may be stale (a proc that left
        # Idle, or was taken by a claim, stays until it comes to the top): claim reuse finds the
        # first free one in logarithmic time (`first_free`), not by sorting the idle set.
        self.idle_heads: list[int] = []
        # Idle procs with attributes of their own: the others are their cluster ad with a ProcId,
        # and a slot answers them all alike (the shadows' claim reuse tests one for all).
        self.idle_own: set[int] = set()
        self.prio_procs = 0  # procs with a JobPrio of their own (rare: condor_prio on one proc)
        self.version = 0
        self.reindex()

    def reindex(self) -> None:
        self.keys = {k.lower(): k for k in self.ad}
        prio = self.ad.get("JobPrio", 0)
        self.prio = prio if is_number(prio) and isinstance(prio, int) else 0
        qdate = self.ad.get("QDate", 0)
        self.qdate = int(qdate) if is_number(qdate) else 0
        # An expression that names what differs from proc to proc: its procs may match differently.
        self.reads_proc_id = reads_proc_id(self.ad)
        # Whether the ad holds a $$() to expand at activation (asked of every job sent to a slot).
        self.match_macros = matchexp.needs_expansion(self.ad)
        self.version += 1

    def became_idle(self, proc_id: int) -> None:
        self.idle.add(proc_id)
        self.head_again(proc_id)

    def head_again(self, proc_id: int) -> None:
        """``proc_id`` is idle again, or no longer taken: a candidate for `first_free` again."""
        heads = self.idle_heads
        if len(heads) > 2 * len(self.idle) + 64:  # mostly stale entries: made again, in order
            heads[:] = sorted(self.idle)
        else:
            heapq.heappush(heads, proc_id)

    def first_free(self, taken: Container[int]) -> int | None:
        """The first idle proc (in ProcId order) not in ``taken``; the stale and taken entries
        in front of it are dropped (a proc given back by a claim comes back through
        `head_again`)."""
        heads, idle = self.idle_heads, self.idle
        while heads:
            pid = heads[0]
            if pid in idle and pid not in taken:
                return pid
            heapq.heappop(heads)
        return None

    def pending(self) -> int:
        """Procs of the factory not materialized yet."""
        return max(0, self.factory["Total"] - self.factory["Next"]) if self.factory else 0


class JobQueue:
    def __init__(self, path: str | Path, schedd_name: str, *, synchronous: str = "FULL"):
        self.name = schedd_name
        self.store = Store(path, synchronous=synchronous)
        self.clusters: dict[int, Cluster] = {}
        self.by_owner: dict[str, dict[int, Cluster]] = {}
        self.counts: dict[str, list[int]] = {}  # owner -> jobs per JobStatus (index = status)
        # owner -> jobs that became Idle since the schedd started (submitted, released, requeued):
        # the Submitter ad's IdleJobsArrived, which wakes a negotiation cycle when it grows even
        # where the Idle count did not (jobs started and as many others came between two ads).
        self.idle_arrivals: dict[str, int] = {}
        self.next_cluster = 1
        self._dirty: dict[tuple[int, int], Proc] = {}
        self._batch = Batch()
        # Jobs retired since their history row was last taken to be written: found here until
        # it is on disk (a GetAd between the retirement and the commit still finds the job).
        self._retired: dict[tuple[int, int], dict[str, Any]] = {}
        # Submits recorded and not yet on disk, found here until they are (see submission()).
        self._unwritten_submissions: dict[tuple[str, str], tuple[str, Any]] = {}
        self.on_flush: list[Callable[[], None]] = []
        # Called as a batch is taken to be written: what was recorded alongside the changes so
        # far (the user-log text) goes out with their flush, and nothing recorded later does.
        self.on_take: list[Callable[[], None]] = []
        # Called with the procs a late-materializing cluster just made: their submit events are
        # recorded at once, before anything can happen to them (claim reuse may start one before
        # the next commit).
        self.on_materialized: list[Callable[[Cluster, list[Proc]], None]] = []
        # Called when a job leaves Idle (started, held, removed): the shadows withdraw it from a
        # claim it was queued ahead on.
        self.on_left_idle: list[Callable[[Proc], None]] = []
        self._snapshots: list[Snapshot] = []  # open listings, told of a job before it changes
        self.load()

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        """Rebuild the in-memory queue from SQLite (a restart)."""
        self.clusters.clear()
        self.by_owner.clear()
        self.counts.clear()
        progress = self.store.factory_progress()
        for cid, owner, blob, factory in self.store.clusters():
            f = unpack(factory)
            if f and cid in progress:  # the counters move on; the factory row keeps its first ones
                f["Next"], f["Total"] = progress[cid]
            c = Cluster(cid, owner, unpack(blob), f)
            self.clusters[cid] = c
            self.by_owner.setdefault(owner, {})[cid] = c
        for cid, pid, status, attrs in self.store.procs():
            of = self.clusters.get(cid)
            if of is None:  # cannot happen through write(); never let one stray row stop a restart
                continue
            self._attach(of, Proc(of, pid, status, unpack(attrs)))
        top = max([0, *self.clusters, self.store.max_cluster_in_history()])
        self.next_cluster = max(int(self.store.meta("next_cluster", 1)), top + 1)

    def close(self) -> None:
        self.flush()
        self.store.close()

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return sum(len(c.procs) for c in self.clusters.values())

    def untaken(self, job: tuple[int, int]) -> None:
        """A claim no longer holds ``job``: if it is idle, claim reuse may pick it again."""
        c = self.clusters.get(job[0])
        if c is not None and job[1] in c.idle:
            c.head_again(job[1])

    def proc(self, cluster: int, proc: int) -> Proc | None:
        c = self.clusters.get(cluster)
        return c.procs.get(proc) if c else None

    def status(self, cluster: int, proc: int) -> int | None:
        """A job's JobStatus, or None if it is not in the queue (no ad made for it)."""
        p = self.proc(cluster, proc)
        return p.status if p else None

    def get(self, cluster: int, proc: int) -> dict[str, Any] | None:
        """The full ad of a job in the queue, or None."""
        p = self.proc(cluster, proc)
        return self.ad(p) if p else None

    def finished_ad(self, cluster: int, proc: int) -> dict[str, Any] | None:
        """The final ad of a job that left the queue (completed or removed), or None."""
        ad = self._retired.get((cluster, proc))
        return ad if ad is not None else self.store.history_ad(cluster, proc)

    def global_job_id(self, p: Proc) -> str:
        return f"{self.name}#{p.cluster.id}.{p.id}#{p.cluster.qdate}"

    def ad(self, p: Proc) -> dict[str, Any]:
        return _full_ad(p.cluster.ad, p.attrs, p.id, p.status, self.global_job_id(p))

    def snapshot(self) -> Snapshot:
        """Every materialized job as it is now, in ClusterId/ProcId order, for a listing."""
        return Snapshot(self)

    def procs(self, owner: str | None = None) -> Iterator[Proc]:
        """Every materialized job, in ClusterId/ProcId order."""
        clusters = self.by_owner.get(owner, {}) if owner is not None else self.clusters
        for cid in sorted(clusters):
            c = clusters.get(cid)
            if c is None:  # left the queue while a caller paused between two jobs
                continue
            for pid in sorted(c.procs):
                p = c.procs.get(pid)
                if p is not None:
                    yield p

    def idle_procs(self, owner: str | None = None) -> Iterator[Proc]:
        """Idle jobs in the negotiator's order: JobPrio desc, QDate, ClusterId, ProcId.

        Lazy: a caller that takes the first job pays for sorting one cluster's idle procs only.
        A job whose status changes while the iteration runs is skipped.
        """
        clusters = self.by_owner.get(owner, {}).values() if owner is not None else self.clusters.values()
        runs: list[tuple[tuple[int, int, int, int], Cluster, list[int] | None]] = []
        for c in clusters:
            if not c.idle:
                continue
            if c.prio_procs:
                for pid in c.idle:
                    prio = c.procs[pid].get("JobPrio", c.prio)
                    prio = prio if is_number(prio) and isinstance(prio, int) else 0
                    runs.append(((-prio, c.qdate, c.id, pid), c, [pid]))
            else:
                runs.append(((-c.prio, c.qdate, c.id, -1), c, None))
        runs.sort(key=lambda r: r[0])
        for _key, c, pids in runs:
            for pid in pids if pids is not None else sorted(c.idle):
                p = c.procs.get(pid)
                if p is not None and p.status == IDLE:
                    yield p

    def idle_clusters(self, owner: str) -> list[Cluster]:
        """The owner's clusters with idle procs, in the negotiator's order (JobPrio desc, QDate, ClusterId)."""
        return sorted((c for c in self.by_owner.get(owner, {}).values() if c.idle),
                      key=lambda c: (-c.prio, c.qdate, c.id))

    def plain_ad(self, c: Cluster) -> dict[str, Any]:
        """The ad of an idle proc of ``c`` with nothing of its own (ProcId -1: any of them)."""
        return _full_ad(c.ad, None, -1, IDLE, f"{self.name}#{c.id}.-1#{c.qdate}")

    def idle_jobs(self, owner: str | None = None) -> Iterator[dict[str, Any]]:
        """Full ads of the idle jobs, in the order of `idle_procs` (the shadows' entry point)."""
        for p in self.idle_procs(owner):
            yield self.ad(p)

    def totals(self, owner: str | None = None) -> list[int]:
        """Jobs per status (index = JobStatus), of one owner or of all."""
        if owner is not None:
            return list(self.counts.get(owner, [0] * 8))
        out = [0] * 8
        for counts in self.counts.values():
            for i, n in enumerate(counts):
                out[i] += n
        return out

    def owners(self) -> list[str]:
        return sorted(o for o, counts in self.counts.items() if any(counts))

    # ------------------------------------------------------------------ writing
    def new_cluster_id(self) -> int:
        cid = self.next_cluster
        self.next_cluster += 1
        self._batch.meta["next_cluster"] = self.next_cluster
        return cid

    def add_cluster(
        self,
        cluster_id: int,
        owner: str,
        ad: dict[str, Any],
        proc_diffs: list[dict[str, Any]] | None,
        count: int,
        *,
        status: int = IDLE,
        max_idle: int = 0,
        limit: int = 0,
        template: dict[str, Any] | None = None,
    ) -> Cluster:
        """A new cluster of ``count`` procs (``proc_diffs[i]`` is proc i's differences, if given).

        With ``max_idle`` or ``limit`` > 0 the procs are materialized lazily (see the module doc),
        from ``proc_diffs`` or from a proc ``template`` (gridbus.submit.materialize).
        """
        factory = None
        if max_idle > 0 or limit > 0:
            factory = {"Total": count, "Next": 0, "MaxIdle": max_idle, "Limit": limit, "Status": status,
                       "Procs": proc_diffs, **(template or {})}
        c = Cluster(cluster_id, owner, ad, factory)
        self.clusters[cluster_id] = c
        self.by_owner.setdefault(owner, {})[cluster_id] = c
        self.counts.setdefault(owner, [0] * 8)
        if factory is None:
            for i in range(count):
                diff = proc_diffs[i] if proc_diffs else None
                p = Proc(c, i, status, dict(diff) if diff else None)
                self._attach(c, p)
                self._dirty[p.key] = p
        else:
            self._materialize(c)
        self._batch.clusters[cluster_id] = (owner, pack(ad), pack(self._factory_state(c)) if factory else None)
        return c

    def set_status(self, p: Proc, status: int, attrs: dict[str, Any] | None = None, *, when: float | None = None) -> None:
        """Move a job to ``status`` (EnteredCurrentStatus, LastJobStatus kept) and set ``attrs``."""
        for snap in self._snapshots:
            snap.keep(p)
        old = p.status
        changes = dict(attrs or {})
        if status != old:
            changes.setdefault("LastJobStatus", old)
            changes.setdefault("EnteredCurrentStatus", int(when if when is not None else time.time()))
            counts = self.counts[p.cluster.owner]
            counts[old] -= 1
            counts[status] += 1
            p.status = status
            if old == IDLE:
                p.cluster.idle.discard(p.id)
                p.cluster.idle_own.discard(p.id)
            if status == IDLE:
                p.cluster.became_idle(p.id)
                owner = p.cluster.owner
                self.idle_arrivals[owner] = self.idle_arrivals.get(owner, 0) + 1
        self.update(p, changes)  # keeps idle_own
        if old == IDLE and status != IDLE:
            for hook in self.on_left_idle:
                hook(p)
            if p.cluster.factory:
                self._materialize(p.cluster)

    def update(self, p: Proc, attrs: dict[str, Any]) -> None:
        """Set job attributes (a value None deletes one); only differences from the cluster ad are kept."""
        if not attrs:
            return
        for snap in self._snapshots:
            snap.keep(p)
        c = p.cluster
        own: dict[str, str] | None = None  # the proc's own keys by lower case, made at the first need
        for name, value in attrs.items():
            low = name.lower()
            if low in _COMPUTED:
                continue  # computed from the record, never stored
            canon = c.keys.get(low)
            if canon is None:
                if p.attrs and name not in p.attrs:
                    if own is None:
                        own = {k.lower(): k for k in p.attrs}
                    canon = own.get(low)
                if canon is None:
                    canon = name
                    if own is not None:
                        own[low] = name
            had_own_prio = canon == "JobPrio" and p.attrs is not None and p.attrs.get("JobPrio") is not None
            if (value is None and canon not in c.ad) or (
                    value is not None and canon in c.ad and _same(c.ad[canon], value)):
                if p.attrs and canon in p.attrs:
                    del p.attrs[canon]
                    if own is not None:
                        own.pop(low, None)
            else:  # a new value, or None shadowing a cluster attribute (deleted for this proc)
                if p.attrs is None:
                    p.attrs = {}
                p.attrs[canon] = value
            if canon == "JobPrio":
                has_own = p.attrs is not None and p.attrs.get("JobPrio") is not None
                c.prio_procs += int(has_own) - int(had_own_prio)
        if p.attrs is not None and not p.attrs:
            p.attrs = None
        if p.status == IDLE:
            if p.attrs:
                c.idle_own.add(p.id)
            else:
                c.idle_own.discard(p.id)
        self._dirty[p.key] = p

    def update_cluster(self, c: Cluster, attrs: dict[str, Any]) -> None:
        """Set attributes on a cluster ad (a whole-cluster SetAttribute)."""
        for snap in self._snapshots:
            snap.keep_cluster(c)
            for p in c.procs.values():
                snap.keep(p)
        for name, value in attrs.items():
            canon = c.keys.get(name.lower(), name)
            c.ad[canon] = value
            for p in c.procs.values():
                if p.attrs and canon in p.attrs:
                    if canon == "JobPrio":
                        c.prio_procs -= 1
                    del p.attrs[canon]
                    if not p.attrs:
                        p.attrs = None
                        c.idle_own.discard(p.id)
                    self._dirty[p.key] = p
        c.reindex()
        self._batch.clusters[c.id] = (c.owner, pack(c.ad), pack(self._factory_state(c)) if c.factory else None)

    def retire(self, p: Proc, *, when: float | None = None) -> dict[str, Any]:
        """Move a finished (completed or removed) job to the history; returns its final ad."""
        ad = self.ad(p)
        c = p.cluster
        self._detach(c, p)
        self._dirty.pop(p.key, None)
        self._batch.procs.pop(p.key, None)
        self._batch.proc_deletes.add(p.key)
        self._batch.history.append((c.id, p.id, c.owner, when if when is not None else time.time(), pack(ad)))
        self._retired[p.key] = ad
        if c.factory:
            self._materialize(c)
        self._drop_if_empty(c)
        return ad

    def stop_factory(self, c: Cluster) -> int:
        """Materialize no more procs of ``c`` (its cluster was removed); returns how many were pending."""
        pending = c.pending()
        if c.factory:
            c.factory["Total"] = c.factory["Next"]
            self._batch.factory_progress[c.id] = (c.factory["Next"], c.factory["Total"])
        self._drop_if_empty(c)
        return pending

    def record_submission(self, owner: str, submission_id: str, digest: str, answer: dict[str, Any]) -> None:
        self._batch.submissions.append((owner, submission_id, digest, pack(answer), time.time()))
        self._unwritten_submissions[(owner, submission_id)] = (digest, answer)

    def submission(self, owner: str, submission_id: str) -> tuple[str, Any] | None:
        """The (digest, answer) of a Submit recorded under this id, written or not: a retry that
        comes while the first is being committed is answered with its cluster, not given another."""
        return self._unwritten_submissions.get((owner, submission_id)) or self.store.submission(owner, submission_id)

    def add_writes(self, writes: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Rows of another table of this file (SQL, parameter rows) to write in the next flush's
        transaction, after the queue's own (the shadows' claims: a job and its claim agree on disk)."""
        self._batch.writes.extend(writes)

    @property
    def dirty(self) -> bool:
        return bool(self._dirty) or bool(self._batch)

    def take_batch(self) -> Batch:
        """Every change since the last take, as one batch to write (see commits.py); the caller
        writes it, then calls `written()`, or `give_back()` should the write fail."""
        for hook in self.on_take:
            hook()
        batch = self._batch
        for key, p in self._dirty.items():
            batch.procs[key] = (p.status, pack(p.attrs) if p.attrs else None)
        self._dirty = {}
        self._batch = Batch()
        return batch

    def give_back(self, batch: Batch) -> None:
        """A batch whose write failed: its changes go into the next (memory stays the truth)."""
        self._merge_back(batch)

    def written(self, batch: Batch) -> None:
        """``batch`` is on disk."""
        for c, p, *_rest in batch.history:
            self._retired.pop((c, p), None)
        for owner, submission_id, *_rest in batch.submissions:
            self._unwritten_submissions.pop((owner, submission_id), None)
        for hook in self.on_flush:
            hook()

    def flush(self) -> int:
        """Write every change since the last flush in one transaction, on this thread (tools and
        tests; the schedd commits through commits.Commits); returns the rows written."""
        batch = self.take_batch()
        if not batch:
            self.written(batch)  # nothing to write: what was recorded with no change goes out
            return 0
        try:
            self.store.write(batch)
        except BaseException:
            self.give_back(batch)
            raise
        self.written(batch)
        return len(batch.procs) + len(batch.proc_deletes) + len(batch.history) + len(batch.clusters)

    # ------------------------------------------------------------------ internals
    def _merge_back(self, batch: Batch) -> None:
        new = self._batch
        for name in ("clusters", "factory_progress", "procs", "meta"):
            merged = dict(getattr(batch, name))
            merged.update(getattr(new, name))
            setattr(new, name, merged)
        new.cluster_deletes |= batch.cluster_deletes
        new.proc_deletes |= batch.proc_deletes
        new.history[:0] = batch.history
        new.submissions[:0] = batch.submissions
        new.writes[:0] = batch.writes  # older statements first: a later change of a row wins

    def _attach(self, c: Cluster, p: Proc) -> None:
        c.procs[p.id] = p
        if p.status == IDLE:
            c.became_idle(p.id)
            self.idle_arrivals[c.owner] = self.idle_arrivals.get(c.owner, 0) + 1
            if p.attrs:
                c.idle_own.add(p.id)
        if p.attrs and p.attrs.get("JobPrio") is not None:
            c.prio_procs += 1
        self.counts.setdefault(c.owner, [0] * 8)[p.status] += 1

    def _detach(self, c: Cluster, p: Proc) -> None:
        del c.procs[p.id]
        c.idle.discard(p.id)
        c.idle_own.discard(p.id)
        if p.attrs and p.attrs.get("JobPrio") is not None:
            c.prio_procs -= 1
        self.counts[c.owner][p.status] -= 1

    def _drop_if_empty(self, c: Cluster) -> None:
        if c.procs or c.pending():
            return
        self.clusters.pop(c.id, None)
        owned = self.by_owner.get(c.owner)
        if owned is not None:
            owned.pop(c.id, None)
            if not owned:
                del self.by_owner[c.owner]
        self._batch.clusters.pop(c.id, None)
        self._batch.factory_progress.pop(c.id, None)
        self._batch.cluster_deletes.add(c.id)

    @staticmethod
    def _factory_state(c: Cluster) -> dict[str, Any] | None:
        return c.factory

    def _materialize(self, c: Cluster) -> None:
        f = c.factory
        if not f:
            return
        made: list[Proc] = []
        while f["Next"] < f["Total"]:
            if f["MaxIdle"] > 0 and len(c.idle) >= f["MaxIdle"]:
                break
            if f["Limit"] > 0 and len(c.procs) >= f["Limit"]:
                break
            pid = f["Next"]
            diffs = f.get("Procs")
            diff: dict[str, Any] | None
            if f.get("Template"):
                diff = materialize.proc_ad(f["Template"], materialize.proc_for(pid, f["Items"], f["Steps"]))
            else:
                diff = diffs[pid] if diffs and pid < len(diffs) else None
            p = Proc(c, pid, f.get("Status", IDLE), dict(diff) if diff else None)
            self._attach(c, p)
            self._dirty[p.key] = p
            made.append(p)
            f["Next"] = pid + 1
        if made:
            self._batch.factory_progress[c.id] = (f["Next"], f["Total"])
            for hook in self.on_materialized:
                hook(c, made)


_PLAIN = (int, float, str, bool, type(None))


def reads_proc_id(ad: dict[str, Any]) -> bool:
    """Whether an expression of ``ad`` may name ProcId or GlobalJobId (the attributes that differ
    between procs of a cluster that have nothing of their own): conservatively, by its text."""
    for value in ad.values():
        if not isinstance(value, _PLAIN):
            text = str(value).lower()
            if "procid" in text or "globaljobid" in text:
                return True
    return False


def _same(a: Any, b: Any) -> bool:
    # 1 == 1.0 == True in Python, but they are different ClassAd values: compare types too.
    return type(a) is type(b) and (a == b or str(a) == str(b))
