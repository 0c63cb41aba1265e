"""Functions on strings: ``strcat``, ``join``, ``toUpper``, ``toLower``, ``substr``, ``strcmp``
and ``stricmp``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridbus.classad.cnumbers import int32
from gridbus.classad.functions.conversions import string_pair, to_string
from gridbus.classad.functions.registry import VARIADIC, strict
from gridbus.classad.scope import ListValue
from gridbus.classad.values import ERROR, UNDEFINED


@strict("strcat", 0, VARIADIC)
def _strcat(*vals: Any) -> Any:
    out = []
    for v in vals:
        s = to_string(v)
        if type(s) is not str:
            return s
        out.append(s)
    return "".join(out)


@strict("join", 1, VARIADIC)
def _join(*vals: Any) -> Any:
    # join(list) and join(sep, list) spread the list; otherwise the first argument is the
    # separator. Undefined items are skipped; an error anywhere makes an error; no defined item
    # while some argument was undefined makes undefined.
    if len(vals) <= 2 and type(vals[-1]) is ListValue:
        args = ([vals[0]] if len(vals) == 2 else [""]) + list(vals[-1].values())
    else:
        args = list(vals)
    texts: list[Any] = []
    for v in args:
        t = to_string(v)
        if t is ERROR:
            return ERROR
        texts.append(t)
    sep, items = texts[0], texts[1:]
    defined = [t for t in items if t is not UNDEFINED]
    if not defined and (sep is UNDEFINED or len(defined) != len(items)):
        return UNDEFINED
    sep = "" if sep is UNDEFINED else sep
    out = ""
    for t in defined:
        if out:  # HTCondor puts the separator in only once something has been written
            out += sep
        out += t
    return out


def _case(upper: bool) -> Callable:
    def fn(v: Any) -> Any:
        s = to_string(v)
        if type(s) is not str:
            return s
        return s.upper() if upper else s.lower()

    return fn


strict("toUpper", 1)(_case(True))
strict("toLower", 1)(_case(False))


@strict("substr", 2, 3)
def _substr(s: Any, offset: Any, length: Any = None) -> Any:
    if s is UNDEFINED or offset is UNDEFINED or length is UNDEFINED:
        return UNDEFINED
    if type(s) is not str or type(offset) is not int or (length is not None and type(length) is not int):
        return ERROR
    # Perl-like: negative offsets and lengths count from the end; both are C ints.
    n = len(s)
    start = int32(offset)
    start = max(0, n + start) if start < 0 else min(start, n)
    if length is None:
        return s[start:]
    ln = int32(length)
    if ln == 0:
        return ""
    end = n + ln if ln < 0 else start + ln
    return s[start:end] if end > start else ""


def _cmp(fold: bool) -> Callable:
    def fn(a: Any, b: Any) -> Any:
        pair = string_pair(a, b)
        if type(pair) is not tuple:
            return pair
        x, y = pair
        if fold:
            x, y = x.lower(), y.lower()
        bx, by = x.encode(), y.encode()  # C's strcmp orders bytes
        return -1 if bx < by else (1 if bx > by else 0)

    return fn


strict("strcmp", 2)(_cmp(False))
strict("stricmp", 2)(_cmp(True))
