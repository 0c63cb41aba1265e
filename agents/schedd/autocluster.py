"""Autoclusters: idle jobs that agree on every attribute matchmaking looks at.

Two jobs are in one autocluster when their Requirements and Rank are the same text and they agree
on every job attribute those expressions refer to (followed through the job's own expressions),
and on the significant attributes every match uses (Owner, Request*, ConcurrencyLimits, ...). The
negotiator then asks one question per autocluster instead of one per job (HTCondor's autoclusters,
``SIGNIFICANT_ATTRIBUTES``).

Ids are stable for the life of the schedd: the same signature always gets the same id, so a
negotiator's ``After`` cursor stays meaningful across calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gridbus.agents.negotiator.matchmaker import closure
from gridbus.classad.values import Value

# Attributes every match looks at, whatever Requirements says (the negotiator's defaults, the
# startd's carving, fair share and limits).
SIGNIFICANT = ("Owner", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs", "ConcurrencyLimits",
               "JobUniverse", "Requirements", "Rank", "NiceUser")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k).lower(), _freeze(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("list", tuple(_freeze(v) for v in value))
    if isinstance(value, Value):  # not the integer it equals: Undefined is not 2
        return ("value", value.name)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return (type(value).__name__, str(value))


class AutoClusters:
    """Assigns autocluster ids to job ads and builds the negotiator's resource requests."""

    def __init__(self, extra_significant: Iterable[str] = ()):
        self.significant = tuple(dict.fromkeys([*SIGNIFICANT, *extra_significant]))
        self._ids: dict[Any, int] = {}
        self._attrs: dict[tuple[str, str], tuple[str, ...]] = {}  # (Requirements, Rank) -> names
        self._next = 1

    def attributes(self, job: dict[str, Any]) -> tuple[str, ...]:
        """Lower-cased names of the attributes that decide a job's autocluster."""
        lowered = {k.lower(): v for k, v in job.items()}
        key = (str(lowered.get("requirements")), str(lowered.get("rank")))
        names = self._attrs.get(key)
        if names is None:
            refs = closure(job, ["Requirements", "Rank"]) or set()
            names = tuple(sorted(refs | {s.lower() for s in self.significant}))
            self._attrs[key] = names
        return names

    def signature(self, job: dict[str, Any]) -> tuple[Any, ...]:
        lowered = {k.lower(): v for k, v in job.items()}
        names = self.attributes(job)
        return tuple((n, _freeze(lowered.get(n))) for n in names)

    def id_of(self, job: dict[str, Any]) -> int:
        sig = self.signature(job)
        acid = self._ids.get(sig)
        if acid is None:
            acid = self._ids[sig] = self._next
            self._next += 1
        return acid

    def group(self, jobs: Iterable[dict[str, Any]]) -> list[tuple[int, dict[str, Any], list[tuple[int, int]]]]:
        """(AutoClusterId, matchmaking ad, job ids) per autocluster, in the order of ``jobs``
        (the queue's JobPrio/QDate order): an autocluster's place is that of its first job."""
        order: dict[int, tuple[dict[str, Any], list[tuple[int, int]]]] = {}
        for job in jobs:
            acid = self.id_of(job)
            entry = order.get(acid)
            if entry is None:
                names = set(self.attributes(job))
                ad = {k: v for k, v in job.items() if k.lower() in names}
                ad["AutoClusterId"] = acid
                entry = order[acid] = (ad, [])
            entry[1].append((job.get("ClusterId"), job.get("ProcId")))
        return [(acid, ad, ids) for acid, (ad, ids) in order.items()]

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
