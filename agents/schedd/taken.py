"""Which procs of each cluster are taken: reserved for a claim or on one.

The schedd's `Claims.reserved` (a set of jobs) and `Claims.by_job` (job -> claim) are kept as
:class:`TakenSet` and :class:`TakenDict`, which count each job they hold in one shared
:class:`TakenIndex` by cluster. Claim reuse looks for the first idle proc of a cluster that is not
taken; with thousands of claims and jobs queued ahead on each, most idle procs at the head of a
cluster are taken, and the index lets it skip them a cluster at a time instead of one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Job = tuple[int, int]


class TakenIndex:
    """Cluster id -> {proc id: how many of the two collections hold it}. ``on_free(job)`` is
    called when neither holds ``job`` any more."""

    def __init__(self, on_free: Callable[[Job], None] | None = None) -> None:
        self.by_cluster: dict[int, dict[int, int]] = {}
        self.on_free = on_free

    def add(self, job: Job) -> None:
        procs = self.by_cluster.get(job[0])
        if procs is None:
            self.by_cluster[job[0]] = procs = {}
        procs[job[1]] = procs.get(job[1], 0) + 1

    def remove(self, job: Job) -> None:
        procs = self.by_cluster.get(job[0])
        if procs is None or job[1] not in procs:
            return
        if procs[job[1]] <= 1:
            del procs[job[1]]
            if not procs:
                del self.by_cluster[job[0]]
            if self.on_free is not None:
                self.on_free(job)
        else:
            procs[job[1]] -= 1

    def procs(self, cluster: int) -> dict[int, int]:
        """The cluster's taken procs (a dict: its keys are the proc ids)."""
        return self.by_cluster.get(cluster, _EMPTY)


_EMPTY: dict[int, int] = {}


class TakenSet(set):
    """A set of jobs that counts its members in a TakenIndex."""

    def __init__(self, index: TakenIndex, items: Iterable[Job] = ()) -> None:
        super().__init__()
        self.index = index
        self.update(items)

    def add(self, job: Job) -> None:
        if job not in self:
            super().add(job)
            self.index.add(job)

    def discard(self, job: object) -> None:
        if isinstance(job, tuple) and job in self:
            super().discard(job)
            self.index.remove(job)

    def remove(self, job: Job) -> None:
        super().remove(job)
        self.index.remove(job)

    def pop(self) -> Job:
        job = super().pop()
        self.index.remove(job)
        return job

    def update(self, *others: Iterable[Job]) -> None:
        for other in others:
            for job in other:
                self.add(job)

    def difference_update(self, *others: Iterable[Any]) -> None:
        for other in others:
            for job in list(other):
                self.discard(job)

    def clear(self) -> None:
        for job in self:
            self.index.remove(job)
        super().clear()

    # In place the set stays a TakenSet (indexed); set's own | and - make plain sets, which mypy
    # takes for a mismatch between the two forms (typeshed declares set.__ior__ with the same ignore).
    def __ior__(self, other: Any) -> TakenSet:  # type: ignore[misc]  # in place stays a TakenSet; set.__or__ makes a plain set
        self.update(other)
        return self

    def __isub__(self, other: Any) -> TakenSet:  # type: ignore[misc]  # in place stays a TakenSet; set.__sub__ makes a plain set
        self.difference_update(other)
        return self

    def _unindexed(self, *args: Any) -> Any:
        raise NotImplementedError("a TakenSet keeps add, discard, update and difference_update in its index, not this")

    intersection_update = symmetric_difference_update = __iand__ = __ixor__ = _unindexed


class TakenDict(dict):
    """A dict keyed by job that counts its keys in a TakenIndex."""

    def __init__(self, index: TakenIndex) -> None:
        super().__init__()
        self.index = index

    def __setitem__(self, job: Job, value: Any) -> None:
        if job not in self:
            self.index.add(job)
        super().__setitem__(job, value)

    def __delitem__(self, job: Job) -> None:
        super().__delitem__(job)
        self.index.remove(job)

    _MISSING = object()

    def pop(self, job: Job, default: Any = _MISSING) -> Any:
        if job in self:
            self.index.remove(job)
            return super().pop(job)
        if default is TakenDict._MISSING:
            raise KeyError(job)
        return default

    def popitem(self) -> tuple[Job, Any]:
        job, value = super().popitem()
        self.index.remove(job)
        return job, value

    def setdefault(self, job: Job, default: Any = None) -> Any:
        if job not in self:
            self[job] = default
        return self[job]

    def update(self, *args: Any, **kw: Any) -> None:
        for job, value in dict(*args, **kw).items():
            self[job] = value

    def clear(self) -> None:
        for job in self:
            self.index.remove(job)
        super().clear()
