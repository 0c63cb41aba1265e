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
    low = name.lower()
    return next((k for k in ad if k.lower() == low), None)


def get(ad: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``ad[name]`` whatever the case of the key, else ``default``."""
    key = canonical(ad, name)
    return ad[key] if key is not None else default


def spelled(ad: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``ad`` with every key that is one of ``names`` in another case renamed to that spelling,
    so code that reads those names with ``ad.get`` finds them (a copy; one pass over the ad)."""
    by_lower = {n.lower(): n for n in names}
    out: dict[str, Any] = {}
    for key, value in ad.items():
        name = by_lower.get(key.lower(), key)
        if name in out and name != key:
            continue  # the canonical spelling was given too: it wins
        out[name] = value
    return out
