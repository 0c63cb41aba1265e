"""ClassAd values as the evaluator holds them, and their conversion to and from Python.

Internally a value is one of: ``Value.Undefined``, ``Value.Error``, ``bool``, ``int``, ``float``,
``str``, :class:`ListValue`, :class:`AdValue`, :class:`AbsTime`, :class:`RelTime`. Plain Python
scalars are used as-is so the hot path allocates nothing; ``bool`` must always be told apart from
``int`` with ``type(v) is bool`` because Python makes bool a subclass of int.
"""

from __future__ import annotations

import datetime as _dt
import enum
from typing import Any, TypeGuard


class Value(enum.IntEnum):
    """classad2's special values: an IntEnum, ``Error == 1`` and ``Undefined == 2``, as in classad2.

    Being an int subclass, a member passes ``isinstance(v, int)``: code that wants a number from
    an ad or an evaluation asks :func:`is_number` instead. The wire codec sends members as typed
    values, never as the integers they equal (gridbus.wire).
    """

    Error = 1 << 0
    Undefined = 1 << 1


UNDEFINED = Value.Undefined
ERROR = Value.Error

# A marker for "attribute not present", distinct from an attribute whose value is undefined.
MISSING: Any = object()

INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1
_MASK64 = (1 << 64) - 1


def is_number(v: Any) -> TypeGuard[int | float]:
    """Whether ``v`` is a ClassAd number: an int or float, but neither a bool nor a Value member
    (both of which Python counts as ints)."""
    t = type(v)
    if t is int or t is float:  # the common case, without the isinstance walks
        return True
    return isinstance(v, (int, float)) and not isinstance(v, (bool, Value))


def wrap64(n: int) -> int:
    """Two's-complement wrap to a signed 64-bit integer, as C's long long arithmetic does."""
    if INT_MIN <= n <= INT_MAX:
        return n
    n &= _MASK64
    return n - (1 << 64) if n > INT_MAX else n


def first_bad(*vals: Any) -> Any:
    """ERROR if any value is error, else UNDEFINED if any is undefined, else None: what an
    operation or a strict function answers before it looks at its operands' types."""
    for v in vals:
        if v is ERROR:
            return ERROR
    for v in vals:
        if v is UNDEFINED:
            return UNDEFINED
    return None


class AbsTime:
    """An absolute time: seconds since the epoch plus the UTC offset it was written with."""

    __slots__ = ("secs", "offset")

    def __init__(self, secs: int, offset: int = 0):
        self.secs = secs
        self.offset = offset

    def to_datetime(self) -> _dt.datetime:
        # classad2 hands absolute times back as aware datetimes in UTC.
        return _dt.datetime.fromtimestamp(self.secs, _dt.UTC)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbsTime) and other.secs == self.secs

    def __hash__(self) -> int:
        return hash(self.secs)

    def __repr__(self) -> str:
        return f"AbsTime({self.secs}, {self.offset})"


class RelTime:
    """A relative time (a duration) in seconds."""

    __slots__ = ("secs",)

    def __init__(self, secs: float):
        self.secs = secs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RelTime) and other.secs == self.secs

    def __hash__(self) -> int:
        return hash(self.secs)

    def __repr__(self) -> str:
        return f"RelTime({self.secs})"


def datetime_secs(d: _dt.datetime) -> int:
    """The epoch seconds of a datetime, the AbsTime it stands for."""
    if d.tzinfo is None or d.utcoffset() is None:
        return int(d.timestamp())  # a naive datetime is local time, as in classad2
    return int((d - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)).total_seconds() // 1)
