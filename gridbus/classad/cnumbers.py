"""C's number semantics where HTCondor's C++ shows through: strtod, the x86 conversions of a
double to an integer, C ints, C's division and remainder, and pow().

HTCondor converts values with these (``convertValueToRealValue`` and friends), so the functions
and operators answer what classad2 answers on the edges (NaN, overflow, negative operands).
"""

from __future__ import annotations

import math
import re
from typing import Any

from gridbus.classad.values import INT_MIN, AbsTime, RelTime

__all__ = ["INT_MIN", "c_int", "c_pow", "c_real", "cquot", "crem", "d2i32", "f2ll", "int32", "strtod"]

INT32_MIN = -(1 << 31)

_DEC_PREFIX = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_HEX_PREFIX = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?)")
_SPECIAL_PREFIX = re.compile(r"([+-]?)(inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)", re.I)


def strtod(text: str) -> float | None:
    """C's strtod on the longest numeric prefix (decimal, hexadecimal, inf, nan); None when no
    prefix converts. HTCondor's string-to-number conversions use it."""
    t = text.lstrip(" \t\n\r\f\v")
    m = _HEX_PREFIX.match(t)
    if m:
        body = m.group(2)
        if "p" not in body.lower():
            body += "p0"
        try:
            v = float.fromhex("0x" + body)
        except (ValueError, OverflowError):
            v = math.inf
        return -v if m.group(1) == "-" else v
    m = _SPECIAL_PREFIX.match(t)
    if m:
        v = math.inf if m.group(2)[0] in "iI" else math.nan
        return -v if m.group(1) == "-" else v
    m = _DEC_PREFIX.match(t)
    if not m:
        return None
    return float(m.group())


def f2ll(x: float) -> int:
    """A double converted to long long as x86 does: NaN and out-of-range values become INT_MIN."""
    if x != x or not -9.223372036854775808e18 <= x < 9.223372036854775808e18:
        return INT_MIN
    return int(x)


def d2i32(x: float) -> int:
    """A double converted to a C int as x86 does: NaN and out-of-range values become INT_MIN."""
    if x != x or not -2147483648.0 <= x < 2147483648.0:
        return INT32_MIN
    return int(x)


def int32(n: int) -> int:
    """A long long narrowed to a C int, as HTCondor's IsIntegerValue(int&) does."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def cquot(a: int, b: int) -> int:
    """C's integer / (the quotient truncates toward zero); b must not be 0."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def crem(a: int, b: int) -> int:
    """C's % (the sign follows the dividend); b must not be 0."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def c_pow(x: float, y: float) -> float:
    """C's pow(): infinities and NaN where Python raises."""
    if x == 0.0 and y < 0:  # 0 to a negative power
        odd = y.is_integer() and abs(y) < 2**53 and int(y) % 2 == 1
        return math.copysign(math.inf, x) if odd else math.inf
    try:
        return math.pow(x, y)
    except OverflowError:
        odd = y.is_integer() and abs(y) < 2**53 and int(y) % 2 == 1
        return -math.inf if x < 0 and odd else math.inf
    except ValueError:  # a negative base to a fractional power
        return math.nan


def c_real(v: Any) -> float | None:
    """HTCondor's convertValueToRealValue: the number a value stands for, None if it has none."""
    t = type(v)
    if t is float:
        return v
    if t is int or t is bool:
        return float(v)
    if t is str:
        return strtod(v)
    if t is AbsTime:
        return float(v.secs)
    if t is RelTime:
        return float(f2ll(v.secs))  # a relative time converts through time_t: whole seconds
    return None


def c_int(v: Any) -> int | None:
    """HTCondor's convertValueToIntegerValue: strings go through strtod, reals are truncated."""
    t = type(v)
    if t is int:
        return v
    if t is bool:
        return int(v)
    if t is float:
        return f2ll(v)
    if t is str:
        r = strtod(v)
        return None if r is None else f2ll(r)
    if t is AbsTime:
        return v.secs
    if t is RelTime:
        return f2ll(v.secs)
    return None
