"""Absolute and relative time: parsing the ClassAd string forms and printing them back."""

from __future__ import annotations

import calendar
import ctypes
import ctypes.util
import datetime as _dt
import re
import time
from typing import Any

from gridbus.classad.values import AbsTime, RelTime

_ABS_RE = re.compile(
    r"^\s*(\d{4})-?(\d{2})-?(\d{2})"
    r"(?:[T ]:?(\d{2}):?(\d{2})(?::?(\d{2}))?)?"
    r"\s*(Z|[+-]\d{2}(?::?\d{2})?)?\s*$"
)
_REL_HMS_RE = re.compile(r"^\s*([+-])?(?:(\d+)\+)?(?:(?:(\d+):)?(\d+):)?(\d+(?:\.\d*)?)\s*$")
_REL_UNITS_RE = re.compile(r"^\s*([+-])?\s*(?:(\d+)[dD])?\s*(?:(\d+)[hH])?\s*(?:(\d+)[mM])?\s*(?:(\d+(?:\.\d*)?)[sS])?\s*$")


def local_offset(secs: float | None = None) -> int:
    """The local time zone's UTC offset in seconds at ``secs`` (now when None)."""
    t = time.time() if secs is None else secs
    try:
        offset = _dt.datetime.fromtimestamp(t).astimezone().utcoffset()  # never None for an aware time
        return int(offset.total_seconds()) if offset is not None else 0
    except (OverflowError, OSError, ValueError):
        return 0


def parse_abstime(text: str) -> AbsTime | None:
    """Parse an ISO 8601 absolute time as absTime("...") accepts it; None if malformed."""
    m = _ABS_RE.match(text)
    if not m:
        return None
    y, mo, d, hh, mi, ss, tz = m.groups()
    try:
        fields = (int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0))
        _dt.datetime(*fields)
    except ValueError:
        return None
    naive = calendar.timegm(fields + (0, 0, 0))
    if tz is None:
        offset = local_offset(naive)
    elif tz == "Z":
        offset = 0
    else:
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60)
    return AbsTime(naive - offset, offset)


def parse_reltime(text: str) -> RelTime | None:
    """Parse ``[-][D+][HH:][MM:]SS`` or ``1d2h3m4s``; None if malformed. An empty text is
    zero seconds, as HTCondor's lexer reads it."""
    if not text.strip():
        return RelTime(0.0)
    m = _REL_HMS_RE.match(text)
    if m:
        sign, d, h, mi, s = m.groups()
    else:
        m = _REL_UNITS_RE.match(text)
        if not m or not any(m.groups()[1:]):
            return None
        sign, d, h, mi, s = m.groups()
    secs = int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)
    return RelTime(-secs if sign == "-" else secs)


def format_abstime(at: AbsTime) -> str:
    """The text inside absTime("..."): local time at the value's offset, then the offset."""
    off = at.offset
    stamp = _dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=at.secs + off)
    sign = "-" if off <= 0 else "+"
    a = abs(off)
    return f"{stamp:%Y-%m-%dT%H:%M:%S}{sign}{a // 3600:02d}:{(a % 3600) // 60:02d}"


def format_reltime(secs: float) -> str:
    """The text inside relTime("..."): ``[-][D+]HH:MM:SS`` with leading zero fields left out."""
    neg = secs < 0
    total = int(abs(secs))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        body = f"{days}+{hours:02d}:{minutes:02d}:{seconds:02d}"
    elif hours:
        body = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    elif minutes:
        body = f"{minutes:02d}:{seconds:02d}"
    else:
        body = f"{seconds:02d}"
    return ("-" if neg else "") + body


def _fixed_from_gregorian(year: int, month: int, day: int) -> int:
    """Days since the start of the Gregorian calendar (HTCondor's classad util.cpp)."""

    def cdiv(a: int, b: int) -> int:  # C division truncates toward zero
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    if month <= 2:
        adjust = 0
    elif (year % 4 == 0 and year % 100 != 0) or year % 400 == 0:
        adjust = -1
    else:
        adjust = -2
    y = year - 1
    return 365 * y + cdiv(y, 4) - cdiv(y, 100) + cdiv(y, 400) + cdiv(367 * month - 362, 12) + adjust + day


def day_numbers(year: int, month: int, day: int) -> tuple[int, int]:
    """(weekday with Sunday 0, day of the year from 0) as formatTime computes them itself."""
    fixed = _fixed_from_gregorian(year, month, day)
    weekday = abs(fixed) % 7 * (1 if fixed >= 0 else -1)  # C's remainder keeps the sign
    return weekday, fixed - _fixed_from_gregorian(year, 1, 1)


class _Tm(ctypes.Structure):
    _fields_ = [("tm_sec", ctypes.c_int), ("tm_min", ctypes.c_int), ("tm_hour", ctypes.c_int),
                ("tm_mday", ctypes.c_int), ("tm_mon", ctypes.c_int), ("tm_year", ctypes.c_int),
                ("tm_wday", ctypes.c_int), ("tm_yday", ctypes.c_int), ("tm_isdst", ctypes.c_int),
                ("tm_gmtoff", ctypes.c_long), ("tm_zone", ctypes.c_char_p)]


_LIBC: Any = None


def c_strftime(fmt: str, fields: tuple[int, int, int, int, int, int, int, int]) -> str:
    """The C library's strftime on a zeroed struct tm, as HTCondor's formatTime calls it.

    ``fields`` is (sec, min, hour, mday, mon from 0, year - 1900, wday, yday). Python's own
    time.strftime checks and adjusts out-of-range fields (HTCondor prints "?" for a bad month),
    so the C function is called directly; the result is cut at 1023 bytes as HTCondor's buffer is.
    """
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _LIBC.strftime.restype = ctypes.c_size_t
        _LIBC.strftime.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(_Tm)]
    tm = _Tm(*[_c_int(f) for f in fields], 0, 0, None)
    buf = ctypes.create_string_buffer(1024)
    n = _LIBC.strftime(buf, 1023, fmt.encode("utf-8", "surrogateescape"), ctypes.byref(tm))
    return buf.raw[:n].decode("utf-8", "replace")


def _c_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n
