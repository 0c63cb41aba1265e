"""The operators' semantics on internal values (HTCondor's daemon semantics)."""

from __future__ import annotations

import math
from typing import Any

from gridbus.classad.cnumbers import cquot
from gridbus.classad.scope import AdValue, ListValue
from gridbus.classad.values import ERROR, UNDEFINED, AbsTime, RelTime, first_bad, wrap64


def _num(v: Any) -> Any:
    """The number an operand stands for in arithmetic (booleans count as 0/1), else None."""
    t = type(v)
    if t is int or t is float:
        return v
    if t is bool:
        return int(v)
    return None


def failure(a: Any, b: Any) -> Any:
    """What an operator answers for operands it does not take: error when either is error, else
    undefined when either is undefined, else error. Operators test their operands' types first
    and come here only when those fail, which keeps the common case short."""
    bad = first_bad(a, b)
    return ERROR if bad is None else bad


def arith(op: str, a: Any, b: Any) -> Any:
    x = _num(a)
    y = _num(b)
    if x is not None and y is not None:
        if type(x) is int and type(y) is int:
            if op == "+":
                return wrap64(x + y)
            if op == "-":
                return wrap64(x - y)
            if op == "*":
                return wrap64(x * y)
            if y == 0:
                return ERROR
            if op == "/":
                return wrap64(cquot(x, y))
            return wrap64(x - y * cquot(x, y))
        x = float(x)
        y = float(y)
        if op == "+":
            r = x + y
        elif op == "-":
            r = x - y
        elif op == "*":
            r = x * y
        elif op == "/":
            if y == 0.0 and (x == 0.0 or math.isnan(x)):
                return math.nan
            r = x / y if y != 0.0 else math.copysign(math.inf, x) * math.copysign(1.0, y)
        else:
            return ERROR  # % is for integers only
        # As the library answers: a real result of +inf is error (its isinf() test is true only for
        # +inf), while -inf and NaN are values.
        return ERROR if r == math.inf else r
    bad = first_bad(a, b)
    return _time_arith(op, a, b) if bad is None else bad


def _time_arith(op: str, a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is AbsTime:
        if tb is AbsTime and op == "-":
            return RelTime(float(a.secs - b.secs))
        if tb is RelTime and op in "+-":
            d = int(b.secs)
            return AbsTime(a.secs + d if op == "+" else a.secs - d, a.offset)
        return ERROR
    if ta is RelTime:
        if tb is RelTime and op in "+-":
            return RelTime(a.secs + b.secs if op == "+" else a.secs - b.secs)
        if tb is AbsTime and op == "+":
            return AbsTime(a.secs + b.secs, b.offset)
        n = None if tb is bool else _num(b)  # a time scales by a number, never by a boolean
        if n is not None and op == "*":
            return RelTime(a.secs * n)
        if n is not None and op == "/":
            return RelTime(_double_divide(a.secs, n))
        return ERROR
    if tb is RelTime and op == "*":
        n = None if ta is bool else _num(a)
        if n is not None:
            return RelTime(n * b.secs)
    return ERROR


def _double_divide(x: float, y: float) -> float:
    """C's double division: by zero it is inf, -inf or nan (a relative time divides so), not error."""
    if y:
        return x / y
    if not x or math.isnan(x):
        return math.nan
    return math.copysign(math.inf, x) * math.copysign(1.0, y)


def compare(op: str, a: Any, b: Any) -> Any:
    """`< <= > >= == !=`: strict; strings compare without regard to case."""
    x = _num(a)
    y = _num(b)
    if x is None or y is None:
        ta, tb = type(a), type(b)
        if ta is str and tb is str:
            x = a.lower()
            y = b.lower()
        elif (ta is AbsTime and tb is AbsTime) or (ta is RelTime and tb is RelTime):
            x = a.secs
            y = b.secs
        else:
            return failure(a, b)
    elif type(x) is not type(y):
        # An integer against a real compares as reals, as HTCondor converts it (9223372036854775807
        # equals 9.223372036854776e18), where Python would compare the exact values.
        x = float(x)
        y = float(y)
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    return x >= y


def identical(a: Any, b: Any) -> Any:
    """`=?=`: same type and value, case-sensitive; never undefined."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is ListValue and (a.nodes is None or b.nodes is None):
        return False  # a list made by a function is never identical to another list
    if ta is ListValue or ta is AdValue:
        return ERROR
    if ta is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    if ta is AbsTime or ta is RelTime:
        return a.secs == b.secs
    return a is b or a == b


def bitwise(op: str, a: Any, b: Any) -> Any:
    if type(a) is not int or type(b) is not int:
        return failure(a, b)
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    n = b & 63  # the shift count is taken modulo 64, as the hardware does
    if op == "<<":
        return wrap64(a << n)
    if op == ">>":
        if a < 0 and not 0 <= b < 64:
            # HTCondor sign-extends a negative value itself: a count of 64 or more gives -1 and
            # a negative count leaves the value as it is (as classad2 answers).
            return -1 if b >= 64 else a
        return a >> n
    if a >= 0:
        return a >> n
    # HTCondor computes >>> as (a >> n) & ~(-1 << (64 - n)) in 64 bits, so a shift by 0 gives 0.
    mask = ~wrap64(-1 << ((64 - b) & 63))
    return (a >> n) & mask


def unary(op: str, a: Any) -> Any:
    if a is ERROR:
        return ERROR
    if a is UNDEFINED:
        return UNDEFINED
    t = type(a)
    if op == "-":
        if t is int:
            return wrap64(-a)
        if t is float:
            return -a
        if t is RelTime:
            return RelTime(-a.secs)
        return ERROR
    if op == "+":
        if t is int or t is float or t is RelTime:
            return a
        return ERROR
    if op == "!":
        if t is bool:
            return not a
        if t is int or t is float:
            return a == 0
        return ERROR
    # ~
    if t is int:
        return ~a
    return ERROR


def truth(v: Any) -> Any:
    """A value as a logical operand: True/False, or UNDEFINED/ERROR."""
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    if v is UNDEFINED:
        return UNDEFINED
    return ERROR
