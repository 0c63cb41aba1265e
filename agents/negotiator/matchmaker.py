"""Matchmaking: resource requests (one per autocluster) against the pool's unclaimed slots.

Cost scales with autoclusters x slot groups, not jobs x slots. Slots are grouped by the values of
every attribute a match could look at: the attributes the request's and the slots' Requirements
and Rank refer to (followed through the expressions they name, e.g. ``START``), plus the
expressions' own text. Slots in one group answer every request the same way, so one evaluation
stands for the whole group. A partitionable slot is a group of its own, because each carving
changes its Cpus, Memory and Disk.

Matching is two-way (job Requirements with TARGET = slot and slot Requirements with TARGET = job);
among the matching groups the best by job Rank, then by slot Rank, is taken first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gridbus import classad

REJECT_NO_MATCH = "no match found"
REJECT_PRIORITY = "insufficient priority"
REJECT_LIMIT = "concurrency limit reached"  # decided by the caller, which knows the limits


def get(ad: dict[str, Any], name: str, default: Any = None) -> Any:
    """Case-insensitive attribute lookup on a plain dict ad."""
    if name in ad:
        return ad[name]
    low = name.lower()
    for k, v in ad.items():
        if k.lower() == low:
            return v
    return default


def _is_expr(value: Any) -> bool:
    return isinstance(value, classad.ExprTree)


def _compiled(value: Any) -> Any:
    """The compiled form of an attribute value that is an expression (or ClassAd text)."""
    return classad.compile(str(value))


def refs_of(value: Any) -> set[str] | None:
    """Lower-cased attribute names an expression refers to (scope prefixes dropped), or None."""
    if not _is_expr(value) and not isinstance(value, str):
        return set()
    try:
        compiled = _compiled(value)
    except Exception:
        return None
    # `refs` holds the unscoped and MY. names, `target_refs` the TARGET. ones (lower-case); either
    # may name an attribute of the other ad, so a key takes both.
    raw = set(getattr(compiled, "refs", ()) or ()) | set(getattr(compiled, "target_refs", ()) or ())
    return {str(r).rsplit(".", 1)[-1].lower() for r in raw}


def closure(ad: dict[str, Any], roots: Iterable[str]) -> set[str] | None:
    """Every attribute name reached from ``roots`` through the ad's own expressions."""
    lowered = {k.lower(): v for k, v in ad.items()}
    seen: set[str] = set()
    todo = [r.lower() for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        value = lowered.get(name)
        if _is_expr(value):
            more = refs_of(value)
            if more is None:
                return None
            todo.extend(more - seen)
    return seen


def test_expr(value: Any, my: dict, target: dict) -> bool:
    """HTCondor's EvalBool of an attribute value: an absent Requirements is true."""
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if not _is_expr(value) and not isinstance(value, str):
        return False
    return bool(_compiled(value).test(my, target))


def eval_number(value: Any, my: dict, target: dict, default: float = 0.0) -> float:
    """A Rank or Request* value as a float; undefined, error or non-numbers give ``default``."""
    if value is None:
        return default
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if not _is_expr(value):
        return default
    out = _compiled(value).eval(my, target)
    if isinstance(out, bool):
        return float(out)
    if isinstance(out, (int, float)) and math.isfinite(out):
        return float(out)
    return default


@dataclass
class Slot:
    """An unclaimed slot the negotiator may hand out."""

    ad: dict[str, Any]
    name: str
    claim_id: str
    startd: str
    partitionable: bool
    taken: bool = False  # a static slot matched earlier in this cycle

    @property
    def weight(self) -> float:
        """SlotWeight = Cpus, as HTCondor's default."""
        cpus = get(self.ad, "Cpus", 1)
        return float(cpus) if isinstance(cpus, (int, float)) and not isinstance(cpus, bool) and cpus > 0 else 1.0


@dataclass
class Group:
    """Slots that answer every request alike (or one partitionable slot)."""

    ad: dict[str, Any]  # the representative ad
    free: list[Slot] = field(default_factory=list)


@dataclass
class SlotMatch:
    slot: Slot
    slot_ad: dict[str, Any]  # the ad as matched (a partitionable slot's resources before carving)
    weight: float


def slot_from_ad(ad: dict[str, Any]) -> Slot | None:
    """The matchable slot an (ad + private ClaimId) describes, or None when it is not matchable."""
    state = get(ad, "State")
    claim = get(ad, "ClaimId")
    name = get(ad, "Name")
    startd = get(ad, "MyAddress")
    if state not in (None, "Unclaimed") or not isinstance(claim, str) or not claim:
        return None
    if not isinstance(name, str) or not isinstance(startd, str):
        return None
    slot_type = get(ad, "SlotType")
    partitionable = bool(get(ad, "PartitionableSlot", False)) or slot_type == "Partitionable"
    if slot_type == "Dynamic":
        return None
    return Slot(dict(ad), name, claim, startd, partitionable)


class Matchmaker:
    """The pool's unclaimed slots for one negotiation cycle, and the matching of requests to them."""

    def __init__(self, slot_ads: Iterable[dict[str, Any]]):
        self.slots = [s for s in (slot_from_ad(a) for a in slot_ads) if s is not None]
        self.static = [s for s in self.slots if not s.partitionable]
        self.pslots = [s for s in self.slots if s.partitionable]
        self._slot_roots: set[str] | None = set()
        for s in self.slots:
            for attr in ("Requirements", "Rank"):
                names = closure(s.ad, [attr])
                if names is None:
                    self._slot_roots = None
                    break
                if self._slot_roots is not None:
                    self._slot_roots |= names
        self._groupings: dict[frozenset[str] | None, list[Group]] = {}
        self.evaluations = 0  # two-way match tests made (for the cycle statistics)

    @property
    def free_weight(self) -> float:
        return sum(s.weight for s in self.static if not s.taken) + sum(
            float(get(s.ad, "Cpus", 0) or 0) for s in self.pslots
        )

    def has_free(self) -> bool:
        return any(not s.taken for s in self.static) or any(
            float(get(s.ad, "Cpus", 0) or 0) > 0 for s in self.pslots
        )

    # ------------------------------------------------------------------ grouping
    def _groups(self, job: dict[str, Any]) -> list[Group]:
        job_refs = closure(job, ["Requirements", "Rank"])
        keys: frozenset[str] | None
        if job_refs is None or self._slot_roots is None:
            keys = None  # cannot tell what matters: every slot is its own group
        else:
            keys = frozenset(job_refs | self._slot_roots)
        groups = self._groupings.get(keys)
        if groups is None:
            groups = self._groupings[keys] = self._group(keys)
        return groups

    def _group(self, keys: frozenset[str] | None) -> list[Group]:
        by_key: dict[Any, Group] = {}
        out: list[Group] = []
        for s in self.static:
            if s.taken:
                continue
            if keys is None:
                out.append(Group(s.ad, [s]))
                continue
            lowered = {k.lower(): v for k, v in s.ad.items()}
            # Attributes no expression looks at (Name, MyAddress, sequence numbers) stay out of
            # the key, so otherwise identical slots share a group.
            key = tuple((k, _key_value(lowered.get(k))) for k in sorted(keys | {"requirements", "rank"}))
            group = by_key.get(key)
            if group is None:
                group = by_key[key] = Group(s.ad)
                out.append(group)
            group.free.append(s)
        # Static slots are handed out from the end of each list; keep the ads' order stable.
        for g in out:
            g.free.reverse()
        for p in self.pslots:
            out.append(Group(p.ad, [p]))
        return out

    # ------------------------------------------------------------------ matching
    def candidates(self, job: dict[str, Any]) -> list[Group]:
        """Groups with free slots that match ``job`` both ways, best (job Rank, slot Rank) first."""
        job_req = get(job, "Requirements")
        job_rank = get(job, "Rank")
        scored = []
        for i, g in enumerate(self._groups(job)):
            while g.free and g.free[-1].taken:  # taken through another grouping
                g.free.pop()
            if not g.free:
                continue
            ad = g.ad
            if g.free[0].partitionable and float(get(ad, "Cpus", 0) or 0) <= 0:
                continue
            self.evaluations += 1
            if not test_expr(job_req, job, ad) or not test_expr(get(ad, "Requirements"), ad, job):
                continue
            scored.append((-eval_number(job_rank, job, ad), -eval_number(get(ad, "Rank"), ad, job), i, g))
        scored.sort(key=lambda t: t[:3])
        return [g for *_, g in scored]

    def match(
        self,
        job: dict[str, Any],
        count: int,
        budget: float = math.inf,
    ) -> tuple[list[SlotMatch], str | None]:
        """Up to ``count`` slots for the request ``job`` within ``budget`` slot weight.

        Returns the matches and, if fewer than ``count`` were made, the reason why.
        """
        matches: list[SlotMatch] = []
        spent = 0.0
        if not self.has_free():
            return matches, REJECT_PRIORITY  # the pool is busy: others hold every slot
        groups = self.candidates(job)
        if not groups:
            return matches, REJECT_NO_MATCH
        for g in groups:
            while g.free and len(matches) < count:
                slot = g.free[-1]
                if slot.taken:
                    g.free.pop()
                    continue
                if slot.partitionable:
                    need = _request(job, slot.ad)
                    weight = need[0]
                    if not self._fits(slot, job, need):
                        g.free.pop()
                        break
                else:
                    weight = slot.weight
                if spent + weight > budget + 1e-9:
                    return matches, REJECT_PRIORITY
                matches.append(SlotMatch(slot, dict(slot.ad), weight))
                spent += weight
                if slot.partitionable:
                    _carve(slot.ad, need)
                    g.ad = slot.ad
                else:
                    g.free.pop()
                    slot.taken = True
            if len(matches) >= count:
                return matches, None
        if len(matches) >= count:
            return matches, None
        # Fewer than wanted: the matching slots ran out. If no slot at all is left, others hold
        # them (priority); otherwise what is left does not suit this request.
        return matches, (REJECT_PRIORITY if not self.has_free() else REJECT_NO_MATCH)

    def _fits(self, slot: Slot, job: dict[str, Any], need: tuple[float, float, float]) -> bool:
        cpus, memory, disk = need
        ad = slot.ad
        if cpus > float(get(ad, "Cpus", 0) or 0) or memory > float(get(ad, "Memory", 0) or 0):
            return False
        if disk > float(get(ad, "Disk", 0) or 0):
            return False
        self.evaluations += 1
        return test_expr(get(job, "Requirements"), job, ad) and test_expr(get(ad, "Requirements"), ad, job)


# What the startd carves for a job that does not say (its JOB_DEFAULT_REQUEST* knobs' defaults).
DEFAULT_REQUEST = (1.0, 128.0, 1024.0)


def _request(job: dict[str, Any], slot_ad: dict[str, Any]) -> tuple[float, float, float]:
    """RequestCpus, RequestMemory, RequestDisk of a job against a slot."""
    return (
        max(eval_number(get(job, "RequestCpus"), job, slot_ad, DEFAULT_REQUEST[0]), 0.0),
        max(eval_number(get(job, "RequestMemory"), job, slot_ad, DEFAULT_REQUEST[1]), 0.0),
        max(eval_number(get(job, "RequestDisk"), job, slot_ad, DEFAULT_REQUEST[2]), 0.0),
    )


def _carve(ad: dict[str, Any], need: tuple[float, float, float]) -> None:
    for attr, amount in zip(("Cpus", "Memory", "Disk"), need, strict=True):
        key = next((k for k in ad if k.lower() == attr.lower()), attr)
        value = ad.get(key, 0) or 0
        left = value - amount
        ad[key] = int(left) if isinstance(value, int) and float(left).is_integer() else left


def _key_value(value: Any) -> Any:
    if _is_expr(value):
        return ("expr", str(value))
    if isinstance(value, (list, dict)):
        return ("json", repr(value))
    return value


def fair_shares(pie: float, eup: dict[str, float], in_use: dict[str, float]) -> dict[str, float]:
    """Each submitter's share of ``pie`` slot weight, in inverse proportion to its effective
    priority, less the weight it already holds (HTCondor's submitter limit)."""
    if not eup:
        return {}
    inverse = {n: 1.0 / max(p, 1e-9) for n, p in eup.items()}
    total = sum(inverse.values())
    return {n: max(0.0, pie * inverse[n] / total - in_use.get(n, 0.0)) for n in eup}
