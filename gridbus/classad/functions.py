"""The built-in functions: the ClassAd library's core set and HTCondor's extensions.

Strict functions receive evaluated arguments; lazy ones (``ifThenElse``, ``eval``, the
``is*`` tests that must not turn an error into a failure, ``unparse``...) receive the compiled
arguments with the scope. An unknown function or a wrong number of arguments evaluates to error,
as in HTCondor.
"""

from __future__ import annotations

import math
import random as _random
import re
import time
from collections.abc import Callable
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.operators import compare, identical
from gridbus.classad.scope import AdValue, ListValue, Scope
from gridbus.classad.timefmt import format_reltime, local_offset, parse_abstime, parse_reltime
from gridbus.classad.unparse import COMPACT, format_real, unparse
from gridbus.classad.values import ERROR, UNDEFINED, AbsTime, RelTime, type_name, wrap64

STRICT: dict[str, tuple[Callable[..., Any], int, int]] = {}
LAZY: dict[str, tuple[Callable[..., Any], int, int]] = {}


def strict(name: str, lo: int, hi: int = -1) -> Callable:
    def deco(fn: Callable) -> Callable:
        STRICT[name.lower()] = (fn, lo, hi if hi >= 0 else lo)
        return fn

    return deco


def lazy(name: str, lo: int, hi: int = -1) -> Callable:
    def deco(fn: Callable) -> Callable:
        LAZY[name.lower()] = (fn, lo, hi if hi >= 0 else lo)
        return fn

    return deco


VARIADIC = 1 << 30


def compile_call(node: N.Call, compile_node: Callable) -> Callable:
    argfns = [compile_node(a) for a in node.args]
    n = len(argfns)
    spec = LAZY.get(node.lname)
    if spec is not None:
        fn, lo, hi = spec
        if not lo <= n <= hi:
            return _const_error
        nodes = node.args

        def lazy_call(scope: Scope, ctx: Any) -> Any:
            return fn(argfns, scope, ctx, nodes)

        return lazy_call
    spec = STRICT.get(node.lname)
    if spec is None or not spec[1] <= n <= spec[2]:
        return _const_error
    fn = spec[0]
    if n == 0:
        return lambda scope, ctx: fn()
    if n == 1:
        a0 = argfns[0]
        return lambda scope, ctx: fn(a0(scope, ctx))
    if n == 2:
        a0, a1 = argfns
        return lambda scope, ctx: fn(a0(scope, ctx), a1(scope, ctx))
    return lambda scope, ctx: fn(*[a(scope, ctx) for a in argfns])


def _const_error(scope: Scope, ctx: Any) -> Any:
    return ERROR


def _bad(*vals: Any) -> Any:
    """ERROR if any value is error, else UNDEFINED if any is undefined, else None."""
    for v in vals:
        if v is ERROR:
            return ERROR
    for v in vals:
        if v is UNDEFINED:
            return UNDEFINED
    return None


def _isnum(v: Any) -> bool:
    t = type(v)
    return t is int or t is float


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
        from gridbus.classad.unparse import format_scalar

        text = format_scalar(v)
        return text[text.index('"') + 1 : -2]
    if t is ListValue or t is AdValue:
        from gridbus.classad.exprtree import value_to_node

        return unparse(value_to_node(v), COMPACT)
    return ERROR


# -- type tests (never undefined or error themselves) ---------------------------------------

def _type_test(pred: Callable[[Any], bool]) -> Callable:
    return lambda v: pred(v)


strict("isUndefined", 1)(_type_test(lambda v: v is UNDEFINED))
strict("isError", 1)(_type_test(lambda v: v is ERROR))
strict("isString", 1)(_type_test(lambda v: type(v) is str))
strict("isInteger", 1)(_type_test(lambda v: type(v) is int))
strict("isReal", 1)(_type_test(lambda v: type(v) is float))
strict("isList", 1)(_type_test(lambda v: type(v) is ListValue))
strict("isClassAd", 1)(_type_test(lambda v: type(v) is AdValue))
strict("isBoolean", 1)(_type_test(lambda v: type(v) is bool))
strict("isAbsTime", 1)(_type_test(lambda v: type(v) is AbsTime))
strict("isRelTime", 1)(_type_test(lambda v: type(v) is RelTime))


# -- control ------------------------------------------------------------------------------------

@lazy("ifThenElse", 3)
def _if_then_else(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    c = args[0](scope, ctx)
    t = type(c)
    if t is bool:
        return args[1](scope, ctx) if c else args[2](scope, ctx)
    if t is int or t is float:
        return args[1](scope, ctx) if c != 0 else args[2](scope, ctx)
    if c is UNDEFINED:
        return UNDEFINED
    return ERROR


@lazy("eval", 1)
def _eval(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    from gridbus.classad.errors import ClassAdParseError
    from gridbus.classad.exprtree import fn_for, parse_cached

    s = to_string(args[0](scope, ctx))
    if type(s) is not str:
        return s
    try:
        node = parse_cached(s)
    except ClassAdParseError:
        return ERROR
    return fn_for(node)(scope, ctx)


@lazy("unparse", 1)
def _unparse(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    node = nodes[0]
    if type(node) is N.AttrRef:
        raw = _lookup_raw(node, scope, ctx)
        if raw is None:
            return unparse(node, COMPACT)
        from gridbus.classad.exprtree import python_to_node

        return unparse(python_to_node(raw), COMPACT)
    return unparse(node, COMPACT)


def _lookup_raw(node: N.AttrRef, scope: Scope, ctx: Any) -> Any:
    from gridbus.classad.values import MISSING

    scopes: list[Scope | None]
    if node.scope == "target":
        scopes = [ctx.target]
    elif node.scope == "my":
        scopes = [scope]
    else:
        scopes = []
        s: Scope | None = scope
        while s is not None:
            scopes.append(s)
            s = s.parent
        scopes.append(ctx.target)
    for s in scopes:
        if s is None:
            continue
        raw = s.get(node.name, node.lname)
        if raw is not MISSING:
            return raw
    return None


@strict("debug", 1)
def _debug(v: Any) -> Any:
    return v


# -- lists ----------------------------------------------------------------------------------

def _list_vals(v: Any) -> Any:
    return v.values() if type(v) is ListValue else None


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


@strict("member", 2)
def _member(x: Any, lst: Any) -> Any:
    return _member_impl(x, lst, False)


@strict("identicalMember", 2)
def _identical_member(x: Any, lst: Any) -> Any:
    return _member_impl(x, lst, True)


def _member_impl(x: Any, lst: Any, ident: bool) -> Any:
    if type(lst) is not ListValue:
        return UNDEFINED if lst is UNDEFINED else ERROR
    if type(x) in (ListValue, AdValue):
        return ERROR
    if not ident:
        if x is UNDEFINED:
            return UNDEFINED
        if x is ERROR or type(x) in (ListValue, AdValue):
            return ERROR
    for e in lst.values():
        if ident:
            r = identical(x, e)
        else:
            if type(e) in (ListValue, AdValue):
                return ERROR
            r = compare("==", x, e)
        if r is True:
            return True
    return False


def _numbers(v: Any) -> Any:
    if type(v) is not ListValue:
        return UNDEFINED if v is UNDEFINED else ERROR
    vals = [e for e in v.values() if e is not UNDEFINED]  # undefined elements are skipped
    for e in vals:
        if not (_isnum(e) or type(e) is bool):
            return ERROR
    return [int(e) if type(e) is bool else e for e in vals]


@strict("sum", 1)
def _sum(v: Any) -> Any:
    nums = _numbers(v)
    if type(nums) is not list:
        return nums
    if any(type(e) is float for e in nums):
        return float(math.fsum(nums)) if False else sum(float(e) for e in nums)
    return wrap64(sum(nums))


@strict("avg", 1)
def _avg(v: Any) -> Any:
    nums = _numbers(v)
    if type(nums) is not list:
        return nums
    if not nums:
        return 0
    return sum(float(e) for e in nums) / len(nums)


def _extreme(v: Any, pick_max: bool) -> Any:
    nums = _numbers(v)
    if type(nums) is not list:
        return nums
    if not nums:
        return UNDEFINED
    best = nums[0]
    real = type(best) is float
    for e in nums[1:]:
        real = real or type(e) is float
        if (e > best) if pick_max else (e < best):
            best = e
    return float(best) if real else best


strict("min", 1)(lambda v: _extreme(v, False))
strict("max", 1)(lambda v: _extreme(v, True))


def _anyall(want_any: bool) -> Callable:
    def fn(op: Any, lst: Any, x: Any) -> Any:
        if type(op) is not str or type(lst) is not ListValue:
            return ERROR
        o = op.strip().lower()
        ops = {"<": "<", "<=": "<=", "==": "==", "!=": "!=", ">=": ">=", ">": ">", "=?=": "is", "is": "is",
               "=!=": "isnt", "isnt": "isnt"}
        if o not in ops:
            return ERROR
        o = ops[o]
        for e in lst.values():
            if o == "is":
                r = identical(e, x)
            elif o == "isnt":
                r = identical(e, x)
                r = r if r is ERROR else not r
            else:
                r = compare(o, e, x)
            if want_any and r is True:
                return True
            if not want_any and r is not True:
                return False
        return not want_any

    return fn


strict("anyCompare", 3)(_anyall(True))
strict("allCompare", 3)(_anyall(False))


# -- strings --------------------------------------------------------------------------------

@strict("strcat", 0, VARIADIC)
def _strcat(*vals: Any) -> Any:
    out = []
    for v in vals:
        s = to_string(v)
        if type(s) is not str:
            return s
        out.append(s)
    return "".join(out)


@strict("join", 1, VARIADIC)
def _join(*vals: Any) -> Any:
    if len(vals) == 1:
        sep: Any = ""
        items = vals[0]
        if type(items) is not ListValue:
            return UNDEFINED if items is UNDEFINED else ERROR
        items = items.values()
    else:
        sep = to_string(vals[0])
        if type(sep) is not str:
            return sep
        if len(vals) == 2 and type(vals[1]) is ListValue:
            items = vals[1].values()
        else:
            items = list(vals[1:])
    out = []
    for v in items:
        if v is UNDEFINED:
            continue
        s = to_string(v)
        if type(s) is not str:
            return ERROR
        out.append(s)
    return sep.join(out)


def _case(upper: bool) -> Callable:
    def fn(v: Any) -> Any:
        s = to_string(v)
        if type(s) is not str:
            return s
        return s.upper() if upper else s.lower()

    return fn


strict("toUpper", 1)(_case(True))
strict("toLower", 1)(_case(False))


@strict("substr", 2, 3)
def _substr(s: Any, offset: Any, length: Any = None) -> Any:
    bad = _bad(s, offset, length)
    if bad is not None:
        return bad
    if type(s) is not str or type(offset) is not int or (length is not None and type(length) is not int):
        return ERROR
    n = len(s)
    start = offset if offset >= 0 else max(0, n + offset)
    if start > n:
        return ""
    if length is None:
        return s[start:]
    end = start + length if length >= 0 else n + length
    if end <= start:
        return ""
    return s[start:end]


def _cmp(fold: bool) -> Callable:
    def fn(a: Any, b: Any) -> Any:
        if a is UNDEFINED or b is UNDEFINED:
            return UNDEFINED
        x = to_string(a)
        y = to_string(b)
        if type(x) is not str or type(y) is not str:
            return ERROR
        if fold:
            x, y = x.lower(), y.lower()
        bx, by = x.encode(), y.encode()
        return -1 if bx < by else (1 if bx > by else 0)

    return fn


strict("strcmp", 2)(_cmp(False))
strict("stricmp", 2)(_cmp(True))


# -- conversions --------------------------------------------------------------------------

_NUM_PREFIX = re.compile(r"\s*[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


@strict("int", 1)
def _int(v: Any) -> Any:
    t = type(v)
    if t is int:
        return v
    if t is bool:
        return int(v)
    if t is float:
        if math.isnan(v) or math.isinf(v):
            return ERROR
        return wrap64(int(v))
    if t is str:
        r = _real(v)
        if type(r) is not float or math.isnan(r) or math.isinf(r):
            return ERROR
        return wrap64(int(r))
    if t is AbsTime:
        return v.secs
    if t is RelTime:
        return int(v.secs)
    return v if v is UNDEFINED else ERROR


@strict("real", 1)
def _real(v: Any) -> Any:
    t = type(v)
    if t is float:
        return v
    if t is int or t is bool:
        return float(v)
    if t is str:
        m = _NUM_PREFIX.match(v)  # strtod: a numeric prefix is enough
        if not m:
            return ERROR
        try:
            return float(m.group())
        except ValueError:
            return ERROR
    if t is AbsTime:
        return float(v.secs)
    if t is RelTime:
        return float(v.secs)
    return v if v is UNDEFINED else ERROR


@strict("string", 1)
def _string(v: Any) -> Any:
    return to_string(v)


@strict("bool", 1)
def _bool(v: Any) -> Any:
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    if t is str:
        low = v.strip().lower()
        if low == "true":
            return True
        if low == "false":
            return False
        return UNDEFINED
    return v if v is UNDEFINED else ERROR


@strict("absTime", 0, 2)
def _abstime(v: Any = None, offset: Any = None) -> Any:
    if v is None:
        now = int(time.time())
        return AbsTime(now, local_offset(now))
    bad = _bad(v, offset)
    if bad is not None:
        return bad
    t = type(v)
    if t is str:
        at = parse_abstime(v)
        return ERROR if at is None else at
    if t is int or t is float:
        secs = int(v)
        off = local_offset(secs) if offset is None else offset
        if type(off) is not int:
            return ERROR
        return AbsTime(secs, off)
    if t is AbsTime:
        return v
    return ERROR


@strict("relTime", 0, 1)
def _reltime(v: Any = None) -> Any:
    if v is None:
        return RelTime(0.0)
    t = type(v)
    if t is str:
        rt = parse_reltime(v)
        return ERROR if rt is None else rt
    if t is int or t is float:
        return RelTime(float(v))
    if t is RelTime:
        return v
    return v if v is UNDEFINED else ERROR


# -- maths ----------------------------------------------------------------------------------

def _rounding(fn: Callable[[float], float]) -> Callable:
    def g(v: Any) -> Any:
        t = type(v)
        if t is int:
            return v
        if t is bool:
            return int(v)
        if t is str:
            v = _real(v)
            if type(v) is not float:
                return ERROR
            t = float
        if t is float:
            if math.isnan(v) or math.isinf(v):
                return v
            r = fn(v)
            return int(r) if -(2**63) <= r < 2**63 else -(2**63)  # x86's cvttsd2si overflow
        return ERROR  # undefined too: HTCondor's rounding functions are not lenient

    return g


strict("floor", 1)(_rounding(math.floor))
strict("ceil", 1)(_rounding(math.ceil))
strict("ceiling", 1)(_rounding(math.ceil))
strict("round", 1)(_rounding(round))


@strict("pow", 2)
def _pow(a: Any, b: Any) -> Any:
    bad = _bad(a, b)
    if bad is not None:
        return bad
    if not (_isnum(a) or type(a) is bool) or not (_isnum(b) or type(b) is bool):
        return ERROR
    if type(a) in (int, bool) and type(b) in (int, bool) and b >= 0:
        r = int(a) ** int(b) if b < 4096 else 2**64
        # Computed through a double in HTCondor: out of range becomes the x86 "indefinite" INT_MIN.
        return r if -(2**63) <= r < 2**63 else -(2**63)
    try:
        return float(a) ** float(b)
    except (OverflowError, ZeroDivisionError):
        return ERROR


@strict("log", 1, 2)
def _log(a: Any, base: Any = None) -> Any:
    bad = _bad(a, base)
    if bad is not None:
        return bad
    if not _isnum(a) or (base is not None and not _isnum(base)):
        return ERROR
    try:
        return math.log(a) if base is None else math.log(a, base)
    except (ValueError, ZeroDivisionError):
        return ERROR


@strict("quantize", 2)
def _quantize(a: Any, q: Any) -> Any:
    bad = _bad(a, q)
    if bad is not None:
        return bad
    if not _isnum(a):
        return ERROR
    if _isnum(q):
        if q == 0:
            return ERROR
        if type(a) is int and type(q) is int:
            return -(-a // q) * q if a % q else a
        return float(math.ceil(a / q) * q)
    if type(q) is ListValue:
        last: Any = ERROR
        for e in q.values():
            if not _isnum(e):
                return ERROR
            if e >= a:
                return e
            last = e
        if last is ERROR:
            return a
        if type(a) is int and type(last) is int:
            return -(-a // last) * last if a % last else a
        return float(math.ceil(a / last) * last)
    return ERROR


@strict("random", 0, 1)
def _random_fn(v: Any = None) -> Any:
    if v is None:
        return _random.random()
    if type(v) is int:
        return _random.randrange(v) if v > 0 else ERROR
    if type(v) is float:
        return _random.random() * v
    return ERROR


# -- time -----------------------------------------------------------------------------------

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


def _time_parts(v: Any) -> Any:
    if type(v) is AbsTime:
        return time.gmtime(v.secs + v.offset)
    if type(v) is int:
        return time.localtime(v)
    return None


def _part(fn: Callable) -> Callable:
    def g(v: Any) -> Any:
        if v is UNDEFINED:
            return UNDEFINED
        parts = _time_parts(v)
        return ERROR if parts is None else fn(parts)

    return g


strict("getYear", 1)(_part(lambda p: p.tm_year))
strict("getMonth", 1)(_part(lambda p: p.tm_mon))
strict("getDayOfYear", 1)(_part(lambda p: p.tm_yday - 1))
strict("getDayOfMonth", 1)(_part(lambda p: p.tm_mday))
strict("getDayOfWeek", 1)(_part(lambda p: (p.tm_wday + 1) % 7))


def _rel_part(divisor: int, modulo: int | None) -> Callable:
    def g(v: Any) -> Any:
        if v is UNDEFINED:
            return UNDEFINED
        if type(v) is not RelTime:
            return ERROR
        n = int(v.secs) // divisor
        return n % modulo if modulo else n

    return g


strict("getDays", 1)(_rel_part(86400, None))
strict("getHours", 1)(_rel_part(3600, 24))
strict("getMinutes", 1)(_rel_part(60, 60))
strict("getSeconds", 1)(_rel_part(1, 60))


@strict("interval", 1)
def _interval(v: Any) -> Any:
    if v is UNDEFINED:
        return UNDEFINED
    if type(v) is not int:
        return ERROR
    secs = abs(v)
    days, rest = divmod(secs, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    sign = "-" if v < 0 else ""
    if days:
        return f"{sign}{days}+{h:02d}:{m:02d}:{s:02d}"
    if h:
        return f"{sign}{h}:{m:02d}:{s:02d}"
    if m:
        return f"{sign}{m}:{s:02d}"
    return f"{sign}{s}"


@strict("formatTime", 0, 2)
def _format_time(t: Any = None, fmt: Any = None) -> Any:
    if t is None:
        t = int(time.time())
    bad = _bad(t, fmt)
    if bad is not None:
        return bad
    if type(t) is AdValue:
        t = _abstime_of_split(t)
    if type(t) is int:
        parts = time.localtime(t)
    elif type(t) is AbsTime:
        parts = time.gmtime(t.secs + t.offset)
    else:
        return ERROR
    if fmt is None:
        fmt = "%c"
    if type(fmt) is not str:
        return ERROR
    try:
        return time.strftime(fmt, parts)
    except ValueError:
        return ERROR


def _abstime_of_split(ad: AdValue) -> Any:
    """The absolute time a splitTime() ad describes (formatTime accepts one)."""
    import calendar

    f = {k: ad.lookup(k, k) for k in ("year", "month", "day", "hours", "minutes", "seconds", "offset")}
    if any(type(v) is not int for v in f.values()):
        return ERROR
    try:
        naive = calendar.timegm((f["year"], f["month"], f["day"], f["hours"], f["minutes"], f["seconds"], 0, 0, 0))
    except (ValueError, OverflowError):
        return ERROR
    return AbsTime(naive - f["offset"], f["offset"])


@strict("splitTime", 1)
def _split_time(v: Any) -> Any:
    from gridbus.classad.scope import EMPTY_SCOPE, Ctx

    if v is UNDEFINED:
        return UNDEFINED
    t = type(v)
    d: dict[str, Any]
    if t is AbsTime or t is int or t is float:
        at = v if t is AbsTime else AbsTime(int(v), local_offset(int(v)))
        p = time.gmtime(at.secs + at.offset)
        d = {"Type": "Absolute", "Year": p.tm_year, "Month": p.tm_mon, "Day": p.tm_mday, "Hours": p.tm_hour,
             "Minutes": p.tm_min, "Seconds": p.tm_sec, "Offset": at.offset}
    elif t is RelTime:
        secs = v.secs
        neg = secs < 0
        whole = int(abs(secs))
        days, rest = divmod(whole, 86400)
        h, rest = divmod(rest, 3600)
        m, s = divmod(rest, 60)
        frac = abs(secs) - whole
        d = {"Type": "Relative", "Days": -days if neg else days, "Hours": -h if neg else h,
             "Minutes": -m if neg else m, "Seconds": (-(s + frac) if neg else s + frac) if frac else (-s if neg else s)}
    else:
        return ERROR
    low = {k.lower(): val for k, val in d.items()}
    return AdValue(Scope(low, True, None, d), Ctx(EMPTY_SCOPE, None))


# -- versions -------------------------------------------------------------------------------

def _strverscmp(a: str, b: str) -> int:
    """glibc's strverscmp, which HTCondor's versioncmp uses."""
    ra = re.findall(r"\d+|\D+", a)
    rb = re.findall(r"\d+|\D+", b)
    for x, y in zip(ra, rb, strict=False):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            fx, fy = x.startswith("0"), y.startswith("0")
            if fx or fy:  # fractional parts compare as decimals
                if fx and fy:
                    return -1 if x < y else 1
                return -1 if fx else 1
            if len(x) != len(y):
                return -1 if len(x) < len(y) else 1
            return -1 if x < y else 1
        # compare char by char up to the difference
        for cx, cy in zip(x, y, strict=False):
            if cx != cy:
                if cx.isdigit() != cy.isdigit():
                    return -1 if cy.isdigit() else 1
                return -1 if cx < cy else 1
        return -1 if len(x) < len(y) else 1
    return (len(ra) > len(rb)) - (len(ra) < len(rb))


def _version_args(a: Any, b: Any) -> Any:
    bad = _bad(a, b)
    if bad is not None:
        return bad
    x, y = to_string(a), to_string(b)
    if type(x) is not str or type(y) is not str:
        return ERROR
    return _strverscmp(x, y)


@strict("versioncmp", 2)
def _versioncmp(a: Any, b: Any) -> Any:
    return _version_args(a, b)


def _version_pred(pred: Callable[[int], bool]) -> Callable:
    def fn(a: Any, b: Any) -> Any:
        r = _version_args(a, b)
        return pred(r) if type(r) is int else r

    return fn


strict("versionLT", 2)(_version_pred(lambda r: r < 0))
strict("versionLE", 2)(_version_pred(lambda r: r <= 0))
strict("versionGT", 2)(_version_pred(lambda r: r > 0))
strict("versionGE", 2)(_version_pred(lambda r: r >= 0))
strict("versionEQ", 2)(_version_pred(lambda r: r == 0))


@strict("version_in_range", 3)
def _version_in_range(v: Any, lo: Any, hi: Any) -> Any:
    a = _version_args(v, lo)
    b = _version_args(v, hi)
    if type(a) is not int:
        return a
    if type(b) is not int:
        return b
    return a >= 0 and b <= 0


# -- regular expressions --------------------------------------------------------------------

_RE_CACHE: dict[tuple[str, int], Any] = {}


def _regex(pattern: str, options: Any) -> Any:
    flags = 0
    if options is not None:
        if type(options) is not str:
            return None
        for ch in options:
            flags |= {"i": re.I, "I": re.I, "m": re.M, "M": re.M, "s": re.S, "S": re.S, "x": re.X, "X": re.X}.get(ch, 0)
    key = (pattern, flags)
    rx = _RE_CACHE.get(key)
    if rx is None:
        try:
            rx = re.compile(pattern, flags)
        except (re.error, RecursionError, OverflowError):
            return None
        if len(_RE_CACHE) > 2000:
            _RE_CACHE.clear()
        _RE_CACHE[key] = rx
    return rx


def _options_full(options: Any) -> bool:
    return type(options) is str and "f" in options.lower()


@strict("regexp", 2, 3)
def _regexp(pattern: Any, target: Any, options: Any = None) -> Any:
    bad = _bad(pattern, target, options)
    if bad is not None:
        return bad
    if type(pattern) is not str or type(target) is not str:
        return ERROR
    rx = _regex(pattern, options)
    if rx is None:
        return ERROR
    return rx.search(target) is not None


@strict("regexpMember", 2, 3)
def _regexp_member(pattern: Any, lst: Any, options: Any = None) -> Any:
    bad = _bad(pattern, lst, options)
    if bad is not None:
        return bad
    if type(pattern) is not str or type(lst) is not ListValue:
        return ERROR
    rx = _regex(pattern, options)
    if rx is None:
        return ERROR
    for e in lst.values():
        if type(e) is not str:
            return ERROR
        if rx.search(e):
            return True
    return False


class _NoGroup(Exception):
    pass


def _expand(m: Any, template: str) -> str:
    def group(g: Any) -> str:
        i = int(g.group(1))
        if i > (m.re.groups or 0):
            raise _NoGroup(i)  # HTCondor answers error for a group the pattern does not have
        return m.group(i) or ""

    return re.sub(r"\\(\d)", group, template)


def _regex_sub(mode: str) -> Callable:
    def fn(pattern: Any, target: Any, subst: Any, options: Any = None) -> Any:
        bad = _bad(pattern, target, subst, options)
        if bad is not None:
            return bad
        if type(pattern) is not str or type(target) is not str or type(subst) is not str:
            return ERROR
        rx = _regex(pattern, options)
        if rx is None:
            return ERROR
        try:
            if mode == "regexps":
                m = rx.search(target)
                return _expand(m, subst) if m else ""
            count = 0 if mode == "replaceall" else 1
            return rx.sub(lambda m: _expand(m, subst), target, count=count)
        except _NoGroup:
            return ERROR

    return fn


strict("regexps", 3, 4)(_regex_sub("regexps"))
strict("replace", 3, 4)(_regex_sub("replace"))
strict("replaceAll", 3, 4)(_regex_sub("replaceall"))


# -- HTCondor string lists --------------------------------------------------------------------

def _split_list(s: str, delims: str | None) -> list[str]:
    d = ", " if delims is None else delims
    if not d:
        return [s] if s else []
    parts = re.split("[" + re.escape(d) + "]", s)
    return [p.strip() for p in parts if p.strip()]


def _slist_args(s: Any, delims: Any) -> Any:
    bad = _bad(s, delims)
    if bad is not None:
        return bad
    if type(s) is not str or (delims is not None and type(delims) is not str):
        return ERROR
    return _split_list(s, delims)


@strict("stringListSize", 1, 2)
def _sl_size(s: Any, delims: Any = None) -> Any:
    items = _slist_args(s, delims)
    return len(items) if type(items) is list else items


def _sl_numbers(s: Any, delims: Any) -> Any:
    items = _slist_args(s, delims)
    if type(items) is not list:
        return items
    out: list = []
    for it in items:
        r = _real(it)
        if type(r) is not float:
            return ERROR
        out.append(int(it) if re.fullmatch(r"[+-]?\d+", it) else r)
    return out


@strict("stringListSum", 1, 2)
def _sl_sum(s: Any, delims: Any = None) -> Any:
    nums = _sl_numbers(s, delims)
    if type(nums) is not list:
        return nums
    if any(type(n) is float for n in nums):
        return float(sum(nums))
    return sum(nums)


@strict("stringListAvg", 1, 2)
def _sl_avg(s: Any, delims: Any = None) -> Any:
    nums = _sl_numbers(s, delims)
    if type(nums) is not list:
        return nums
    return float(sum(nums)) / len(nums) if nums else 0.0


def _sl_extreme(pick_max: bool) -> Callable:
    def fn(s: Any, delims: Any = None) -> Any:
        nums = _sl_numbers(s, delims)
        if type(nums) is not list:
            return nums
        if not nums:
            return UNDEFINED
        best = max(nums) if pick_max else min(nums)
        return float(best) if any(type(n) is float for n in nums) else best

    return fn


strict("stringListMin", 1, 2)(_sl_extreme(False))
strict("stringListMax", 1, 2)(_sl_extreme(True))


def _sl_member(fold: bool) -> Callable:
    def fn(item: Any, s: Any, delims: Any = None) -> Any:
        if item is UNDEFINED or s is UNDEFINED:
            return False
        if type(item) is not str or type(s) is not str:
            return ERROR
        items = _slist_args(s, delims)
        if type(items) is not list:
            return items
        if fold:
            low = item.lower()
            return any(low == it.lower() for it in items)
        return item in items

    return fn


strict("stringListMember", 2, 3)(_sl_member(False))
strict("stringListIMember", 2, 3)(_sl_member(True))


def _sl_subset(fold: bool) -> Callable:
    def fn(a: Any, b: Any, delims: Any = None) -> Any:
        xs = _slist_args(a, delims)
        if type(xs) is not list:
            return xs
        ys = _slist_args(b, delims)
        if type(ys) is not list:
            return ys
        if fold:
            xs = [x.lower() for x in xs]
            ys = [y.lower() for y in ys]
        yset = set(ys)
        return all(x in yset for x in xs)

    return fn


strict("stringListSubsetMatch", 2, 3)(_sl_subset(False))
strict("stringListISubsetMatch", 2, 3)(_sl_subset(True))


@strict("stringListsIntersect", 2, 3)
def _sl_intersect(a: Any, b: Any, delims: Any = None) -> Any:
    xs = _slist_args(a, delims)
    if type(xs) is not list:
        return xs
    ys = _slist_args(b, delims)
    if type(ys) is not list:
        return ys
    return bool(set(xs) & set(ys))


@strict("stringList_regexpMember", 2, 4)
def _sl_regexp_member(pattern: Any, s: Any, delims: Any = None, options: Any = None) -> Any:
    bad = _bad(pattern, s, delims, options)
    if bad is not None:
        return bad
    if type(pattern) is not str:
        return ERROR
    items = _slist_args(s, delims)
    if type(items) is not list:
        return items
    rx = _regex(pattern, options)
    if rx is None:
        return ERROR
    return any(rx.search(it) for it in items)


def _list_of(strings: list, scope: Scope | None = None) -> ListValue:
    from gridbus.classad.scope import EMPTY_SCOPE, Ctx

    return ListValue(None, strings, scope or EMPTY_SCOPE, Ctx(EMPTY_SCOPE, None))


@strict("split", 1, 2)
def _split(s: Any, delims: Any = None) -> Any:
    if s is UNDEFINED:
        return ERROR
    items = _slist_args(s, delims)
    return _list_of(items) if type(items) is list else items


def _split_at(name_first: bool) -> Callable:
    def fn(s: Any) -> Any:
        if s is UNDEFINED or s is ERROR:
            return s
        if type(s) is not str:
            return ERROR
        at = s.find("@")
        if at < 0:
            return _list_of([s, ""] if name_first else ["", s])
        return _list_of([s[:at], s[at + 1 :]])

    return fn


strict("splitUserName", 1)(_split_at(True))
strict("splitSlotName", 1)(_split_at(False))


@strict("splitSinful", 1)
def _split_sinful(s: Any) -> Any:
    if s is UNDEFINED or s is ERROR:
        return s
    if type(s) is not str:
        return ERROR
    m = re.fullmatch(r"<([^:>?]+|\[[^\]]+\])(?::(\d+))?(?:\?([^>]*))?>", s.strip())
    if not m:
        return ERROR
    host, port, params = m.groups()
    return _list_of([host, port or "", "", params or ""])


@strict("countMatches", 2)
def _count_matches(pattern: Any, target: Any) -> Any:
    bad = _bad(pattern, target)
    if bad is not None:
        return bad
    if type(pattern) is not str or type(target) is not str:
        return ERROR
    rx = _regex(pattern, None)
    if rx is None:
        return ERROR
    return len(rx.findall(target))


@strict("userHome", 1, 2)
def _user_home(user: Any, default: Any = None) -> Any:
    import pwd

    if type(user) is not str:
        return default if default is not None else (user if user is UNDEFINED else ERROR)
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return default if default is not None else UNDEFINED


@strict("userMap", 2, 4)
def _user_map(*args: Any) -> Any:
    # No map files are configured in gridbus; HTCondor answers the preferred/default value then.
    if len(args) >= 4:
        return args[3]
    return UNDEFINED


@strict("listToArgs", 1)
def _list_to_args(lst: Any) -> Any:
    if type(lst) is not ListValue:
        return UNDEFINED if lst is UNDEFINED else ERROR
    out = []
    for v in lst.values():
        if type(v) is not str:
            return ERROR
        if v == "" or re.search(r"[\s']", v):
            out.append("'" + v.replace("'", "''") + "'")
        else:
            out.append(v)
    return " ".join(out)


@strict("argsToList", 1)
def _args_to_list(s: Any) -> Any:
    if type(s) is not str:
        return UNDEFINED if s is UNDEFINED else ERROR
    args: list[str] = []
    cur: list[str] = []
    in_arg = False
    i = 0
    while i < len(s):
        c = s[i]
        if c == "'":
            in_arg = True
            j = i + 1
            while True:
                k = s.find("'", j)
                if k < 0:
                    return ERROR
                cur.append(s[j:k])
                if s.startswith("''", k):
                    cur.append("'")
                    j = k + 2
                    continue
                i = k + 1
                break
            continue
        if c.isspace():
            if in_arg:
                args.append("".join(cur))
                cur = []
                in_arg = False
        else:
            cur.append(c)
            in_arg = True
        i += 1
    if in_arg:
        args.append("".join(cur))
    return _list_of(args)


@strict("envV1ToV2", 1)
def _env_v1_to_v2(s: Any) -> Any:
    if type(s) is not str:
        return UNDEFINED if s is UNDEFINED else ERROR
    pairs = [p for p in s.split(";") if p]
    out = []
    for p in pairs:
        if "=" not in p:
            return ERROR
        k, v = p.split("=", 1)
        if re.search(r"[\s'\"]", v):
            v = "'" + v.replace("'", "''") + "'"
        out.append(f"{k}={v}")
    return " ".join(out)


@strict("mergeEnvironment", 0, VARIADIC)
def _merge_environment(*envs: Any) -> Any:
    merged: dict[str, str] = {}
    for e in envs:
        if e is UNDEFINED:
            continue
        if type(e) is not str:
            return ERROR
        for part in re.findall(r"(?:[^\s']+|'(?:[^']|'')*')+", e):
            if "=" not in part:
                return ERROR
            k, v = part.split("=", 1)
            merged[k] = v
    return " ".join(f"{k}={v}" for k, v in merged.items())


@lazy("evalInEachContext", 2)
def _eval_in_each(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    lst = args[1](scope, ctx)
    if type(lst) is not ListValue:
        return UNDEFINED if lst is UNDEFINED else ERROR
    out = []
    for e in lst.values():
        if type(e) is not AdValue:
            out.append(ERROR)
            continue
        out.append(args[0](e.scope, ctx))
    return _list_of(out)


@lazy("unresolved", 1, 2)
def _unresolved(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    from gridbus.classad.exprtree import collect_refs

    node = nodes[0]
    if type(node) is N.AttrRef:
        raw = _lookup_raw(node, scope, ctx)
        if raw is None:
            return UNDEFINED
        from gridbus.classad.exprtree import python_to_node

        node = python_to_node(raw)
    mine: set[str] = set()
    other: set[str] = set()
    collect_refs(node, mine, other)
    missing = sorted(n for n in mine if scope.get(n, n) is _missing())
    return ",".join(missing) if missing else UNDEFINED


def _missing() -> Any:
    from gridbus.classad.values import MISSING

    return MISSING


__all__ = ["compile_call", "STRICT", "LAZY", "type_name", "format_reltime"]
