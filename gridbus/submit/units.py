"""request_memory / request_disk with units, as condor_submit reads them.

A bare number is MiB for memory and KiB for disk; a K, M, G, T (optionally followed by B, any case,
a blank allowed before it) scales it; the result is rounded up to a whole MiB or KiB. Anything else
is a ClassAd expression and is left for the matchmaker.
"""

from __future__ import annotations

import math
import re

_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGTP]?)(?:B)?\s*$", re.I)
_POWER = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def quantity(text: str, base: str) -> int | None:
    """The value in units of `base` ("M" for MiB, "K" for KiB), or None when it is not a quantity."""
    m = _QUANTITY.match(text)
    if not m:
        return None
    number = float(m.group(1))
    unit = (m.group(2) or base).upper()
    scaled = number * (1024 ** (_POWER[unit] - _POWER[base]))
    return int(math.ceil(scaled - 1e-9))


def memory_mib(text: str) -> int | None:
    return quantity(text, "M")


def disk_kib(text: str) -> int | None:
    return quantity(text, "K")
