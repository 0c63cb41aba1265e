"""Autoclusters: idle jobs that agree on every attribute matchmaking looks at.

Shared by the schedd (GetResourceRequests, ``q -autocluster``) and the negotiator's simulated
pool (agents/negotiator/simulate.py), so neither imports the other.

A resource request must match exactly as the full job ad would, so it carries every job attribute
a match may read (HTCondor's autoclusters and ``SIGNIFICANT_ATTRIBUTES``):

- the significant attributes every match uses (Requirements, Rank, Owner, Request*,
  ConcurrencyLimits, ...);
- the job attributes the pool's slots may read (``TARGET.Department`` in a START, an unscoped
  name the slot lacks): the negotiator learns them from the Machine ads and passes them as
  ``AutoClusterAttrs`` in GetResourceRequests (HTCondor's negotiator does the same);
- every name those reach through the job's own expressions, transitively (``RequestMemory =
  ifthenelse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize + 1023) / 1024)`` brings
  MemoryUsage and ImageSize).

When a job expression reads what cannot be named (``eval()``), or the negotiator says a slot does
(``WholeAds``), the request is the whole job ad, and each such job is an autocluster of its own.

Two jobs are in one autocluster when they agree on every one of those names. The list of names
depends on the job's expressions and on the pool's names, and is cached under exactly those.

Ids are never reused: the same signature keeps its id while it has idle jobs, so a negotiator's
``After`` cursor stays meaningful across calls; an autocluster left with no idle job is dropped
when the owner's idle jobs are next grouped in full (GetResourceRequests), and every autocluster
and attribute list of an owner with no idle job left when ``retain`` is told so (an owner whose
jobs are all gone is never grouped again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from gridbus.adrefs import closure
from gridbus.classad.values import Value

# Attributes every match looks at, whatever Requirements says (the negotiator's defaults, the
# startd's carving, fair share and limits).
SIGNIFICANT = ("Owner", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs", "ConcurrencyLimits",
               "JobUniverse", "Requirements", "Rank", "NiceUser")

_CACHE_MAX = 4096  # distinct (job expressions, pool names) keys kept; a pure cache, cleared when full
_WHOLE = ("*whole ad*",)  # the attribute list of a job whose request is its whole ad


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k).lower(), _freeze(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("list", tuple(_freeze(v) for v in value))
    if isinstance(value, Value):  # not the integer it equals: Undefined is not 2
        return ("value", value.name)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return (type(value).__name__, value)  # 1, 1.0 and true are different ClassAd values
    return (type(value).__name__, str(value))


@dataclass
class JobRun:
    """Jobs whose ads differ only in ``varying`` attributes (lower-case names): a cluster's procs
    that have no attribute of their own, which differ in ProcId and GlobalJobId alone. When no
    name that decides the autocluster is among ``varying``, the run is grouped from its first
    ad (one signature for the cluster, not one per proc); otherwise each job's ad is grouped."""

    ad: dict[str, Any]  # the first job's full ad
    ids: list[tuple[int, int]]  # (ClusterId, ProcId) of every job of the run, in queue order
    ads: Callable[[], Iterator[dict[str, Any]]]  # every job's full ad, in the order of ``ids``
    varying: frozenset[str]


_PLAIN = frozenset({int, float, str, bool, type(None)})  # values that reach nothing (adrefs.is_plain)
_ABSENT = ("absent",)  # an attribute the job does not have (unlike one whose value is undefined)


class AutoClusters:
    """Assigns autocluster ids to job ads and builds the negotiator's resource requests."""

    def __init__(self, extra_significant: Iterable[str] = ()):
        self.significant = tuple(dict.fromkeys([*SIGNIFICANT, *extra_significant]))
        self._roots = frozenset(s.lower() for s in self.significant)
        # What the pool's slots may read of a job (the negotiator's AutoClusterAttrs); None: whole
        # ads. Kept from the last GetResourceRequests, so `q -autocluster` groups as it did.
        self.pool_attrs: frozenset[str] | None = frozenset()
        self._ids: dict[Any, int] = {}
        self._owner_of: dict[int, Any] = {}  # id -> the Owner of its jobs (for dropping)
        self._attrs: dict[Any, tuple[str, ...]] = {}
        # The attribute-list keys each owner's jobs used at its last grouping (None: a grouping
        # of everyone's, condor_q -autocluster): a list no kept owner uses is dropped by retain.
        self._keys_of: dict[Any, set[Any]] = {}
        self._next = 1

    def set_pool_attrs(self, names: Iterable[str] | None) -> None:
        self.pool_attrs = None if names is None else frozenset(n.lower() for n in names)

    def __len__(self) -> int:
        """The autoclusters held (those with idle jobs at the last full grouping, and newer)."""
        return len(self._ids)

    @property
    def attribute_lists(self) -> int:
        """The attribute lists held (one per distinct job expressions and pool names)."""
        return len(self._attrs)

    def retain(self, owners: Iterable[str]) -> None:
        """Forget the autoclusters and attribute lists of every owner not in ``owners`` (those
        with no idle job left)."""
        keep = set(owners)
        gone = {acid for acid, o in self._owner_of.items() if o not in keep}
        if gone:
            self._ids = {sig: acid for sig, acid in self._ids.items() if acid not in gone}
            for acid in gone:
                del self._owner_of[acid]
        self._keys_of = {o: keys for o, keys in self._keys_of.items() if o in keep}
        used = set().union(*self._keys_of.values())
        self._attrs = {key: names for key, names in self._attrs.items() if key in used}

    def attributes(self, job: dict[str, Any]) -> tuple[str, ...]:
        """Lower-cased names of the attributes that decide a job's autocluster (``_WHOLE``: all)."""
        return self._attributes({k.lower(): v for k, v in job.items()})

    def _attributes(self, low: dict[str, Any], used: set[Any] | None = None) -> tuple[str, ...]:
        pool = self.pool_attrs
        if pool is None:
            return _WHOLE
        # What decides the list: the pool's names and the job's expressions (literals reach nothing).
        key = (pool, frozenset([(k, str(v)) for k, v in low.items() if type(v) not in _PLAIN]))
        if used is not None:
            used.add(key)
        names = self._attrs.get(key)
        if names is None:
            reached = closure(low, self._roots | pool)
            names = _WHOLE if reached is None else tuple(sorted(reached))
            if len(self._attrs) >= _CACHE_MAX:
                self._attrs.clear()
            self._attrs[key] = names
        return names

    def _signature(self, job: dict[str, Any], low: dict[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
        if names is _WHOLE:
            return (_WHOLE, tuple(sorted((k, _freeze(v)) for k, v in low.items())))
        return tuple((n, _freeze(low[n]) if n in low else _ABSENT) for n in names)

    def signature(self, job: dict[str, Any]) -> tuple[Any, ...]:
        low = {k.lower(): v for k, v in job.items()}
        return self._signature(job, low, self._attributes(low))

    def _id(self, sig: tuple[Any, ...], owner: Any) -> int:
        acid = self._ids.get(sig)
        if acid is None:
            acid = self._ids[sig] = self._next
            self._owner_of[acid] = owner
            self._next += 1
        return acid

    def id_of(self, job: dict[str, Any]) -> int:
        low = {k.lower(): v for k, v in job.items()}
        return self._id(self._signature(job, low, self._attributes(low)), low.get("owner"))

    def group(self, jobs: Iterable[dict[str, Any] | JobRun], *, owner: str | None = None,
              ) -> list[tuple[int, dict[str, Any], list[tuple[int, int]]]]:
        """(AutoClusterId, matchmaking ad, job ids) per autocluster, in the order of ``jobs``
        (the queue's JobPrio/QDate order): an autocluster's place is that of its first job.
        ``jobs`` holds job ads and :class:`JobRun`s of alike jobs (grouped at once when nothing
        that decides their autocluster differs between them).

        With ``owner``, ``jobs`` are all of that owner's idle jobs: the owner's autoclusters not
        among them have no idle job left and are dropped."""
        order: dict[int, tuple[dict[str, Any], list[tuple[int, int]]]] = {}
        used: set[Any] = set()

        def add(job: dict[str, Any], ids: list[tuple[int, int]] | None, varying: frozenset[str]) -> bool:
            low = {k.lower(): v for k, v in job.items()}
            names = self._attributes(low, used)
            if ids is not None and (names is _WHOLE or not varying.isdisjoint(names)):
                return False  # the run's jobs may differ in what decides their autocluster
            acid = self._id(self._signature(job, low, names), low.get("owner"))
            entry = order.get(acid)
            if entry is None:
                if names is _WHOLE:
                    ad = dict(job)
                else:
                    wanted = set(names)
                    ad = {k: v for k, v in job.items() if k.lower() in wanted}
                ad["AutoClusterId"] = acid
                entry = order[acid] = (ad, [])
            if ids is None:
                entry[1].append((int(job["ClusterId"]), int(job["ProcId"])))
            else:
                entry[1].extend(ids)
            return True

        for job in jobs:
            if type(job) is JobRun:
                if not add(job.ad, job.ids, job.varying):
                    for one in job.ads():
                        add(one, None, frozenset())
            else:
                add(job, None, frozenset())  # type: ignore[arg-type]  # None: a job of no cluster, its own group
        self._keys_of[owner] = used
        if owner is not None:
            self._drop_unused(owner, order.keys())
        return [(acid, ad, ids) for acid, (ad, ids) in order.items()]

    def _drop_unused(self, owner: str, live: Iterable[int]) -> None:
        keep = set(live)
        gone = {acid for acid, o in self._owner_of.items() if o == owner and acid not in keep}
        if gone:
            self._ids = {sig: acid for sig, acid in self._ids.items() if acid not in gone}
            for acid in gone:
                del self._owner_of[acid]

    @staticmethod
    def page(groups: list[tuple[int, dict[str, Any], list[tuple[int, int]]]], limit: int, after: int) -> list[dict[str, Any]]:
        """The requests after the autocluster ``after`` (-1: from the start), at most ``limit``."""
        start = 0
        if after >= 0:
            # An autocluster that vanished since the last page ends the listing: starting over
            # would hand the negotiator the same requests twice.
            start = next((i + 1 for i, (acid, _ad, _ids) in enumerate(groups) if acid == after), len(groups))
        return [
            {"AutoClusterId": acid, "Count": len(ids), "Ad": ad}
            for acid, ad, ids in groups[start : start + max(0, limit)]
        ]
