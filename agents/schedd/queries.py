"""Query and History: job listings streamed in chunks (full or compact ads), the summary ads,
the autocluster ads; and the constraint and projection rules every listing shares."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from gridbus.agent import Call, method
from gridbus.agent.pacing import Pacer
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobattrs import STATUS_NAMES, parse_job_id
from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.autocluster import AutoClusters
from gridbus.classad.limits import prefix
from gridbus.status import invalid

QUERY_CHUNK = 1000
QUERY_AUTOCLUSTER = 1
QUERY_SUMMARY = 8
AUTOCLUSTER_JOB_IDS = 100  # job ids an autocluster ad lists at most


class Queries:
    def __init__(self, queue: JobQueue, commits: Commits, autoclusters: AutoClusters):
        self.queue = queue
        self.commits = commits
        self.autoclusters = autoclusters

    @method("scheduler")
    async def Query(self, call: Call, Constraint: Any, Projection: list, Limit: int, Opts: int,
                    Compact: bool) -> AsyncIterator[dict]:
        test = None if _trivial(Constraint) else compile_constraint(Constraint)
        projection = _projection(Projection)
        if Opts & QUERY_SUMMARY:
            yield {"Jobs": await self._summary(test)}
            return
        if Opts & QUERY_AUTOCLUSTER:
            yield {"Jobs": await self._autocluster_rows(test, Limit)}
            return
        if Compact:
            async for part in self._query_compact(test, projection, Limit):
                yield part
            return
        snapshot = self.queue.snapshot()
        try:
            async for part in _chunks((job.ad() for job in snapshot.jobs()), test, projection, Limit):
                yield part
        finally:
            snapshot.close()

    async def _query_compact(self, test: Any, projection: list[str] | None, limit: int) -> AsyncIterator[dict]:
        """Each cluster ad once, each job as its own attributes: a listing of 100,000 jobs of a few
        clusters moves and decodes a few hundred bytes a job instead of the whole ad."""
        chunk: list[list[Any]] = []
        clusters: list[list[Any]] = []
        sent_clusters: set[int] = set()
        sent = 0
        pacer = Pacer()
        snapshot = self.queue.snapshot()
        try:
            for job in snapshot.jobs():
                if pacer.due():  # the caller's constraint over the whole queue: in slices
                    await pacer.pause()
                if test is not None and not test(job.ad()):
                    continue
                if job.cluster_id not in sent_clusters:
                    sent_clusters.add(job.cluster_id)
                    clusters.append([job.cluster_id, _project(job.cluster_ad, projection)])
                own: dict[str, Any] = {"ProcId": job.proc_id, "JobStatus": job.status, "GlobalJobId": job.global_job_id}
                deleted = []
                if job.attrs:
                    for k, v in job.attrs.items():
                        if v is None:
                            deleted.append(k)
                        else:
                            own[k] = v
                chunk.append([job.cluster_id, _project(own, projection)] + ([deleted] if deleted else []))
                sent += 1
                if len(chunk) >= QUERY_CHUNK:
                    yield {"Jobs": chunk, "ClusterAds": clusters}
                    chunk, clusters = [], []
                if 0 <= limit <= sent:
                    break
            if chunk or not sent:
                yield {"Jobs": chunk, "ClusterAds": clusters}
        finally:
            snapshot.close()

    async def _summary(self, test: Any) -> list[dict[str, Any]]:
        per_owner: dict[str, list[int]] = {}
        if test is None:
            per_owner = {o: self.queue.totals(o) for o in self.queue.owners()}
        else:  # the caller's constraint over the whole queue: on a snapshot, in slices
            pacer = Pacer()
            snapshot = self.queue.snapshot()
            try:
                for job in snapshot.jobs():
                    if pacer.due():
                        await pacer.pause()
                    ad = job.ad()
                    if test(ad):
                        per_owner.setdefault(str(ad.get("Owner", "")), [0] * 8)[job.status] += 1
            finally:
                snapshot.close()
        out = [_summary_ad(counts, owner) for owner, counts in sorted(per_owner.items())]
        total = [0] * 8
        for counts in per_owner.values():
            total = [a + b for a, b in zip(total, counts, strict=True)]
        out.append(_summary_ad(total, None))
        return out

    async def _autocluster_rows(self, test: Any, limit: int) -> list[dict[str, Any]]:
        """The idle jobs by autocluster (condor_q -autocluster), grouped by the very AutoClusters
        object GetResourceRequests uses (negotiation.py), so these ids are the ones the negotiator is
        offered and the match log names. A row is the autocluster's matchmaking attributes with
        AutoClusterId, JobCount and the first job ids, in the queue's JobPrio/QDate order."""
        jobs = list(self.queue.idle_jobs(None))  # copies: the constraint below runs in slices
        if test is not None:
            pacer, kept = Pacer(), []
            for ad in jobs:
                if pacer.due():
                    await pacer.pause()
                if test(ad):
                    kept.append(ad)
            jobs = kept
        rows = []
        for acid, ad, ids in self.autoclusters.group(jobs):
            rows.append({**ad, "AutoClusterId": acid, "JobCount": len(ids),
                         "JobIds": [f"{c}.{p}" for c, p in ids[:AUTOCLUSTER_JOB_IDS]]})
        return rows if limit < 0 else rows[:limit]

    @method("scheduler")
    async def History(self, call: Call, Constraint: Any, Projection: list, Limit: int, Since: str) -> AsyncIterator[dict]:
        test = None if _trivial(Constraint) else compile_constraint(Constraint)
        projection = _projection(Projection)
        # The history is read from disk: what waits for the write-behind first, and for a
        # write under way (its batch left the queue, which is no longer dirty, but is not on disk).
        if self.queue.dirty or self.commits.writing:
            await self.commits.now()
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
        # Read and decoded a page at a time in a worker thread, from one read transaction: the
        # loop stays free for other calls however long the history, and the listing is a
        # snapshot however the history changes while it streams.
        reader = self.queue.store.history_reader(since_seq)
        loop = asyncio.get_running_loop()
        try:
            parts = _Parts(test, projection, Limit)
            while not parts.done:
                page = await loop.run_in_executor(None, reader.page, QUERY_CHUNK)
                if not page:
                    break
                for ad in page:
                    part = parts.take(ad)
                    if part is not None:
                        yield part
                    if parts.done:
                        break
            last = parts.last()
            if last is not None:
                yield last
        finally:
            await loop.run_in_executor(None, reader.close)


class _Parts:
    """The ads that pass ``test``, projected, ``QUERY_CHUNK`` to an answer part, at most ``limit``
    (negative: all): ``take`` each ad (a full part comes back when one is), then send ``last()``
    (the rest, if any: an empty listing is still one part, ``Jobs = []``)."""

    def __init__(self, test: Callable[[Any], bool] | None, projection: list[str] | None, limit: int):
        self.test = test
        self.projection = projection
        self.limit = limit
        self.chunk: list[dict[str, Any]] = []
        self.sent = 0

    @property
    def done(self) -> bool:
        return 0 <= self.limit <= self.sent

    def take(self, ad: dict[str, Any]) -> dict[str, Any] | None:
        if self.test is not None and not self.test(ad):
            return None
        self.chunk.append(_project(ad, self.projection))
        self.sent += 1
        if len(self.chunk) < QUERY_CHUNK:
            return None
        part, self.chunk = {"Jobs": self.chunk}, []
        return part

    def last(self) -> dict[str, Any] | None:
        return {"Jobs": self.chunk} if self.chunk or not self.sent else None


async def _chunks(ads: Iterable[dict[str, Any]], test: Callable[[Any], bool] | None, projection: list[str] | None,
                  limit: int) -> AsyncIterator[dict[str, Any]]:
    """`_Parts` over a listing of the whole queue, the caller's constraint tested in slices."""
    parts = _Parts(test, projection, limit)
    pacer = Pacer()
    for ad in ads:
        if parts.done:
            break
        if pacer.due():
            await pacer.pause()
        part = parts.take(ad)
        if part is not None:
            yield part
    last = parts.last()
    if last is not None:
        yield last


def _trivial(constraint: Any) -> bool:
    text = str(constraint).strip().lower() if constraint is not None else ""
    return text in ("", "true", "1")


def compile_constraint(constraint: Any) -> Callable[[Any], bool]:
    """A job constraint (ClassAd text or ExprTree) as a test of an ad; invalid() when it does not parse."""
    from gridbus import classad

    text = str(constraint)
    try:
        compiled = classad.compile(text)
    except Exception as exc:
        raise invalid(f"the constraint {prefix(text)} is not a valid ClassAd expression: {exc}") from None
    return lambda ad: compiled.test(ad, None, True)  # strict: a bound ends the call with a sentence


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
