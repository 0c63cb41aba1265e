"""The collector's memory: the newest ad of every daemon, indexed, each expiring at its lifetime.

Ads are kept as the plain dicts they arrived as (never ClassAd objects: a query over 100,000 ads
evaluates a compiled constraint on the dicts directly). They are indexed by type and by name:
``(MyType, Name)`` is the key, both compared case-insensitively as HTCondor compares them.

Expiry uses a heap with lazy deletion, so a tick costs O(expired * log n), never a scan of every
ad. Each ad has at most one heap entry: an update only moves the ad's deadline forward, and when
an entry comes due for an ad whose deadline has moved on, the entry is pushed back with the new
deadline. Entries of ads that were replaced by a newer daemon start or removed are recognised by
their generation and dropped.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gridbus.classad.values import is_number

# Attributes that are secrets: never stored in (or answered from) the public ad. A daemon sends
# them on the private routing key; one that slips into a public ad is moved to the private side.
PRIVATE_ATTRS = ("ClaimId", "Capability", "ClaimIdList")
_PRIVATE_LOWER = {a.lower() for a in PRIVATE_ATTRS}

# Bounds of an ad's lifetime: HTCondor's collector uses CLASSAD_LIFETIME (900 s) when an ad says
# nothing; a nonsense value (negative, absurdly large) is clamped instead of refused.
MIN_LIFETIME = 0.1
MAX_LIFETIME = 7 * 24 * 3600.0


class BadAd(ValueError):
    """An ad the collector refuses; the message names what was wrong."""


class Outcome:
    """What `AdStore.update` did with an ad."""

    NEW = "new"
    UPDATED = "updated"
    OUT_OF_ORDER = "out_of_order"


@dataclass(slots=True)
class Entry:
    ad: dict[str, Any]
    private: dict[str, Any] | None
    start: int  # DaemonStartTime of the daemon that sent it
    seq: int  # UpdateSequenceNumber within that start
    expires: float  # when it is forgotten unless updated again
    heap_at: float  # the deadline of this entry's heap record (<= expires)
    generation: int


@dataclass
class StoreStats:
    updates: int = 0
    out_of_order: int = 0
    expired: int = 0
    invalidated: int = 0
    private_updates: int = 0
    by_type_names: dict[str, str] = field(default_factory=dict)  # lower -> first spelling seen


def _int(value: Any, default: int = 0) -> int:
    if not is_number(value):
        return default
    return int(value)


def ad_identity(ad: Any) -> tuple[str, str]:
    """``(MyType, Name)`` of a wire ad, or BadAd naming what is missing."""
    if not isinstance(ad, dict):
        raise BadAd(f"an ad must be a map of attribute to value, not {type(ad).__name__}")
    mytype = ad.get("MyType")
    name = ad.get("Name")
    if mytype is None or name is None:  # attribute names are case-insensitive
        lower = {str(k).lower(): k for k in ad}
        if mytype is None and "mytype" in lower:
            mytype = ad[lower["mytype"]]
        if name is None and "name" in lower:
            name = ad[lower["name"]]
    if not isinstance(mytype, str) or not mytype:
        raise BadAd(f"ad without a MyType string (Name={name!r})")
    if not isinstance(name, str) or not name:
        raise BadAd(f"{mytype} ad without a Name string")
    return mytype, name


# Attribute spellings known not to be secret. Ads of one kind repeat the same names, so one C-level
# set difference per ad replaces a lower() per attribute; bounded so garbage names cannot grow it.
_KNOWN_PUBLIC: set[str] = set()
_KNOWN_PUBLIC_MAX = 100_000


def split_private(ad: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The ad without its secret attributes, and those secrets (None when there are none)."""
    unknown = ad.keys() - _KNOWN_PUBLIC
    if not unknown:
        return ad, None
    secret = []
    for k in unknown:
        if k.lower() in _PRIVATE_LOWER:
            secret.append(k)
        elif len(_KNOWN_PUBLIC) < _KNOWN_PUBLIC_MAX:
            _KNOWN_PUBLIC.add(k)
    if not secret:
        return ad, None
    public = {k: v for k, v in ad.items() if k not in secret}
    return public, {k: ad[k] for k in secret}


class AdStore:
    """Newest ad per (MyType, Name), with a type index, a name index and a lazy expiry heap."""

    def __init__(self, default_lifetime: float = 900.0, clock: Callable[[], float] | None = None):
        import time

        self.default_lifetime = float(default_lifetime)
        self.clock = clock or time.time
        self._by_type: dict[str, dict[str, Entry]] = {}  # mytype.lower() -> name.lower() -> entry
        self._heap: list[tuple[float, int, str, str]] = []
        self._generations = itertools.count(1)
        self.stats = StoreStats()

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return sum(len(t) for t in self._by_type.values())

    def counts(self) -> dict[str, int]:
        """Ads held per MyType (as first spelled by a daemon)."""
        return {self.stats.by_type_names.get(t, t): len(d) for t, d in self._by_type.items() if d}

    def types(self) -> list[str]:
        return list(self._by_type)

    def get(self, mytype: str, name: str) -> Entry | None:
        return self._by_type.get(mytype.lower(), {}).get(name.lower())

    def entries(self, mytypes: Iterable[str] | None = None) -> Iterator[Entry]:
        """Every entry of the given types (all types when None), type index first."""
        keys = list(self._by_type) if mytypes is None else [t.lower() for t in mytypes]
        for key in dict.fromkeys(keys):
            table = self._by_type.get(key)
            if table:
                # A snapshot of the values: a streamed answer yields between chunks while
                # updates land, and a dict must not change size under its iterator.
                yield from list(table.values())

    def by_name(self, name: str, mytypes: Iterable[str] | None = None) -> list[Entry]:
        """The entries called ``name`` (case-insensitively), from the name index of each type."""
        keys = list(self._by_type) if mytypes is None else [t.lower() for t in mytypes]
        found = []
        for key in dict.fromkeys(keys):
            entry = self._by_type.get(key, {}).get(name.lower())
            if entry is not None:
                found.append(entry)
        return found

    # ------------------------------------------------------------------ writing
    def update(self, ad: dict[str, Any], now: float | None = None) -> str:
        """Store a public ad; return an `Outcome`. Raises BadAd for an ad without identity.

        The store keeps the dict it is given (adding LastHeardFrom), without a copy: ingest hands
        it freshly decoded dicts that nobody else holds.
        """
        mytype, name = ad_identity(ad)
        now = self.clock() if now is None else now
        public, secret = split_private(ad)
        start = _int(ad.get("DaemonStartTime"))
        seq = _int(ad.get("UpdateSequenceNumber"), -1)
        tkey = mytype.lower()
        table = self._by_type.get(tkey)
        if table is None:
            table = self._by_type[tkey] = {}
            self.stats.by_type_names.setdefault(tkey, mytype)
        key = name.lower()
        old = table.get(key)
        if old is not None and (start, seq) < (old.start, old.seq):
            # An older update of the same daemon start (or one from an earlier start) that the
            # broker delivered late: the held ad is newer.
            self.stats.out_of_order += 1
            return Outcome.OUT_OF_ORDER
        lifetime = self._lifetime(ad)
        # The ad is the caller's freshly decoded dict: the store owns it from here on.
        public["LastHeardFrom"] = int(now)
        expires = now + lifetime
        self.stats.updates += 1
        if old is not None and old.start == start:
            old.ad, old.seq, old.expires = public, seq, expires
            if secret is not None:
                old.private = {**(old.private or {}), **secret}
            if expires < old.heap_at:  # the lifetime shrank: the heap must wake earlier
                self._push(old, tkey, key)
            return Outcome.UPDATED
        # A new ad, or a restarted daemon: a new generation (its old secrets are void).
        entry = Entry(public, secret, start, seq, expires, expires, next(self._generations))
        table[key] = entry
        self._push(entry, tkey, key)
        return Outcome.NEW if old is None else Outcome.UPDATED

    def update_private(self, ad: dict[str, Any], now: float | None = None) -> bool:
        """Attach a private ad (claim ids) to the public ad of the same (MyType, Name).

        A private ad whose public ad is not (yet) held is dropped: the daemon sends both every
        interval, and secrets kept without their ad could never be answered nor expired sensibly.
        """
        mytype, name = ad_identity(ad)
        entry = self.get(mytype, name)
        if entry is None:
            return False
        start = _int(ad.get("DaemonStartTime"), entry.start)
        if start != entry.start:
            return False  # from another start of the daemon: stale or not yet matched
        self.stats.private_updates += 1
        ident = {"mytype", "name", "updatesequencenumber", "daemonstarttime", "classadlifetime", "myaddress"}
        entry.private = {k: v for k, v in ad.items() if k.lower() not in ident}
        return True

    def remove(self, mytype: str, name: str) -> bool:
        table = self._by_type.get(mytype.lower())
        if table is None or table.pop(name.lower(), None) is None:
            return False
        self.stats.invalidated += 1
        return True

    def remove_where(self, mytype: str, predicate: Callable[[dict[str, Any]], bool]) -> int:
        """Forget every ad of ``mytype`` for which ``predicate(ad)`` is true."""
        table = self._by_type.get(mytype.lower())
        if not table:
            return 0
        doomed = [k for k, e in table.items() if predicate(e.ad)]
        for key in doomed:
            del table[key]
        self.stats.invalidated += len(doomed)
        return len(doomed)

    def expire(self, now: float | None = None) -> list[tuple[str, str]]:
        """Forget the ads whose lifetime has passed; return their (MyType, Name)."""
        now = self.clock() if now is None else now
        gone: list[tuple[str, str]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, generation, tkey, nkey = heapq.heappop(heap)
            entry = self._by_type.get(tkey, {}).get(nkey)
            if entry is None or entry.generation != generation or entry.heap_at != deadline:
                continue  # removed, replaced or re-scheduled since: a stale record
            if entry.expires > now:
                entry.heap_at = entry.expires  # updated since: wait for the new deadline
                heapq.heappush(heap, (entry.expires, generation, tkey, nkey))
                continue
            del self._by_type[tkey][nkey]
            self.stats.expired += 1
            gone.append((str(entry.ad.get("MyType", tkey)), str(entry.ad.get("Name", nkey))))
        # Records of removed ads would otherwise wait a whole lifetime; rebuild when they dominate.
        if len(heap) > 64 and len(heap) > 2 * len(self) + 64:
            self._rebuild_heap()
        return gone

    def next_expiry(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    # ------------------------------------------------------------------ internals
    def _lifetime(self, ad: dict[str, Any]) -> float:
        value = ad.get("ClassAdLifetime")
        if not is_number(value) or value <= 0:
            return self.default_lifetime
        return min(max(float(value), MIN_LIFETIME), MAX_LIFETIME)

    def _push(self, entry: Entry, tkey: str, nkey: str) -> None:
        entry.heap_at = entry.expires
        heapq.heappush(self._heap, (entry.expires, entry.generation, tkey, nkey))

    def _rebuild_heap(self) -> None:
        heap = []
        for tkey, table in self._by_type.items():
            for nkey, entry in table.items():
                entry.heap_at = entry.expires
                heap.append((entry.expires, entry.generation, tkey, nkey))
        heapq.heapify(heap)
        self._heap = heap
