"""Time functions: the clocks (``time``, ``currentTime``, ``timeZoneOffset``, ``dayTime``),
``absTime`` and ``relTime``, the field getters (``getYear``... ``getSeconds``), ``interval``,
``formatTime`` and ``splitTime``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from gridbus.classad.cnumbers import c_int, cquot, crem, d2i32, f2ll, int32
from gridbus.classad.functions.registry import strict
from gridbus.classad.scope import EMPTY_SCOPE, AdValue, Ctx, Scope
from gridbus.classad.timefmt import c_strftime, day_numbers, local_offset
from gridbus.classad.values import ERROR, UNDEFINED, AbsTime, RelTime


@strict("absTime", 0, 2)
def _abstime(v: Any = None, offset: Any = None) -> Any:
    # HTCondor's convTime: the offset (a C int) is checked first, the seconds of an integer or real
    # are kept in a C int, an absolute time is returned unchanged.
    if v is None:
        now = int(time.time())
        return AbsTime(now, local_offset(now))
    off: int | None = None
    if offset is not None:
        to = type(offset)
        if to is int:
            off = int32(offset)
        elif to is float:
            off = d2i32(offset)
        elif to is RelTime:
            off = int32(f2ll(offset.secs))
        else:
            return ERROR
    t = type(v)
    if v is UNDEFINED:
        return UNDEFINED
    if t is int or t is float:
        secs = int32(v) if t is int else d2i32(v)
        if off is None:
            off = local_offset(secs)
        elif off == -1 and t is int:
            return ERROR  # HTCondor takes an offset of -1 for a failed time zone lookup
        return AbsTime(secs, off)
    if t is AbsTime:
        return v
    if t is RelTime:
        secs = f2ll(v.secs)
        return AbsTime(secs, local_offset(secs) if off is None else off)
    if t is str:
        return v  # a string not folded at parse time comes back as it is (HTCondor's fall-through)
    return ERROR


@strict("relTime", 1)
def _reltime(v: Any) -> Any:
    t = type(v)
    if t is int:
        return RelTime(float(int32(v)))
    if t is float:
        return RelTime(v)
    if t is AbsTime:
        return RelTime(float(v.secs))
    if t is RelTime:
        return v
    if t is str:
        return RelTime(0.0)  # a string not folded at parse time: HTCondor's fall-through gives 0
    return v if v is UNDEFINED else ERROR


# -- clocks ---------------------------------------------------------------------------------

@strict("time", 0)
def _time() -> Any:
    return int(time.time())


@strict("currentTime", 0)
def _current_time() -> Any:
    now = int(time.time())
    return AbsTime(now, local_offset(now))


@strict("timeZoneOffset", 0)
def _tz_offset() -> Any:
    return RelTime(float(local_offset()))


@strict("dayTime", 0)
def _day_time() -> Any:
    lt = time.localtime()
    return RelTime(float(lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec))


# -- fields ---------------------------------------------------------------------------------

def _localtime(secs: int) -> time.struct_time | None:
    """The local time of an absolute time's seconds (HTCondor uses the local time here, not the
    value's offset), None when the platform cannot convert them."""
    try:
        return time.localtime(secs)
    except (OverflowError, OSError, ValueError):
        return None


def _abs_field(fn: Callable) -> Callable:
    def g(v: Any) -> Any:
        if type(v) is not AbsTime:
            return ERROR
        p = _localtime(v.secs)
        return ERROR if p is None else fn(p)

    return g


strict("getYear", 1)(_abs_field(lambda p: p.tm_year))
strict("getMonth", 1)(_abs_field(lambda p: p.tm_mon))
strict("getDayOfYear", 1)(_abs_field(lambda p: p.tm_yday - 1))
strict("getDayOfMonth", 1)(_abs_field(lambda p: p.tm_mday))
strict("getDayOfWeek", 1)(_abs_field(lambda p: (p.tm_wday + 1) % 7))


def _hms_field(rel: Callable[[int], int], absolute: Callable | None) -> Callable:
    def g(v: Any) -> Any:
        if type(v) is RelTime:
            return rel(f2ll(v.secs))
        if type(v) is AbsTime and absolute is not None:
            p = _localtime(v.secs)
            return ERROR if p is None else absolute(p)
        return ERROR

    return g


strict("getDays", 1)(_hms_field(lambda r: cquot(r, 86400), None))
strict("getHours", 1)(_hms_field(lambda r: cquot(crem(r, 86400), 3600), lambda p: p.tm_hour))
strict("getMinutes", 1)(_hms_field(lambda r: cquot(crem(r, 3600), 60), lambda p: p.tm_min))
strict("getSeconds", 1)(_hms_field(lambda r: crem(r, 60), lambda p: p.tm_sec))


@strict("interval", 1)
def _interval(v: Any) -> Any:
    n = c_int(v)
    if n is None:
        return ERROR
    secs = int32(n)  # HTCondor keeps the seconds in a C int
    days = int(secs / 86400)  # C division and remainder truncate toward zero
    secs -= days * 86400
    h = int(secs / 3600)
    secs -= h * 3600
    m = int(secs / 60)
    secs -= m * 60
    if days:
        return f"{days}+{abs(h):02d}:{abs(m):02d}:{abs(secs):02d}"
    if h:
        return f"{h}:{abs(m):02d}:{abs(secs):02d}"
    if m:
        return f"{m}:{abs(secs):02d}"
    return f"{secs}"


# -- formatTime and splitTime -----------------------------------------------------------------

@strict("formatTime", 0, 2)
def _format_time(t: Any = None, fmt: Any = None) -> Any:
    if t is None:
        lt = time.localtime()
        fields = (lt.tm_sec, lt.tm_min, lt.tm_hour, lt.tm_mday, lt.tm_mon - 1, lt.tm_year - 1900,
                  (lt.tm_wday + 1) % 7, lt.tm_yday - 1)
        return c_strftime("%c", fields)
    if type(t) is RelTime:
        return ERROR
    split = _split_fields(t)
    if split is None:
        return ERROR

    def field(name: str) -> int | None:
        v = split.get(name)
        return v if type(v) is int else None  # EvaluateAttrInt fails on anything else

    # A missing field is 0 in the struct tm (so a missing year is 1900 and a missing month January).
    month, year = field("month"), field("year")
    tm_mon = 0 if month is None else month - 1
    tm_year = 0 if year is None else year - 1900
    day = field("day") or 0
    wday, yday = day_numbers(tm_year + 1900, tm_mon + 1, day)
    if fmt is None:
        fmt = "%c"
    elif type(fmt) is not str:
        return ERROR
    return c_strftime(fmt, (field("seconds") or 0, field("minutes") or 0, field("hours") or 0, day, tm_mon, tm_year,
                            wday, yday))


def _split_fields(v: Any) -> dict[str, Any] | None:
    """HTCondor's doSplitTime as a dict keyed by lower-case names, None when v is no time."""
    t = type(v)
    if t is int or t is float or t is AbsTime:
        if t is AbsTime:
            secs, off = v.secs, v.offset
        else:
            secs = v if t is int else d2i32(v)  # a real goes through a C int, an integer does not
            off = local_offset(secs)
        try:
            p = time.gmtime(secs + off)
        except (OverflowError, OSError, ValueError):
            return None
        # In the library's order (its hash table's), which is how string() of the result prints.
        return {"day": p.tm_mday, "type": "AbsoluteTime", "year": p.tm_year, "hours": p.tm_hour,
                "month": p.tm_mon, "offset": off, "minutes": p.tm_min, "seconds": p.tm_sec}
    if t is RelTime:
        r = v.secs
        neg = r < 0
        if neg:
            r = -r
        whole = d2i32(r)
        hrs = whole % 86400
        mins = hrs % 3600
        secs = (mins % 60) + (r - math.floor(r))
        days, hrs, mins = whole // 86400, hrs // 3600, mins // 60
        if neg:  # only the first nonzero field carries the sign
            if days > 0:
                days = -days
            elif hrs > 0:
                hrs = -hrs
            elif mins > 0:
                mins = -mins
            else:
                secs = -secs
        return {"days": days, "type": "RelativeTime", "hours": hrs, "minutes": mins, "seconds": float(secs)}
    if t is AdValue:
        out: dict[str, Any] = {}
        for k in ("year", "month", "day", "hours", "minutes", "seconds"):
            out[k] = v.lookup(k, k)
        return out
    return None


_SPLIT_NAMES = {"type": "Type", "year": "Year", "month": "Month", "day": "Day", "days": "Days", "hours": "Hours",
                "minutes": "Minutes", "seconds": "Seconds", "offset": "Offset"}


@strict("splitTime", 1)
def _split_time(v: Any) -> Any:
    if type(v) is AdValue:
        return ERROR
    if v is UNDEFINED:
        return UNDEFINED
    low = _split_fields(v)
    if low is None:
        return ERROR
    d = {_SPLIT_NAMES[k]: val for k, val in low.items()}
    return AdValue(Scope(low, True, None, d), Ctx(EMPTY_SCOPE, None))
