"""Query and History: job listings streamed in chunks (full or compact ads), the summary ads,
the autocluster ads; and the constraint and projection rules every listing shares."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd.jobattrs import STATUS_NAMES, parse_job_id
from gridbus.agents.schedd.parts import ScheddParts
from gridbus.agents.schedd.store import unpack
from gridbus.classad.limits import prefix
from gridbus.status import invalid

QUERY_CHUNK = 1000
QUERY_AUTOCLUSTER = 1
QUERY_SUMMARY = 8
AUTOCLUSTER_JOB_IDS = 100  # job ids an autocluster ad lists at most


class QueriesMixin(ScheddParts):
    @method("scheduler")
    async def Query(self, call: Call, Constraint: Any, Projection: list, Limit: int, Opts: int,
                    Compact: bool) -> AsyncIterator[dict]:
        test = None if _trivial(Constraint) else compile_constraint(Constraint)
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
        for part in _chunks((self.queue.ad(p) for p in self.queue.procs()), test, projection, Limit):
            yield part

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
        """The idle jobs by autocluster (condor_q -autocluster), grouped by the very AutoClusters
        object GetResourceRequests uses (shadows.py), so these ids are the ones the negotiator is
        offered and the match log names. A row is the autocluster's matchmaking attributes with
        AutoClusterId, JobCount and the first job ids, in the queue's JobPrio/QDate order."""
        self._shadow_init()  # the shadows' state, AutoClusters among it (made at setup)
        jobs = (ad for ad in self.queue.idle_jobs(None) if test is None or test(ad))
        rows = []
        for acid, ad, ids in self._autoclusters.group(jobs):
            rows.append({**ad, "AutoClusterId": acid, "JobCount": len(ids),
                         "JobIds": [f"{c}.{p}" for c, p in ids[:AUTOCLUSTER_JOB_IDS]]})
        return rows if limit < 0 else rows[:limit]

    @method("scheduler")
    async def History(self, call: Call, Constraint: Any, Projection: list, Limit: int, Since: str) -> AsyncIterator[dict]:
        test = None if _trivial(Constraint) else compile_constraint(Constraint)
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
        ads = (unpack(blob) for _seq, _c, _p, blob in self.queue.store.history(since_seq))
        for part in _chunks(ads, test, projection, Limit):
            yield part


def _chunks(ads: Iterable[dict[str, Any]], test: Callable[[Any], bool] | None, projection: list[str] | None,
            limit: int) -> Iterator[dict[str, Any]]:
    """The ads that pass ``test``, projected, ``QUERY_CHUNK`` to an answer part, at most ``limit``
    (negative: all). An empty listing is still one part, ``Jobs = []``."""
    chunk: list[dict[str, Any]] = []
    sent = 0
    for ad in ads:
        if test is not None and not test(ad):
            continue
        chunk.append(_project(ad, projection))
        sent += 1
        if len(chunk) >= QUERY_CHUNK:
            yield {"Jobs": chunk}
            chunk = []
        if 0 <= limit <= sent:
            break
    if chunk or not sent:
        yield {"Jobs": chunk}


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
