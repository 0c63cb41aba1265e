"""HTCondor's string lists ("a, b, c"): ``stringListSize``, ``stringListSum``/``Avg``/``Min``/
``Max``, ``stringListMember`` and its case-folding and subset forms, ``stringListsIntersect``,
``stringList_regexpMember`` and ``split``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gridbus.classad.cnumbers import f2ll, strtod
from gridbus.classad.functions.regex import compile_regex
from gridbus.classad.functions.registry import list_of, strict
from gridbus.classad.values import ERROR, UNDEFINED, first_bad


def _tokens(s: str, delims: str) -> list[str]:
    """HTCondor's StringTokenIterator: split at any delimiter character, trim white space, drop
    empty items."""
    if not delims:
        return [s.strip()] if s.strip() else []
    parts = re.split("[" + re.escape(delims) + "]", s)
    return [p.strip() for p in parts if p.strip()]


def _slist_args(s: Any, delims: Any, default: str = ", ") -> Any:
    # The extension functions want strings and nothing else: undefined is an error here.
    if type(s) is not str or (delims is not None and type(delims) is not str):
        return ERROR
    return _tokens(s, default if delims is None else delims)


@strict("stringListSize", 1, 2)
def _sl_size(s: Any, delims: Any = None) -> Any:
    items = _slist_args(s, delims)
    return len(items) if type(items) is list else items


_FLT_MAX = 3.4028234663852886e38
_FLT_MIN = 1.1754943508222875e-38


def _sl_summarize(kind: str) -> Callable:
    # stringListSummarize_func: sscanf("%lf") per item, real as soon as one item has a character
    # other than +-0123456789, min/max start from FLT_MAX/FLT_MIN (so max of negatives is 0).
    def fn(s: Any, delims: Any = None) -> Any:
        items = _slist_args(s, delims)
        if type(items) is not list:
            return items
        if not items:
            return 0.0 if kind in ("sum", "avg") else UNDEFINED
        acc = {"sum": 0.0, "avg": 0.0, "min": _FLT_MAX, "max": _FLT_MIN}[kind]
        is_real = False
        for it in items:
            x = strtod(it)
            if x is None:
                return ERROR
            if it.strip("+-0123456789"):
                is_real = True
            if kind in ("sum", "avg"):
                acc = x + acc
            elif kind == "min":
                acc = x if x < acc else acc
            else:
                acc = x if x > acc else acc
        if kind == "avg":
            acc /= len(items)
        return acc if is_real else f2ll(acc)

    return fn


strict("stringListSum", 1, 2)(_sl_summarize("sum"))
strict("stringListAvg", 1, 2)(_sl_summarize("avg"))
strict("stringListMin", 1, 2)(_sl_summarize("min"))
strict("stringListMax", 1, 2)(_sl_summarize("max"))


def _sl_member(fold: bool, subset: bool) -> Callable:
    # stringListMember_func: strings or undefined (which counts as ""), both undefined is
    # undefined; the default delimiters include tabs and line ends.
    def fn(item: Any, s: Any, delims: Any = None) -> Any:
        for v in (item, s, delims):
            if v is not None and v is not UNDEFINED and type(v) is not str:
                return ERROR
        if item is UNDEFINED and s is UNDEFINED:
            return UNDEFINED
        d = ", \t\r\n" if delims is None or delims is UNDEFINED else delims
        item_s = "" if item is UNDEFINED else item
        items = _tokens("" if s is UNDEFINED else s, d)
        if not subset:
            if fold:
                return item_s.lower() in [x.lower() for x in items]
            return item_s in items
        if not item_s:
            return True  # the empty string is always a subset
        wanted = _tokens(item_s, d)  # split before folding: the delimiters are case-sensitive
        if fold:
            items = [x.lower() for x in items]
            wanted = [w.lower() for w in wanted]
        have = set(items)
        return bool(wanted) and all(w in have for w in wanted)

    return fn


strict("stringListMember", 2, 3)(_sl_member(False, False))
strict("stringListIMember", 2, 3)(_sl_member(True, False))
strict("stringListSubsetMatch", 2, 3)(_sl_member(False, True))
strict("stringListISubsetMatch", 2, 3)(_sl_member(True, True))


def _split_raw(s: str, delims: str) -> list[str]:
    """The core library's split_string_list: strcspn pieces, not trimmed, empty ones dropped."""
    d = delims or " ,"
    return [p for p in re.split("[" + re.escape(d) + "]", s) if p]


@strict("stringListsIntersect", 2, 3)
def _sl_intersect(a: Any, b: Any, delims: Any = None) -> Any:
    bad = first_bad(a, b, delims)
    if bad is not None:
        return bad
    if type(a) is not str or type(b) is not str or (delims is not None and type(delims) is not str):
        return ERROR
    d = delims or ""
    ys = set(_split_raw(b, d))
    return any(x in ys for x in _split_raw(a, d))


@strict("stringList_regexpMember", 2, 4)
def _sl_regexp_member(pattern: Any, s: Any, delims: Any = None, options: Any = None) -> Any:
    if any(v is not None and type(v) is not str for v in (pattern, s, delims, options)):
        return ERROR
    rx = compile_regex(pattern, options)
    if rx is None:
        return ERROR
    items = _tokens(s, ", " if delims is None else delims)
    if not items:
        return UNDEFINED
    return any(rx.search(it) for it in items)


def _c_isspace(ch: int) -> bool:
    return ch in (9, 10, 11, 12, 13, 32)


@strict("split", 1, 2)
def _split(s: Any, seps: Any = None) -> Any:
    if type(s) is not str or (seps is not None and type(seps) is not str):
        return ERROR
    d = ", \t" if seps is None else seps
    # splitArb_func: white space runs and a separator mixed with white space count once, but a
    # repeated non-space separator ("a,,b") makes an empty item.
    out: list[str] = []
    last = 0
    ch = -1
    if d:
        for ix, c in enumerate(s):
            if c not in d:
                continue
            if ix > last:
                out.append(s[last:ix])
            elif not _c_isspace(ch) and ch == ord(c):
                out.append("")
            if not c.isspace():
                ch = ord(c)
            last = ix + 1
    if len(s) > last:
        out.append(s[last:])
    return list_of(out)
