"""Type tests (``isString``...) and conversions between types (``int``, ``real``, ``string``,
``bool``), with ``to_string``, the string form every string function converts its arguments to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridbus.classad.cnumbers import c_int, c_real, f2ll
from gridbus.classad.functions.registry import EVALUATOR, strict
from gridbus.classad.operators import truth
from gridbus.classad.scope import AdValue, ListValue
from gridbus.classad.unparse import COMPACT, format_real, format_scalar, unparse
from gridbus.classad.values import ERROR, UNDEFINED, AbsTime, RelTime


def to_string(v: Any) -> Any:
    """A value converted to a string as HTCondor's convertValueToStringValue does."""
    t = type(v)
    if t is str:
        return v
    if t is int:
        return str(v)
    if t is float:
        return format_real(v, COMPACT)
    if t is bool:
        return "true" if v else "false"
    if v is UNDEFINED or v is ERROR:
        return v
    if t is AbsTime or t is RelTime:
        text = format_scalar(v)
        return text[text.index('"') + 1 : -2]  # the text inside absTime("...") / relTime("...")
    if t is ListValue or t is AdValue:
        return unparse(EVALUATOR.value_node(v), COMPACT)
    return ERROR


# -- type tests (never undefined or error themselves) ---------------------------------------

strict("isUndefined", 1)(lambda v: v is UNDEFINED)
strict("isError", 1)(lambda v: v is ERROR)
strict("isString", 1)(lambda v: type(v) is str)
strict("isInteger", 1)(lambda v: type(v) is int)
strict("isReal", 1)(lambda v: type(v) is float)
strict("isList", 1)(lambda v: type(v) is ListValue)
strict("isClassAd", 1)(lambda v: type(v) is AdValue)
strict("isBoolean", 1)(lambda v: type(v) is bool)
strict("isAbsTime", 1)(lambda v: type(v) is AbsTime)
strict("isRelTime", 1)(lambda v: type(v) is RelTime)


# -- conversions ----------------------------------------------------------------------------


def _number(convert: Callable[[Any], Any]) -> Callable:
    # int() and real(): undefined stays undefined, a value with no number in it is an error.
    def fn(v: Any) -> Any:
        if v is UNDEFINED:
            return UNDEFINED
        r = convert(v)
        return ERROR if r is None else r

    return fn


strict("int", 1)(_number(c_int))
strict("real", 1)(_number(c_real))
strict("string", 1)(to_string)


@strict("bool", 1)
def _bool(v: Any) -> Any:
    t = type(v)
    if t is str:
        low = v.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        return UNDEFINED
    if t is RelTime:
        return f2ll(v.secs) != 0  # through time_t: whole seconds
    return truth(v)  # booleans and numbers as a logical operand; undefined stays, the rest errors


def string_pair(a: Any, b: Any) -> Any:
    """Both values as strings, as a tuple; else what a two-string function answers: undefined
    when either is undefined (HTCondor tests for it before converting), otherwise error."""
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    x, y = to_string(a), to_string(b)
    if type(x) is not str or type(y) is not str:
        return ERROR
    return x, y
