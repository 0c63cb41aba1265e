"""Matchmaking: resource requests (one per autocluster) against the pool's unclaimed slots.

(One module over 500 lines: static and partitionable slots are matched by one loop, with the carving it calls.)

Matching is two-way (job Requirements with TARGET = slot and slot Requirements with TARGET = job);
among the matching slots the best by job Rank, then by slot Rank, then by the slot's place in the
collector's answer, is taken first. Partitionable slots are carved while they fit.

The cost of a request is kept near "autoclusters x kinds of slot", not "autoclusters x slots":

- Requirements. The static slots are grouped by the values of the attributes the two
  Requirements can reach (``reach.py``: through the job's and the slots' expressions), not by every
  attribute; 1,000 slots that differ in Name, ClaimId or KFlops are one group for a job that only
  constrains Arch, OpSys, Memory and Disk. One two-way test answers for a whole group.
- Rank. Ranks are evaluated once per group of slots alike in what the Ranks reach, and cached under
  the job's values of those attributes (its "rank signature"): 1,000 autoclusters that all rank by
  ``TARGET.KFlops`` share one table. Each matching group keeps its free slots sorted by rank, so a
  request merges the heads of the matching groups with a heap and stops after ``count`` slots
  instead of sorting the pool.

A partitionable slot is evaluated on its own each time, because each carving changes its Cpus,
Memory and Disk.

Hostile requests. Each evaluation is bounded (``gridbus.classad.limits``), but a request whose
Requirements reach a per-slot attribute (``regexp("(a|aa)+$", strcat(MY.S, TARGET.Name))``) is
one group per slot, so its cost would be slots x the budget. A request is therefore charged per
cycle: the evaluations of it that go past a bound (``strikes``) and the cpu time its evaluations
take on the matching thread (``request_seconds``: cpu, not wall time, so a busy machine does not
make an honest request look hostile); past either, the request is rejected for the cycle as a
hostile expression (:data:`REJECT_HOSTILE`, with a sentence in :attr:`Matchmaker.hostile`) instead of being tried on
every slot.

This file is over 500 lines on purpose: ``Matchmaker`` is one hot loop's state (the partitions of
the slots, their rank orders and the caches) that all its methods share and change together.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gridbus import classad
from gridbus.adrefs import SlotRefs, lowered, reach
from gridbus.agents.negotiator.prefilter import AttrIndex, conjuncts
from gridbus.classad.limits import EvaluationLimitExceeded
from gridbus.classad.values import is_number

REJECT_NO_MATCH = "no match found"
REJECT_PRIORITY = "insufficient priority"
REJECT_LIMIT = "concurrency limit reached"  # decided by the caller, which knows the limits
REJECT_HOSTILE = "hostile expression"

# A request is rejected for the cycle after this many of its evaluations went past a bound, or
# after its evaluations took this long in all (an ordinary request takes well under a millisecond
# per kind of slot).
HOSTILE_STRIKES = 3
REQUEST_SECONDS = 2.0

# Bounds on the per-cycle caches (rank tables and per-group orders): a cycle whose requests all
# rank differently must not hold a table per request.
_CACHE_MAX = 256
# Up to this many candidate slot groups are all tested up front; beyond it they are tested in rank
# order, as met, until the request has its slots.
_EAGER_GROUPS = 32


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


def test_expr(value: Any, my: dict, target: dict, strict: bool = False) -> bool:
    """HTCondor's EvalBool of an attribute value: an absent Requirements is true; ``strict``: a
    bound of the evaluation raises EvaluationLimitExceeded instead of answering false."""
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    if is_number(value):
        return value != 0
    if not _is_expr(value) and not isinstance(value, str):
        return False
    return bool(_compiled(value).test(my, target, strict))


def eval_number(value: Any, my: dict, target: dict, default: float = 0.0, strict: bool = False) -> float:
    """A Rank or Request* value as a float; undefined, error or non-numbers give ``default``
    (``strict``: a bound of the evaluation raises EvaluationLimitExceeded)."""
    if value is None:
        return default
    if isinstance(value, bool):
        return float(value)
    if is_number(value):
        return float(value)
    if not _is_expr(value):
        return default
    out = _compiled(value).eval(my, target, strict)
    if isinstance(out, bool):
        return float(out)
    if is_number(out) and math.isfinite(out):
        return float(out)
    return default


@dataclass
class Slot:
    """An unclaimed slot the negotiator may hand out."""

    ad: dict[str, Any]  # a static slot's ad as given (never changed); a partitionable slot's own copy
    name: str
    claim_id: str
    startd: str
    partitionable: bool
    taken: bool = False  # a static slot matched earlier in this cycle
    index: int = -1  # place in the collector's answer: the last tie-breaker between equal ranks
    low: dict[str, Any] = field(default_factory=dict)  # the ad keyed by lower-case names
    weight: float = 1.0  # SlotWeight = Cpus, as HTCondor's default (a static slot's never changes)


@dataclass
class SlotMatch:
    slot: Slot
    slot_ad: dict[str, Any]  # the ad as matched (a partitionable slot's resources before carving); not to be changed
    weight: float


def _weight(cpus: Any) -> float:
    return float(cpus) if is_number(cpus) and cpus > 0 else 1.0


def slot_from_ad(ad: dict[str, Any], low: dict[str, Any] | None = None, claimed: bool = False) -> Slot | None:
    """The matchable slot an (ad + private ClaimId) describes, or None when it is not matchable
    (``low``: the ad keyed by lower-case names, when the caller has it; ``claimed``: a claimed
    slot to preempt, whose ClaimId is the preempting claim's)."""
    if low is None:
        low = lowered(ad)
    state = low.get("state")
    claim = low.get("claimid")
    name = low.get("name")
    startd = low.get("myaddress")
    if (state != "Claimed" if claimed else state not in (None, "Unclaimed")) or not isinstance(claim, str) or not claim:
        return None
    if not isinstance(name, str) or not isinstance(startd, str):
        return None
    slot_type = low.get("slottype")
    partitionable = bool(low.get("partitionableslot", False)) or slot_type == "Partitionable"
    if slot_type == "Dynamic":
        return None
    if partitionable:  # carved as the cycle goes: a copy of its own
        ad = dict(ad)
        low = lowered(ad)
    return Slot(ad, name, claim, startd, partitionable, low=low, weight=_weight(low.get("cpus", 1)))


def number(ad: dict[str, Any], name: str) -> float:
    """A numeric attribute (Cpus, Memory, Disk) as a float; absent or not a number gives 0."""
    value = get(ad, name, 0)
    if not is_number(value) or not math.isfinite(value):
        return 0.0
    return float(value)


class _Partition:
    """The static slots (free when it was built) grouped by their values of some attributes."""

    __slots__ = ("members", "of", "free")

    def __init__(self, members: list[list[int]], of: list[int]):
        self.members = members  # slot indices per group, in the collector's order
        self.of = of  # the group of each slot index; -1 for partitionable or already taken slots
        self.free = [len(m) for m in members]  # slots of each group not yet taken


# A group's free slots as (job rank, slot rank, -index), ascending: the best is last, so taking it
# is a pop from the end.
_Order = list[tuple[float, float, int]]


class _Hostile(Exception):
    """A request went past its evaluation allowance for the cycle; the message says how."""


class Matchmaker:
    """The pool's unclaimed slots for one negotiation cycle, and the matching of requests to them."""

    def __init__(
        self, slot_ads: Iterable[dict[str, Any]], *, strikes: int = HOSTILE_STRIKES,
        request_seconds: float = REQUEST_SECONDS, lows: Iterable[dict[str, Any]] | None = None,
        refs: SlotRefs | None = None, claimed: bool = False,
    ):
        """``lows``: the ads keyed by lower-case names, in the order of ``slot_ads``, when the
        caller has them; ``refs``: what the slots' expressions reach, when the caller made it over
        these ads or more (more names only make the groups of alike slots finer)."""
        if strikes < 1 or request_seconds <= 0:
            raise ValueError(f"strikes must be at least 1 and request_seconds positive, got {strikes}, {request_seconds}")
        self.strikes = strikes
        self.request_seconds = request_seconds
        # The request being matched: its evaluations past a bound, its evaluation time, and (once
        # rejected) the sentence saying why.
        self._struck = 0
        self._spent = 0.0
        self.hostile: str | None = None
        if lows is None:
            made = (slot_from_ad(a, None, claimed) for a in slot_ads)
        else:
            made = (slot_from_ad(a, low, claimed) for a, low in zip(slot_ads, lows, strict=True))
        self.slots = [s for s in made if s is not None]
        for i, s in enumerate(self.slots):
            s.index = i
        self.static = [s for s in self.slots if not s.partitionable]
        self.pslots = [s for s in self.slots if s.partitionable]
        self._refs = refs if refs is not None else SlotRefs(s.low for s in self.slots)
        self._free_static = len(self.static)
        self._partitions: dict[frozenset[str] | None, _Partition] = {}
        self._sorted_names: dict[frozenset[str], tuple[str, ...]] = {}
        self._ranks: dict[Any, dict[int, tuple[float, float]]] = {}  # rank signature -> rank group -> ranks
        self._orders: dict[Any, dict[int, _Order]] = {}  # (rank signature, keys) -> group -> order
        self._global_orders: dict[Any, tuple[list[tuple[float, float, int]], int]] = {}  # signature -> order
        self._indexes: dict[str, AttrIndex] = {}
        self.evaluations = 0  # two-way Requirements tests made (for the cycle statistics)
        self.rank_evaluations = 0  # (job Rank, slot Rank) pairs evaluated

    @property
    def free_weight(self) -> float:
        return sum(s.weight for s in self.static if not s.taken) + sum(number(s.ad, "Cpus") for s in self.pslots)

    def has_free(self) -> bool:
        return self._free_static > 0 or any(number(s.ad, "Cpus") > 0 for s in self.pslots)

    # ------------------------------------------------------------------ grouping
    def _names(self, keys: frozenset[str]) -> tuple[str, ...]:
        names = self._sorted_names.get(keys)
        if names is None:
            names = self._sorted_names[keys] = tuple(sorted(keys))
        return names

    def _partition(self, keys: frozenset[str] | None) -> _Partition:
        """The free static slots grouped by their values of ``keys`` (None: each on its own)."""
        part = self._partitions.get(keys)
        if part is not None:
            return part
        of = [-1] * len(self.slots)
        members: list[list[int]] = []
        if keys is None:
            for s in self.static:
                if not s.taken:
                    of[s.index] = len(members)
                    members.append([s.index])
        else:
            names = self._names(keys)
            by_key: dict[tuple[Any, ...], int] = {}
            for s in self.static:
                if s.taken:
                    continue
                low = s.low
                # Attributes nothing reaches (Name, MyAddress, ClaimId) stay out of the key, so
                # otherwise identical slots share a group.
                key = tuple([_key_value(low.get(n, _ABSENT)) for n in names])
                gid = by_key.get(key)
                if gid is None:
                    gid = by_key[key] = len(members)
                    members.append([])
                members[gid].append(s.index)
                of[s.index] = gid
        part = self._partitions[keys] = _Partition(members, of)
        return part

    def _take(self, slot: Slot) -> None:
        slot.taken = True
        self._free_static -= 1
        for part in self._partitions.values():
            gid = part.of[slot.index]
            if gid >= 0:
                part.free[gid] -= 1

    # ------------------------------------------------------------------ ranks
    def _rank(self, job: dict[str, Any], job_rank: Any, slot_ad: dict[str, Any]) -> tuple[float, float]:
        self.rank_evaluations += 1
        started = time.thread_time()
        try:
            return eval_number(job_rank, job, slot_ad, strict=True), eval_number(get(slot_ad, "Rank"), slot_ad, job, strict=True)
        except EvaluationLimitExceeded as exc:
            self._strike(exc)
            return 0.0, 0.0
        finally:
            self._charge(started)

    # ------------------------------------------------------------------ hostile requests
    def _strike(self, exc: EvaluationLimitExceeded) -> None:
        self._struck += 1
        if self._struck >= self.strikes:
            raise _Hostile(f"its expressions went past an evaluation bound on {self._struck} slots ({exc})")

    def _charge(self, started: float) -> None:
        self._spent += time.thread_time() - started
        if self._spent > self.request_seconds:
            raise _Hostile(f"its expressions took more than {self.request_seconds:g} s of evaluation in this cycle")

    def _rank_signature(self, job_low: dict[str, Any], keys: frozenset[str] | None) -> Any:
        """What decides both Ranks on the job's side; None when that cannot be told."""
        if keys is None:
            return None
        return keys, tuple([_key_value(job_low.get(n, _ABSENT)) for n in self._names(keys)])

    @staticmethod
    def _bounded(cache: dict[Any, Any], key: Any, make: type) -> Any:
        value = cache.get(key)
        if value is None:
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            value = cache[key] = make()
        return value

    # ------------------------------------------------------------------ matching
    def _index(self, name: str) -> AttrIndex:
        index = self._indexes.get(name)
        if index is None:
            index = self._indexes[name] = AttrIndex(name, [(s.index, s.low) for s in self.static])
        return index

    def _prefiltered(self, job_req: Any, job_low: dict[str, Any]) -> set[int] | None:
        """The static slots the simple conjuncts of the job's Requirements leave (None: all)."""
        found: set[int] | None = None
        for c in conjuncts(job_req, job_low):
            hits = self._index(c.name).satisfying(c.op, c.value)
            found = hits if found is None else found & hits
            if not found:
                return set()
        return found

    def _rank_order(self, signature: Any, job: dict[str, Any], job_rank: Any, rank_keys: frozenset[str] | None,
                    ranks: dict[int, tuple[float, float]]) -> list[tuple[float, float, int]]:
        """Every free static slot as (-job rank, -slot rank, index), best first, for one rank
        signature; slots taken since are dropped once they are half the list."""
        entry = self._global_orders.get(signature)
        if entry is not None and entry[1] <= 2 * self._free_static:
            return entry[0]
        if entry is not None:
            order = [e for e in entry[0] if not self.slots[e[2]].taken]
        else:
            rank_part = self._partition(rank_keys)
            order = []
            for s in self.static:
                if s.taken:
                    continue
                rgid = rank_part.of[s.index]
                r = ranks.get(rgid)
                if r is None:
                    r = ranks[rgid] = self._rank(job, job_rank, s.ad)
                order.append((-r[0], -r[1], s.index))
            order.sort()
        if len(self._global_orders) >= _CACHE_MAX:
            self._global_orders.clear()
        self._global_orders[signature] = (order, len(order))
        return order

    def _sources(self, job: dict[str, Any]) -> list[Iterator[tuple[float, float, int]]]:
        """Streams of (-job rank, -slot rank, index) over the free slots matching ``job``, each
        sorted best first; merged, they give the request's slots in order."""
        job_low = {k.lower(): v for k, v in job.items() if isinstance(k, str)}
        job_req = job_low.get("requirements")
        job_rank = job_low.get("rank")
        sources: list[Iterator[tuple[float, float, int]]] = []
        if self._free_static > 0:
            req_keys = reach(job_low, ("requirements",), self._refs)
            rank_keys = reach(job_low, ("rank",), self._refs)
            part = self._partition(req_keys)
            signature = self._rank_signature(job_low, rank_keys)
            # A few groups are cheaper to test than to look up in the indexes. The slots an index
            # leaves come in whole groups: a group's members agree on what the Requirements reach.
            found = self._prefiltered(job_req, job_low) if len(part.members) > _EAGER_GROUPS else None
            if signature is None:  # nothing can be shared with other requests
                ranks: dict[int, tuple[float, float]] = {}
                orders: dict[int, _Order] = {}
            else:
                ranks = self._bounded(self._ranks, signature, dict)
                orders = self._bounded(self._orders, (signature, req_keys), dict)
            many = len(part.members) > _EAGER_GROUPS and (found is None or len(found) > _EAGER_GROUPS)
            if signature is not None and many:
                # Many kinds of slot (they differ in what the Requirements reach): walk them in
                # rank order and test each group when first met, stopping when the request is served.
                order = self._rank_order(signature, job, job_rank, rank_keys, ranks)
                sources.append(self._walk(job, job_req, part, found, order))
            else:
                of = part.of
                gids = range(len(part.members)) if found is None else sorted({of[i] for i in found if of[i] >= 0})
                gids = [g for g in gids if part.free[g] > 0]
                rank_part = self._partition(rank_keys)
                for gid in gids:
                    members = part.members[gid]
                    if not self._test(job, job_req, self.slots[members[0]].ad):  # static ads never change
                        continue
                    group_order = orders.get(gid)
                    if group_order is None:
                        group_order = orders[gid] = self._order(members, job, job_rank, rank_part, ranks)
                    while group_order and self.slots[-group_order[-1][2]].taken:  # taken earlier
                        group_order.pop()
                    if group_order:
                        sources.append(self._from_order(group_order))
        pslots = []
        for p in self.pslots:
            if number(p.ad, "Cpus") <= 0 or not self._test(job, job_req, p.ad):
                continue
            jr, sr = self._rank(job, job_rank, p.ad)
            pslots.append((-jr, -sr, p.index))
        if pslots:
            pslots.sort()
            sources.append(iter(pslots))
        return sources

    def _test(self, job: dict[str, Any], job_req: Any, slot_ad: dict[str, Any]) -> bool:
        """Both Requirements (HTCondor's symmetric match); an evaluation past a bound is false
        and a strike against the request."""
        self.evaluations += 1
        started = time.thread_time()
        try:
            return test_expr(job_req, job, slot_ad, True) and test_expr(get(slot_ad, "Requirements"), slot_ad, job, True)
        except EvaluationLimitExceeded as exc:
            self._strike(exc)
            return False
        finally:
            self._charge(started)

    def _from_order(self, order: _Order) -> Iterator[tuple[float, float, int]]:
        # Reads without popping: the merge looks one entry ahead, and an entry looked at but not
        # handed out must stay for the next request.
        slots = self.slots
        for k in range(len(order) - 1, -1, -1):
            jr, sr, neg_index = order[k]
            if not slots[-neg_index].taken:
                yield (-jr, -sr, -neg_index)

    def _walk(
        self, job: dict[str, Any], job_req: Any, part: _Partition, found: set[int] | None,
        order: list[tuple[float, float, int]],
    ) -> Iterator[tuple[float, float, int]]:
        slots, of = self.slots, part.of
        tested: dict[int, bool] = {}
        for entry in order:
            index = entry[2]
            if slots[index].taken or (found is not None and index not in found):
                continue
            gid = of[index]
            if gid < 0:
                continue
            ok = tested.get(gid)
            if ok is None:
                ok = tested[gid] = self._test(job, job_req, slots[index].ad)
            if ok:
                yield entry

    def _order(
        self, members: list[int], job: dict[str, Any], job_rank: Any, rank_part: _Partition,
        ranks: dict[int, tuple[float, float]],
    ) -> _Order:
        """A group's free slots by rank, the best last; one Rank evaluation per rank group."""
        out: _Order = []
        for i in members:
            s = self.slots[i]
            if s.taken:
                continue
            rgid = rank_part.of[i]
            r = ranks.get(rgid) if rgid >= 0 else None
            if r is None:
                r = self._rank(job, job_rank, s.ad)
                if rgid >= 0:
                    ranks[rgid] = r
            out.append((r[0], r[1], -i))
        out.sort()
        return out

    def candidates(self, job: dict[str, Any]) -> list[Slot]:
        """The free slots that match ``job`` both ways, best (job Rank, slot Rank, place) first
        (none for a hostile request: :attr:`hostile` says why)."""
        self._begin()
        try:
            return [self.slots[index] for *_, index in heapq.merge(*self._sources(job))]
        except _Hostile as exc:
            self.hostile = str(exc)
            return []

    def _begin(self) -> None:
        self._struck, self._spent, self.hostile = 0, 0.0, None

    def match(
        self,
        job: dict[str, Any],
        count: int,
        budget: float = math.inf,
        accept: Callable[[Slot], bool] | None = None,
        refusals: int = 0,
    ) -> tuple[list[SlotMatch], str | None]:
        """Up to ``count`` slots for the request ``job`` within ``budget`` slot weight.

        Returns the matches and, if fewer than ``count`` were made, the reason why; for
        :data:`REJECT_HOSTILE` :attr:`hostile` holds the sentence (the matches made before the
        request was found hostile stand: they match). ``accept``: a last test of each static
        slot found (left free when it says no); after ``refusals`` of them the request stops.
        """
        matches: list[SlotMatch] = []
        self._begin()
        if not self.has_free():
            return matches, REJECT_PRIORITY  # the pool is busy: others hold every slot
        try:
            return self._match(job, count, budget, matches, accept, refusals)
        except _Hostile as exc:
            self.hostile = str(exc)
            return matches, REJECT_HOSTILE

    def _match(
        self, job: dict[str, Any], count: int, budget: float, matches: list[SlotMatch],
        accept: Callable[[Slot], bool] | None = None, refusals: int = 0,
    ) -> tuple[list[SlotMatch], str | None]:
        spent = 0.0
        refused = 0
        # Lazy: a source tests and ranks only as far as the request reads.
        stream = heapq.merge(*self._sources(job))
        while len(matches) < count:
            entry = next(stream, None)
            if entry is None:
                break
            slot = self.slots[entry[2]]
            if slot.partitionable:  # carve it while the request fits
                while len(matches) < count:
                    need = requested(job, slot.ad)
                    if not self._fits(slot, job, need):
                        break
                    if spent + need[0] > budget + 1e-9:
                        return matches, REJECT_PRIORITY
                    matches.append(SlotMatch(slot, dict(slot.ad), need[0]))
                    spent += need[0]
                    _carve(slot.ad, need)
                    _carve_gpus(slot.ad, job)
                continue
            weight = slot.weight
            if spent + weight > budget + 1e-9:
                return matches, REJECT_PRIORITY
            if accept is not None and not accept(slot):
                refused += 1
                if refused > refusals:
                    return matches, REJECT_NO_MATCH
                continue
            matches.append(SlotMatch(slot, slot.ad, weight))  # a static slot's ad never changes
            spent += weight
            self._take(slot)
        if len(matches) >= count:
            return matches, None
        # Fewer than wanted: the matching slots ran out. If no slot at all is left, others hold
        # them (priority); otherwise what is left does not suit this request.
        return matches, (REJECT_PRIORITY if not self.has_free() else REJECT_NO_MATCH)

    def _fits(self, slot: Slot, job: dict[str, Any], need: tuple[float, float, float]) -> bool:
        cpus, memory, disk = need
        ad = slot.ad
        if cpus > number(ad, "Cpus") or memory > number(ad, "Memory") or disk > number(ad, "Disk"):
            return False
        return self._test(job, get(job, "Requirements"), ad)


# What the startd carves for a job that does not say (its JOB_DEFAULT_REQUEST* knobs' defaults).
DEFAULT_REQUEST = (1.0, 128.0, 1024.0)


def requested(job: dict[str, Any], slot_ad: dict[str, Any]) -> tuple[float, float, float]:
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


def _carve_gpus(ad: dict[str, Any], job: dict[str, Any]) -> None:
    """The partitionable slot's GPUs less the job's RequestGPUs, so that the cycle's next
    ``TARGET.GPUs >= RequestGPUs`` sees what is left (the startd picks the devices)."""
    key = next((k for k in ad if k.lower() == "gpus"), None)
    if key is None or not is_number(ad[key]):
        return
    want = eval_number(get(job, "RequestGPUs"), job, ad, 0.0)
    if want > 0:
        ad[key] = max(0, int(ad[key] - math.ceil(want)))


_ABSENT = object()  # an attribute the ad does not have (unlike one whose value is undefined)


def _key_value(value: Any) -> Any:
    """A hashable stand-in for an attribute value, equal only for values that evaluate alike
    (1, 1.0 and true are different ClassAd values, though equal in Python)."""
    t = type(value)
    if t is str or t is int or t is float or t is bool:
        return (t, value)
    if value is _ABSENT:
        return ("absent",)
    if value is None:
        return ("none",)
    if _is_expr(value):
        return ("expr", str(value))
    if isinstance(value, (list, tuple, dict)):
        return ("repr", repr(value))
    return (t.__name__, repr(value))


def fair_shares(pie: float, eup: dict[str, float], in_use: dict[str, float]) -> dict[str, float]:
    """Each submitter's share of ``pie`` slot weight, in inverse proportion to its effective
    priority, less the weight it already holds (HTCondor's submitter limit)."""
    if not eup:
        return {}
    inverse = {n: 1.0 / max(p, 1e-9) for n, p in eup.items()}
    total = sum(inverse.values())
    return {n: max(0.0, pie * inverse[n] / total - in_use.get(n, 0.0)) for n in eup}
