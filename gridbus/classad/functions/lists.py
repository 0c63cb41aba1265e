"""Functions on lists: ``size``, ``member``, ``identicalMember``, ``sum``, ``avg``, ``min``,
``max``, ``anyCompare`` and ``allCompare``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridbus.classad.functions.registry import strict
from gridbus.classad.operators import compare, identical
from gridbus.classad.scope import AdValue, ListValue
from gridbus.classad.values import ERROR, UNDEFINED, wrap64


@strict("size", 1)
def _size(v: Any) -> Any:
    t = type(v)
    if t is ListValue:
        return len(v)
    if t is str:
        return len(v.encode("utf-8"))
    if t is AdValue:
        return len(v.scope.d)
    if v is UNDEFINED:
        return UNDEFINED
    return ERROR


def _member(ident: bool) -> Callable:
    # As HTCondor's testMember: undefined first, then the types, then each element compared with
    # == (or =?=); an element that does not compare (a list, an ad, another type) is just no match.
    def fn(x: Any, lst: Any) -> Any:
        if lst is UNDEFINED or (not ident and x is UNDEFINED):
            return UNDEFINED
        if type(lst) is not ListValue or type(x) in (ListValue, AdValue):
            return ERROR
        if not ident and x is ERROR:
            return ERROR
        for e in lst.values():
            r = identical(e, x) if ident else compare("==", e, x)
            if r is True:
                return True
        return False

    return fn


strict("member", 2)(_member(False))
strict("identicalMember", 2)(_member(True))


def _numbers(v: Any) -> Any:
    """The numbers of a list (booleans as 0/1, undefined elements skipped), or the error or
    undefined the function answers."""
    if type(v) is not ListValue:
        return UNDEFINED if v is UNDEFINED else ERROR
    vals = [e for e in v.values() if e is not UNDEFINED]
    for e in vals:
        t = type(e)
        if not (t is int or t is float or t is bool):
            return ERROR
    return [int(e) if type(e) is bool else e for e in vals]


def _lone_boolean(v: Any) -> Any:
    """The only defined element of a list when it is a boolean, else None: classad2's sum, min and
    max hand a single element back as it is and turn booleans into numbers only by combining."""
    vals = [e for e in v.values() if e is not UNDEFINED]
    return vals[0] if len(vals) == 1 and type(vals[0]) is bool else None


@strict("sum", 1)
def _sum(v: Any) -> Any:
    nums = _numbers(v)
    if type(nums) is not list:
        return nums
    lone = _lone_boolean(v)
    if lone is not None:
        return lone
    return _added(nums)


def _added(nums: list[Any]) -> Any:
    """The elements added left to right with the ClassAd ``+``, as HTCondor's sum and avg do: an
    integer sum wraps at 64 bits and becomes real at the first real, so {INT_MAX, 1, -3.25} sums
    to about -9.22e18, not +9.22e18."""
    acc: Any = 0
    for e in nums:
        if type(acc) is int and type(e) is int:
            acc = wrap64(acc + e)
        else:
            acc = float(acc) + float(e)
    return acc


@strict("avg", 1)
def _avg(v: Any) -> Any:
    nums = _numbers(v)
    if type(nums) is not list:
        return nums
    if not nums:
        return 0
    return float(_added(nums)) / len(nums)


def _extreme(pick_max: bool) -> Callable:
    def fn(v: Any) -> Any:
        nums = _numbers(v)
        if type(nums) is not list:
            return nums
        if not nums:
            return UNDEFINED
        lone = _lone_boolean(v)
        if lone is not None:
            return lone
        best = nums[0]
        real = type(best) is float
        for e in nums[1:]:
            real = real or type(e) is float
            if (e > best) if pick_max else (e < best):
                best = e
        return float(best) if real else best

    return fn


strict("min", 1)(_extreme(False))
strict("max", 1)(_extreme(True))


# Spelled exactly: HTCondor compares the operator text as it is.
_LIST_COMPARE_OPS = frozenset({"<", "<=", "==", "!=", ">=", ">", "is", "isnt"})


def _anyall(want_any: bool) -> Callable:
    def fn(op: Any, lst: Any, x: Any) -> Any:
        if op is UNDEFINED:
            return UNDEFINED
        if type(op) is not str or op not in _LIST_COMPARE_OPS:
            return ERROR
        if lst is UNDEFINED:
            return UNDEFINED
        if type(lst) is not ListValue:
            return ERROR
        for e in lst.values():
            if op == "is":
                r = identical(e, x)
            elif op == "isnt":
                r = identical(e, x)
                r = r if r is ERROR else not r
            else:
                r = compare(op, e, x)
            if r is True:
                if want_any:
                    return True
            elif r is False:
                if not want_any:
                    return False
            elif r is UNDEFINED:
                return False  # an undefined comparison ends the walk with false, for both
            else:
                return ERROR
        return not want_any

    return fn


strict("anyCompare", 3)(_anyall(True))
strict("allCompare", 3)(_anyall(False))
