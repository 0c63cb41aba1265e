"""Attribute access on plain-dict ads: ClassAd attribute names are case-insensitive, and ads that
come off the wire or out of the job queue are dicts that keep whatever spelling they were given
(``gridbus edit 12 periodicremove true`` stores ``periodicremove``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def canonical(ad: Mapping[str, Any], name: str) -> str | None:
    """The key ``ad`` spells ``name`` with, or None."""
    if name in ad:
        return name
    size, low = len(name), name.lower()  # (only a key of the name's length can spell it)
    return next((k for k in ad if len(k) == size and k.lower() == low), None)


def get(ad: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``ad[name]`` whatever the case of the key, else ``default``. (On the per-job paths: a miss
    looks at every key, and lowers only those of the name's length, the only ones that can spell it.)"""
    if name in ad:
        return ad[name]
    size, low = len(name), name.lower()
    for key, value in ad.items():
        if len(key) == size and key.lower() == low:
            return value
    return default


class Spellings:
    """A fixed set of attribute names, and ads made to spell them as given (`spelled`).

    For code on a per-job path: it remembers the keys it has seen that spell none of the names
    (every ad of a pool uses a few hundred names at most), so an ad whose keys are all known is
    told apart with one set difference, in C, and is given back as it is, not copied."""

    KNOWN_MAX = 10_000  # keys remembered; past it the memory starts again (hostile ads)

    def __init__(self, names: Iterable[str]):
        self.names = frozenset(names)
        self._by_lower = {n.lower(): n for n in self.names}
        self._others: set[str] = set()  # keys seen that spell none of the names

    def spelled(self, ad: Mapping[str, Any]) -> Mapping[str, Any]:
        """``ad`` (itself when nothing is to rename) with every key that spells one of the names
        in another case renamed to the name's spelling; where both are given, the name's own
        spelling wins."""
        odd = ad.keys() - self.names - self._others
        if not odd:
            return ad
        renames: dict[str, str] = {}
        for key in odd:
            name = self._by_lower.get(key.lower()) if isinstance(key, str) else None
            if name is not None:
                renames[key] = name
            elif isinstance(key, str):
                if len(self._others) >= self.KNOWN_MAX:
                    self._others.clear()
                self._others.add(key)
        if not renames:
            return ad
        out: dict[str, Any] = {}
        for key, value in ad.items():
            name = renames.get(key, key)
            if name in out and name != key:
                continue  # the canonical spelling was given too: it wins
            out[name] = value
        return out
