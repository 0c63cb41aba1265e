"""Version comparison: ``versioncmp``, ``versionLT``... ``versionEQ`` and ``version_in_range``,
on HTCondor's natural_cmp."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridbus.classad.functions.conversions import string_pair, to_string
from gridbus.classad.functions.registry import strict
from gridbus.classad.values import ERROR, UNDEFINED


def _sbyte(c: int) -> int:
    return c - 256 if c > 127 else c  # C's plain char is signed on x86


def _isdigit(c: int) -> bool:
    return 48 <= c <= 57


def natural_cmp(a: str, b: str) -> int:
    """HTCondor's natural_cmp (strverscmp-like), byte for byte: the result is a difference of
    characters or of digit-run lengths, not just its sign, because versioncmp() returns it."""
    s1 = a.encode("utf-8") + b"\0"
    s2 = b.encode("utf-8") + b"\0"
    i = 0
    while s1[i] and s1[i] == s2[i]:
        i += 1
    if s1[i] == s2[i]:
        return 0
    n = i  # the start of the digit run that leads up to the mismatch (same in both strings)
    while n > 0 and _isdigit(s1[n - 1]):
        n -= 1
    if n == i and (not _isdigit(s1[i]) or not _isdigit(s2[i])):
        return _sbyte(s1[i]) - _sbyte(s2[i])
    z1 = n
    while s1[z1] == 48:
        z1 += 1
    z2 = n
    while s2[z2] == 48:
        z2 += 1
    if z1 > n and not _isdigit(s1[z1]):  # a final zero is the number, not a leading zero
        z1 -= 1
    if z2 > n and not _isdigit(s2[z2]):
        z2 -= 1
    if z1 != z2:
        return z2 - z1  # fewer leading zeros sorts first
    if z1 > n:
        return _sbyte(s1[i]) - _sbyte(s2[i])
    e1 = z1
    while _isdigit(s1[e1]):
        e1 += 1
    e2 = z2
    while _isdigit(s2[e2]):
        e2 += 1
    if e1 != e2:
        return e1 - e2
    return _sbyte(s1[i]) - _sbyte(s2[i])


@strict("versioncmp", 2)
def _versioncmp(a: Any, b: Any) -> Any:
    pair = string_pair(a, b)
    return natural_cmp(*pair) if type(pair) is tuple else pair


def _version_pred(pred: Callable[[int], bool]) -> Callable:
    def fn(a: Any, b: Any) -> Any:
        r = _versioncmp(a, b)
        return pred(r) if type(r) is int else r

    return fn


strict("versionLT", 2)(_version_pred(lambda r: r < 0))
strict("versionLE", 2)(_version_pred(lambda r: r <= 0))
strict("versionGT", 2)(_version_pred(lambda r: r > 0))
strict("versionGE", 2)(_version_pred(lambda r: r >= 0))
strict("versionEQ", 2)(_version_pred(lambda r: r == 0))


@strict("version_in_range", 3)
def _version_in_range(v: Any, lo: Any, hi: Any) -> Any:
    # Only the bounds are tested for undefined first: an undefined version is an error.
    if lo is UNDEFINED or hi is UNDEFINED:
        return UNDEFINED
    t, a, b = to_string(v), to_string(lo), to_string(hi)
    if type(t) is not str or type(a) is not str or type(b) is not str:
        return ERROR
    return natural_cmp(a, t) <= 0 and natural_cmp(t, b) <= 0
