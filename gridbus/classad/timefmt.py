"""Absolute and relative time: parsing the ClassAd string forms and printing them back."""

from __future__ import annotations

import calendar
import datetime as _dt
import re
import time

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
        return int(_dt.datetime.fromtimestamp(t).astimezone().utcoffset().total_seconds())  # type: ignore[union-attr]
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
    naive = calendar.timegm(fields + (0, 0, 0))  # type: ignore[arg-type]
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
    """Parse ``[-][D+][HH:][MM:]SS`` or ``1d2h3m4s``; None if malformed."""
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
