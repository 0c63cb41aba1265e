"""Arithmetic functions: ``floor``, ``ceil``/``ceiling``, ``round``, ``pow``, ``quantize`` and
``random``."""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable
from typing import Any

from gridbus.classad.cnumbers import INT_MIN, c_pow, c_real, cquot, f2ll
from gridbus.classad.functions.registry import strict
from gridbus.classad.scope import ListValue
from gridbus.classad.values import ERROR, wrap64


def _rounding(fn: Callable[[float], float]) -> Callable:
    def g(v: Any) -> Any:
        if type(v) is int:
            return v
        r = c_real(v)
        if r is None:
            return ERROR  # undefined too: HTCondor's rounding functions are not lenient
        if r != r or r in (math.inf, -math.inf):
            return INT_MIN
        return f2ll(fn(r))

    return g


strict("floor", 1)(_rounding(math.floor))
strict("ceil", 1)(_rounding(math.ceil))
strict("ceiling", 1)(_rounding(math.ceil))
strict("round", 1)(_rounding(round))  # rint: halves go to even, as round() does


def _cceil(x: float) -> float:
    return x if x != x or x in (math.inf, -math.inf) else float(math.ceil(x))


@strict("pow", 2)
def _pow(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and b >= 0:
        # Computed through doubles, rounded by adding 0.5, then converted as x86 does.
        return f2ll(c_pow(float(a), float(b)) + 0.5)
    x, y = c_real(a), c_real(b)
    if x is None or y is None:
        return ERROR
    return c_pow(x, y)


@strict("quantize", 2)
def _quantize(a: Any, q: Any) -> Any:
    # HTCondor's doMath2: a list picks its first element >= a (as it is, not converted), else
    # quantizes on its last element; a zero base answers a itself.
    rval = c_real(a)
    if rval is None:
        return ERROR
    base: Any = q
    if type(q) is ListValue:
        base = 0.0
        for e in q.values():
            rb = c_real(e)
            if rb is None:
                return ERROR
            if rb >= rval:
                return e
            base = e
        rbase = c_real(base)
    else:
        rbase = c_real(q)
        if rbase is None:
            return ERROR
    if type(base) is int:
        if base == 0:
            return a
        if type(a) is int:
            return wrap64(cquot(wrap64(a + base - 1), base) * base)
        return _cceil(rval / base) * base
    assert rbase is not None
    if -1e-8 <= rbase <= 1e-8:
        return a
    return _cceil(rval / rbase) * rbase


@strict("random", 0, 1)
def _random_fn(v: Any = None) -> Any:
    if v is None:
        return _random.random()
    if type(v) is int:
        return _random.randrange(v) if v > 0 else ERROR
    if type(v) is float:
        return _random.random() * v
    return ERROR
