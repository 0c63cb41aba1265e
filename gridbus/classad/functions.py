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
from gridbus.classad.timefmt import format_reltime, local_offset
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
        return ERROR  # undefined too: there is no text to parse
    try:
        node = parse_cached(s)
    except ClassAdParseError:
        return ERROR
    return fn_for(node)(scope, ctx)


@lazy("unparse", 1)
def _unparse(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    # HTCondor unparses only an attribute reference, looked up by its full text in the ad being
    # evaluated (so a scoped or missing reference gives "").
    node = nodes[0]
    if type(node) is not N.AttrRef:
        return ERROR
    if node.scope:
        return ""
    from gridbus.classad.values import MISSING

    raw = scope.get(node.name, node.lname)
    if raw is MISSING:
        return ""
    from gridbus.classad.exprtree import python_to_node

    return unparse(python_to_node(raw), COMPACT)


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
    # As HTCondor's testMember: undefined first, then the types, then each element compared with
    # == (or =?=); an element that does not compare (a list, an ad, another type) is just no match.
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


def _numbers(v: Any) -> Any:
    if type(v) is not ListValue:
        return UNDEFINED if v is UNDEFINED else ERROR
    vals = [e for e in v.values() if e is not UNDEFINED]  # undefined elements are skipped
    for e in vals:
        if not (_isnum(e) or type(e) is bool):
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
    if any(type(e) is float for e in nums):
        return sum(float(e) for e in nums)
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


strict("min", 1)(lambda v: _extreme(v, False))
strict("max", 1)(lambda v: _extreme(v, True))


_LIST_COMPARE_OPS = {"<": "<", "<=": "<=", "==": "==", "!=": "!=", ">=": ">=", ">": ">", "is": "is", "isnt": "isnt"}


def _anyall(want_any: bool) -> Callable:
    def fn(op: Any, lst: Any, x: Any) -> Any:
        if op is UNDEFINED:
            return UNDEFINED
        if type(op) is not str:
            return ERROR
        o = _LIST_COMPARE_OPS.get(op)  # spelled exactly: HTCondor compares the operator text as is
        if o is None:
            return ERROR
        if lst is UNDEFINED:
            return UNDEFINED
        if type(lst) is not ListValue:
            return ERROR
        for e in lst.values():
            if o == "is":
                r = identical(e, x)
            elif o == "isnt":
                r = identical(e, x)
                r = r if r is ERROR else not r
            else:
                r = compare(o, e, x)
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
    # join(list) and join(sep, list) spread the list; otherwise the first argument is the
    # separator. Undefined items are skipped; an error anywhere makes an error; no defined item
    # while some argument was undefined makes undefined.
    if len(vals) <= 2 and type(vals[-1]) is ListValue:
        args = ([vals[0]] if len(vals) == 2 else [""]) + list(vals[-1].values())
    else:
        args = list(vals)
    texts: list[Any] = []
    for v in args:
        t = to_string(v)
        if t is ERROR:
            return ERROR
        texts.append(t)
    sep, items = texts[0], texts[1:]
    defined = [t for t in items if t is not UNDEFINED]
    if not defined and (sep is UNDEFINED or len(defined) != len(items)):
        return UNDEFINED
    sep = "" if sep is UNDEFINED else sep
    out = ""
    for t in defined:
        if out:  # HTCondor puts the separator in only once something has been written
            out += sep
        out += t
    return out


def _case(upper: bool) -> Callable:
    def fn(v: Any) -> Any:
        s = to_string(v)
        if type(s) is not str:
            return s
        return s.upper() if upper else s.lower()

    return fn


strict("toUpper", 1)(_case(True))
strict("toLower", 1)(_case(False))


def _int32(n: int) -> int:
    """A long long narrowed to a C int, as HTCondor's IsIntegerValue(int&) does."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


@strict("substr", 2, 3)
def _substr(s: Any, offset: Any, length: Any = None) -> Any:
    if s is UNDEFINED or offset is UNDEFINED or length is UNDEFINED:
        return UNDEFINED
    if type(s) is not str or type(offset) is not int or (length is not None and type(length) is not int):
        return ERROR
    # Perl-like: negative offsets and lengths count from the end; both are C ints.
    n = len(s)
    start = _int32(offset)
    start = max(0, n + start) if start < 0 else min(start, n)
    if length is None:
        return s[start:]
    ln = _int32(length)
    if ln == 0:
        return ""
    end = n + ln if ln < 0 else start + ln
    return s[start:end] if end > start else ""


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

_DEC_PREFIX = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_HEX_PREFIX = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?)")
_SPECIAL_PREFIX = re.compile(r"([+-]?)(inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)", re.I)
_INT_MIN = -(1 << 63)


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
        return _INT_MIN
    return int(x)


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


@strict("int", 1)
def _int(v: Any) -> Any:
    if v is UNDEFINED:
        return UNDEFINED
    r = c_int(v)
    return ERROR if r is None else r


@strict("real", 1)
def _real(v: Any) -> Any:
    if v is UNDEFINED:
        return UNDEFINED
    r = c_real(v)
    return ERROR if r is None else r


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
        low = v.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        return UNDEFINED
    if t is RelTime:
        return f2ll(v.secs) != 0  # through time_t: whole seconds
    return v if v is UNDEFINED else ERROR


def _d2i32(x: float) -> int:
    """A double converted to a C int as x86 does: NaN and out-of-range values become INT_MIN."""
    if x != x or not -2147483648.0 <= x < 2147483648.0:
        return -(1 << 31)
    return int(x)


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
            off = _int32(offset)
        elif to is float:
            off = _d2i32(offset)
        elif to is RelTime:
            off = _int32(f2ll(offset.secs))
        else:
            return ERROR
    t = type(v)
    if v is UNDEFINED:
        return UNDEFINED
    if t is int or t is float:
        secs = _int32(v) if t is int else _d2i32(v)
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
        return RelTime(float(_int32(v)))
    if t is float:
        return RelTime(v)
    if t is AbsTime:
        return RelTime(float(v.secs))
    if t is RelTime:
        return v
    if t is str:
        return RelTime(0.0)  # a string not folded at parse time: HTCondor's fall-through gives 0
    return v if v is UNDEFINED else ERROR


# -- maths ----------------------------------------------------------------------------------

def _rounding(fn: Callable[[float], float]) -> Callable:
    def g(v: Any) -> Any:
        if type(v) is int:
            return v
        r = c_real(v)
        if r is None:
            return ERROR  # undefined too: HTCondor's rounding functions are not lenient
        if r != r or r in (math.inf, -math.inf):
            return _INT_MIN
        return f2ll(fn(r))

    return g


strict("floor", 1)(_rounding(math.floor))
strict("ceil", 1)(_rounding(math.ceil))
strict("ceiling", 1)(_rounding(math.ceil))
strict("round", 1)(_rounding(round))  # rint: halves go to even, as round() does


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
            n = wrap64(a + base - 1)
            quotient = abs(n) // abs(base)
            return wrap64((quotient if (n < 0) == (base < 0) else -quotient) * base)
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


def _abs_field(fn: Callable) -> Callable:
    def g(v: Any) -> Any:
        if type(v) is not AbsTime:
            return ERROR
        try:
            p = time.localtime(v.secs)  # HTCondor uses the local time here, not the value's offset
        except (OverflowError, OSError, ValueError):
            return ERROR
        return fn(p)

    return g


strict("getYear", 1)(_abs_field(lambda p: p.tm_year))
strict("getMonth", 1)(_abs_field(lambda p: p.tm_mon))
strict("getDayOfYear", 1)(_abs_field(lambda p: p.tm_yday - 1))
strict("getDayOfMonth", 1)(_abs_field(lambda p: p.tm_mday))
strict("getDayOfWeek", 1)(_abs_field(lambda p: (p.tm_wday + 1) % 7))


def _crem(a: int, b: int) -> int:
    """C's % (the sign follows the dividend)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _cquot(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _hms_field(rel: Callable[[int], int], absolute: Callable | None) -> Callable:
    def g(v: Any) -> Any:
        if type(v) is RelTime:
            return rel(f2ll(v.secs))
        if type(v) is AbsTime and absolute is not None:
            try:
                return absolute(time.localtime(v.secs))
            except (OverflowError, OSError, ValueError):
                return ERROR
        return ERROR

    return g


strict("getDays", 1)(_hms_field(lambda r: _cquot(r, 86400), None))
strict("getHours", 1)(_hms_field(lambda r: _cquot(_crem(r, 86400), 3600), lambda p: p.tm_hour))
strict("getMinutes", 1)(_hms_field(lambda r: _cquot(_crem(r, 3600), 60), lambda p: p.tm_min))
strict("getSeconds", 1)(_hms_field(lambda r: _crem(r, 60), lambda p: p.tm_sec))


@strict("interval", 1)
def _interval(v: Any) -> Any:
    n = c_int(v)
    if n is None:
        return ERROR
    secs = _int32(n)  # HTCondor keeps the seconds in a C int
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


@strict("formatTime", 0, 2)
def _format_time(t: Any = None, fmt: Any = None) -> Any:
    from gridbus.classad.timefmt import c_strftime, day_numbers

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
    tm_mon = 0 if field("month") is None else field("month") - 1  # type: ignore[operator]
    tm_year = 0 if field("year") is None else field("year") - 1900  # type: ignore[operator]
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
            secs = v if t is int else _d2i32(v)  # a real goes through a C int, an integer does not
            off = local_offset(secs)
        try:
            p = time.gmtime(secs + off)
        except (OverflowError, OSError, ValueError):
            return None
        return {"type": "AbsoluteTime", "year": p.tm_year, "month": p.tm_mon, "day": p.tm_mday,
                "hours": p.tm_hour, "minutes": p.tm_min, "seconds": p.tm_sec, "offset": off}
    if t is RelTime:
        r = v.secs
        neg = r < 0
        if neg:
            r = -r
        whole = _d2i32(r)
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
        return {"type": "RelativeTime", "days": days, "hours": hrs, "minutes": mins, "seconds": float(secs)}
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
    from gridbus.classad.scope import EMPTY_SCOPE, Ctx

    if type(v) is AdValue:
        return ERROR
    if v is UNDEFINED:
        return UNDEFINED
    low = _split_fields(v)
    if low is None:
        return ERROR
    d = {_SPLIT_NAMES[k]: val for k, val in low.items()}
    return AdValue(Scope(low, True, None, d), Ctx(EMPTY_SCOPE, None))


# -- versions -------------------------------------------------------------------------------

def _sbyte(c: int) -> int:
    return c - 256 if c > 127 else c  # C's plain char is signed on x86


def _isdigit(c: int) -> bool:
    return 48 <= c <= 57


def natural_cmp(a: str, b: str) -> int:
    """HTCondor's natural_cmp (strverscmp-like), byte for byte: the result is a difference of
    characters or of digit-run lengths, not just its sign, because versioncmp() returns it."""
    s1 = a.encode("utf-8") + b"\0"
    s2 = b.encode("utf-8") + b"\0"
    i = 0
    while s1[i] and s1[i] == s2[i]:
        i += 1
    if s1[i] == s2[i]:
        return 0
    n = i  # the start of the digit run that leads up to the mismatch (same in both strings)
    while n > 0 and _isdigit(s1[n - 1]):
        n -= 1
    if n == i and (not _isdigit(s1[i]) or not _isdigit(s2[i])):
        return _sbyte(s1[i]) - _sbyte(s2[i])
    z1 = n
    while s1[z1] == 48:
        z1 += 1
    z2 = n
    while s2[z2] == 48:
        z2 += 1
    if z1 > n and not _isdigit(s1[z1]):  # a final zero is the number, not a leading zero
        z1 -= 1
    if z2 > n and not _isdigit(s2[z2]):
        z2 -= 1
    if z1 != z2:
        return z2 - z1  # fewer leading zeros sorts first
    if z1 > n:
        return _sbyte(s1[i]) - _sbyte(s2[i])
    e1 = z1
    while _isdigit(s1[e1]):
        e1 += 1
    e2 = z2
    while _isdigit(s2[e2]):
        e2 += 1
    if e1 != e2:
        return e1 - e2
    return _sbyte(s1[i]) - _sbyte(s2[i])


def _version_args(a: Any, b: Any) -> Any:
    # Undefined wins over error here: HTCondor tests for undefined before converting.
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    x, y = to_string(a), to_string(b)
    if type(x) is not str or type(y) is not str:
        return ERROR
    return natural_cmp(x, y)


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
    if lo is UNDEFINED or hi is UNDEFINED:
        return UNDEFINED
    t, a, b = to_string(v), to_string(lo), to_string(hi)
    if type(t) is not str or type(a) is not str or type(b) is not str:
        return ERROR
    return natural_cmp(a, t) <= 0 and natural_cmp(t, b) <= 0


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
            if mode == "replaceall":
                if any(m.end() == m.start() for m in rx.finditer(target)):
                    return ERROR  # HTCondor's global replace fails on an empty match
                return rx.sub(lambda m: _expand(m, subst), target)
            return rx.sub(lambda m: _expand(m, subst), target, count=1)
        except _NoGroup:
            return ERROR

    return fn


strict("regexps", 3, 4)(_regex_sub("regexps"))
strict("replace", 3, 4)(_regex_sub("replace"))
strict("replaceAll", 3, 4)(_regex_sub("replaceall"))


# -- HTCondor string lists --------------------------------------------------------------------

def _tokens(s: str, delims: str) -> list[str]:
    """HTCondor's StringTokenIterator: split at any delimiter character, trim white space, drop
    empty items."""
    if not delims:
        return [s.strip()] if s.strip() else []
    parts = re.split("[" + re.escape(delims) + "]", s)
    return [p.strip() for p in parts if p.strip()]


def _slist_args(s: Any, delims: Any, default: str = ", ") -> Any:
    # The extension functions want strings and nothing else: undefined is an error here.
    if type(s) is not str or (delims is not None and type(delims) is not str):
        return ERROR
    return _tokens(s, default if delims is None else delims)


@strict("stringListSize", 1, 2)
def _sl_size(s: Any, delims: Any = None) -> Any:
    items = _slist_args(s, delims)
    return len(items) if type(items) is list else items


_FLT_MAX = 3.4028234663852886e38
_FLT_MIN = 1.1754943508222875e-38


def _sl_summarize(kind: str) -> Callable:
    # stringListSummarize_func: sscanf("%lf") per item, real as soon as one item has a character
    # other than +-0123456789, min/max start from FLT_MAX/FLT_MIN (so max of negatives is 0).
    def fn(s: Any, delims: Any = None) -> Any:
        items = _slist_args(s, delims)
        if type(items) is not list:
            return items
        if not items:
            return 0.0 if kind in ("sum", "avg") else UNDEFINED
        acc = {"sum": 0.0, "avg": 0.0, "min": _FLT_MAX, "max": _FLT_MIN}[kind]
        is_real = False
        for it in items:
            x = strtod(it)
            if x is None:
                return ERROR
            if it.strip("+-0123456789"):
                is_real = True
            if kind in ("sum", "avg"):
                acc = x + acc
            elif kind == "min":
                acc = x if x < acc else acc
            else:
                acc = x if x > acc else acc
        if kind == "avg":
            acc /= len(items)
        return acc if is_real else f2ll(acc)

    return fn


strict("stringListSum", 1, 2)(_sl_summarize("sum"))
strict("stringListAvg", 1, 2)(_sl_summarize("avg"))
strict("stringListMin", 1, 2)(_sl_summarize("min"))
strict("stringListMax", 1, 2)(_sl_summarize("max"))


def _sl_member(fold: bool, subset: bool) -> Callable:
    # stringListMember_func: strings or undefined (which counts as ""), both undefined is
    # undefined; the default delimiters include tabs and line ends.
    def fn(item: Any, s: Any, delims: Any = None) -> Any:
        for v in (item, s, delims):
            if v is not None and v is not UNDEFINED and type(v) is not str:
                return ERROR
        if item is UNDEFINED and s is UNDEFINED:
            return UNDEFINED
        d = ", \t\r\n" if delims is None or delims is UNDEFINED else delims
        item_s = "" if item is UNDEFINED else item
        items = _tokens("" if s is UNDEFINED else s, d)
        if not subset:
            if fold:
                return item_s.lower() in [x.lower() for x in items]
            return item_s in items
        if not item_s:
            return True  # the empty string is always a subset
        wanted = _tokens(item_s, d)  # split before folding: the delimiters are case-sensitive
        if fold:
            items = [x.lower() for x in items]
            wanted = [w.lower() for w in wanted]
        have = set(items)
        return bool(wanted) and all(w in have for w in wanted)

    return fn


strict("stringListMember", 2, 3)(_sl_member(False, False))
strict("stringListIMember", 2, 3)(_sl_member(True, False))
strict("stringListSubsetMatch", 2, 3)(_sl_member(False, True))
strict("stringListISubsetMatch", 2, 3)(_sl_member(True, True))


def _split_raw(s: str, delims: str) -> list[str]:
    """The core library's split_string_list: strcspn pieces, not trimmed, empty ones dropped."""
    d = delims or " ,"
    return [p for p in re.split("[" + re.escape(d) + "]", s) if p]


@strict("stringListsIntersect", 2, 3)
def _sl_intersect(a: Any, b: Any, delims: Any = None) -> Any:
    bad = _bad(a, b, delims)
    if bad is not None:
        return bad
    if type(a) is not str or type(b) is not str or (delims is not None and type(delims) is not str):
        return ERROR
    d = delims or ""
    ys = set(_split_raw(b, d))
    return any(x in ys for x in _split_raw(a, d))


@strict("stringList_regexpMember", 2, 4)
def _sl_regexp_member(pattern: Any, s: Any, delims: Any = None, options: Any = None) -> Any:
    if any(v is not None and type(v) is not str for v in (pattern, s, delims, options)):
        return ERROR
    rx = _regex(pattern, options)
    if rx is None:
        return ERROR
    items = _tokens(s, ", " if delims is None else delims)
    if not items:
        return UNDEFINED
    return any(rx.search(it) for it in items)


def _list_of(strings: list, scope: Scope | None = None) -> ListValue:
    from gridbus.classad.scope import EMPTY_SCOPE, Ctx

    return ListValue(None, strings, scope or EMPTY_SCOPE, Ctx(EMPTY_SCOPE, None))


@strict("split", 1, 2)
def _split(s: Any, seps: Any = None) -> Any:
    if type(s) is not str or (seps is not None and type(seps) is not str):
        return ERROR
    d = ", \t" if seps is None else seps
    # splitArb_func: white space runs and a separator mixed with white space count once, but a
    # repeated non-space separator ("a,,b") makes an empty item.
    out: list[str] = []
    last = 0
    ch = -1
    if d:
        for ix, c in enumerate(s):
            if c not in d:
                continue
            if ix > last:
                out.append(s[last:ix])
            elif not _c_isspace(ch) and ch == ord(c):
                out.append("")
            if not c.isspace():
                ch = ord(c)
            last = ix + 1
    if len(s) > last:
        out.append(s[last:])
    return _list_of(out)


def _c_isspace(ch: int) -> bool:
    return ch in (9, 10, 11, 12, 13, 32)


def _split_at(name_first: bool) -> Callable:
    def fn(s: Any) -> Any:
        if type(s) is not str:
            return ERROR
        at = s.find("@")
        if at < 0:
            return _list_of([s, ""] if name_first else ["", s])
        return _list_of([s[:at], s[at + 1 :]])

    return fn


strict("splitUserName", 1)(_split_at(True))
strict("splitSlotName", 1)(_split_at(False))


@strict("userHome", 1, 2)
def _user_home(user: Any, default: Any = None) -> Any:
    import pwd

    dflt = default if type(default) is str and default else ""
    if user is UNDEFINED and not dflt:
        return UNDEFINED
    if type(user) is not str:
        return dflt or ERROR
    try:
        home = pwd.getpwnam(user).pw_dir
    except (KeyError, ValueError):
        return dflt or UNDEFINED
    return home or dflt or UNDEFINED


@strict("userMap", 2, 4)
def _user_map(mapname: Any, user: Any, preferred: Any = None, default: Any = None) -> Any:
    # No map files are configured in gridbus, so no user maps: HTCondor then answers the
    # 4-argument form's default and undefined otherwise.
    if type(mapname) is not str or type(user) is not str:
        if mapname is ERROR or user is ERROR:
            return ERROR
    return default if default is not None else UNDEFINED


@strict("listToArgs", 1)
def _list_to_args(lst: Any) -> Any:
    if type(lst) is not ListValue:
        return ERROR
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
        return ERROR
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


def _v2_quote(text: str) -> str:
    """HTCondor's V2 raw environment quoting: each run of white space and single quotes goes
    inside one pair of single quotes, a quote inside doubled."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\r\n'":
            j = i
            while j < len(text) and text[j] in " \t\r\n'":
                j += 1
            out.append("'" + text[i:j].replace("'", "''") + "'")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _v2_text(env: dict[str, str]) -> str:
    return " ".join(f"{_v2_quote(k)}={_v2_quote(v)}" for k, v in env.items())


@strict("envV1ToV2", 1)
def _env_v1_to_v2(s: Any) -> Any:
    if type(s) is not str:
        return UNDEFINED if s is UNDEFINED else ERROR
    env: dict[str, str] = {}
    for entry in s.split(";"):
        if not entry.strip():
            continue
        if "=" not in entry:
            return ERROR
        k, v = entry.lstrip().split("=", 1)
        if not k.strip():
            return ERROR
        env[k] = v
    return _v2_text(env)


def _parse_v2(text: str) -> dict[str, str] | None:
    """Words separated by white space, single-quoted runs kept whole ('' is a quote)."""
    words: list[str] = []
    cur: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "'":
            in_word = True
            i += 1
            while True:
                if i >= len(text):
                    return None
                if text[i] == "'":
                    if text.startswith("''", i):
                        cur.append("'")
                        i += 2
                        continue
                    i += 1
                    break
                cur.append(text[i])
                i += 1
            continue
        if c in " \t\r\n":
            if in_word:
                words.append("".join(cur))
                cur, in_word = [], False
        else:
            cur.append(c)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(cur))
    env: dict[str, str] = {}
    for w in words:
        if "=" not in w or w.startswith("="):
            return None
        k, v = w.split("=", 1)
        env[k] = v
    return env


@strict("mergeEnvironment", 0, VARIADIC)
def _merge_environment(*envs: Any) -> Any:
    merged: dict[str, str] = {}
    for e in envs:
        if e is UNDEFINED:
            continue
        if type(e) is not str:
            return ERROR
        parsed = _parse_v2(e)
        if parsed is None:
            return ERROR
        merged.update(parsed)
    return _v2_text(merged)


def _each_context(count: bool) -> Callable:
    # HTCondor's evalInEachContext_func: an attribute reference is looked up here first and its
    # expression is evaluated in each nested ad, alone (no TARGET); the list may be a literal
    # whose elements are evaluated one by one.
    def fn(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
        from gridbus.classad.scope import Ctx

        expr_fn = args[0]
        node = nodes[0]
        unresolved = False
        if type(node) is N.AttrRef:
            raw = _lookup_raw(node, scope, ctx)
            if raw is not None:
                from gridbus.classad.exprtree import fn_for, python_to_node

                expr_fn = fn_for(python_to_node(raw))
            else:
                unresolved = True
        lst = args[1](scope, ctx)
        if unresolved and type(nodes[1]) is N.AttrRef and (lst is UNDEFINED or type(lst) is not ListValue):
            return 0 if count else UNDEFINED  # as classad2 answers an unresolved reference here
        if type(lst) is not ListValue:
            if lst is UNDEFINED:
                return 0 if count else UNDEFINED
            return ERROR
        out = []
        for e in lst.values():
            if type(e) is not AdValue:
                out.append(UNDEFINED if e is UNDEFINED else ERROR)
                continue
            out.append(expr_fn(e.scope, Ctx(e.scope, None)))
        if count:
            return sum(1 for r in out if (r is True) or (type(r) in (int, float) and r != 0))
        return _list_of(out)

    return fn


lazy("evalInEachContext", 2)(_each_context(False))
lazy("countMatches", 2)(_each_context(True))


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
