"""Scopes (the ads attribute references are looked up in) and the lazily evaluated aggregate values.

A :class:`Scope` wraps either a ClassAd's own case-folded table or a plain ``dict`` straight off the
wire. For plain dicts the exact spelling is tried first (expressions usually spell attributes as
the ad does) and a cached lower-case view is consulted only on a miss.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from gridbus.classad.limits import Evaluation
from gridbus.classad.nodes import RecordExpr
from gridbus.classad.values import ERROR, MISSING, UNDEFINED, AbsTime, RelTime, Value, datetime_secs

# Lower-case views of plain dicts, keyed by id() and checked against the dict itself and its size
# (the dict is held, so its id cannot be reused while the entry lives).
_LOW_VIEWS: dict[int, tuple[dict, int, dict[str, Any]]] = {}
_LOW_VIEWS_MAX = 4096


def _low_view(d: dict) -> dict[str, Any]:
    entry = _LOW_VIEWS.get(id(d))
    if entry is not None and entry[0] is d and entry[1] == len(d):
        return entry[2]
    view = {k.lower(): v for k, v in d.items() if isinstance(k, str)}
    if len(_LOW_VIEWS) >= _LOW_VIEWS_MAX:
        _LOW_VIEWS.clear()
    _LOW_VIEWS[id(d)] = (d, len(d), view)
    return view


class Scope:
    """One ad in the chain of scopes: ``folded`` says whether ``d`` is keyed by lower-case names."""

    __slots__ = ("d", "folded", "parent", "source")

    def __init__(self, d: dict, folded: bool, parent: Scope | None = None, source: Any = None):
        self.d = d
        self.folded = folded
        self.parent = parent
        self.source = source  # what the scope was made from, for conversion back to Python

    def get(self, name: str, lname: str) -> Any:
        if self.folded:
            return self.d.get(lname, MISSING)
        d = self.d
        v = d.get(name, MISSING)
        if v is MISSING:
            v = _low_view(d).get(lname, MISSING)
        return v


EMPTY_SCOPE = Scope({}, True)


class Ctx:
    """What one evaluation carries: the MY and TARGET ads, the memo of attribute values computed in
    this context, and the :class:`Evaluation` both sides share (cycle detection and the budget)."""

    __slots__ = ("my", "target", "ev", "memo", "_swapped")

    def __init__(self, my: Scope, target: Scope | None, ev: Evaluation | None = None):
        self.my = my
        self.target = target
        self.ev = ev  # made at the first expression attribute: most evaluations have none
        self.memo: dict | None = None
        self._swapped: Ctx | None = None

    def evaluation(self) -> Evaluation:
        """The Evaluation this context shares with its swapped twin (made on first use)."""
        ev = self.ev
        if ev is None:
            ev = self.ev = Evaluation()
            if self._swapped is not None:
                self._swapped.ev = ev
        return ev

    def swapped(self) -> Ctx:
        """The context for evaluating an attribute of TARGET: its MY is our TARGET and back."""
        s = self._swapped
        if s is None:
            s = Ctx(self.target, self.my, self.evaluation())  # type: ignore[arg-type]  # called only where TARGET is set
            s._swapped = self
            self._swapped = s
        return s


_SCALARS = (int, float, str, bool)


def resolve(scope: Scope, lname: str, raw: Any, ctx: Ctx) -> Any:
    """The value of attribute ``lname`` whose stored form is ``raw``, evaluated in ``scope``.

    An expression's value is computed once per evaluation and context (however often it is
    referenced), except where a cycle was cut short inside it: that value depends on the path.
    """
    t = type(raw)
    if t is int or t is str or t is float or t is bool:
        return raw
    fn = getattr(raw, "_fn", None)
    if fn is not None:  # an ExprTree
        memo = ctx.memo
        if memo is None:
            memo = ctx.memo = {}
        else:
            hit = memo.get((id(scope), lname))
            if hit is not None:
                return hit[0]
        ev = ctx.ev or ctx.evaluation()
        # A cycle is a reference back into an attribute being evaluated. HTCondor's library tells
        # attributes apart by their expression objects, and a nested ad literal's attributes are
        # new objects in each copy of the expression that holds it (ClassAd.eval evaluates a copy
        # of the attribute's expression): so a literal's attributes are told apart by the scope
        # made at each evaluation of the literal; any other ad's by its table.
        key = (id(scope) if type(scope.source) is RecordExpr else id(scope.d), lname)
        busy = ev.busy
        if key in busy:
            # A reference back into an attribute being evaluated (`[a = b; b = a].a`): HTCondor's
            # library answers undefined there, so the expression around it goes on as it would
            # for a missing attribute (`a is undefined` is true inside the cycle).
            ev.cycles += 1
            return UNDEFINED
        ev.step()
        cycles = ev.cycles
        busy.add(key)
        try:
            value = fn()(scope, ctx)
        finally:
            busy.discard(key)
        if ev.cycles == cycles:
            memo[(id(scope), lname)] = (value, scope)  # the scope is held so its id stays unique
        return value
    return from_python(raw, scope, ctx)


def from_python(raw: Any, scope: Scope, ctx: Ctx) -> Any:
    """An internal value for a Python value stored in an ad (or handed to the evaluator)."""
    t = type(raw)
    if t in _SCALARS or t is ListValue or t is AdValue or t is AbsTime or t is RelTime:
        return raw
    if raw is None:
        return UNDEFINED
    if isinstance(raw, Value):
        return UNDEFINED if raw is UNDEFINED else ERROR
    if isinstance(raw, (list, tuple)):
        return ListValue(None, list(raw), scope, ctx)
    if isinstance(raw, dict):
        return AdValue(Scope(raw, False, scope, raw), ctx)
    if isinstance(raw, _dt.datetime):
        return AbsTime(datetime_secs(raw), 0)
    fn = getattr(raw, "_fn", None)
    if fn is not None:
        return fn()(scope, ctx)
    data = getattr(raw, "_data", None)
    if isinstance(data, dict):  # a ClassAd
        return AdValue(Scope(data, True, scope, raw), ctx)
    if isinstance(raw, int):  # int subclasses (IntEnum members) count as integers
        return int(raw)
    if isinstance(raw, float):
        return float(raw)
    if isinstance(raw, str):
        return str(raw)
    return ERROR


class ListValue:
    """A list value. Elements written in an expression stay unevaluated until used, as in HTCondor
    (``{1, 1/0}[0]`` is 1); ``nodes`` holds them with their compiled forms, ``py`` holds Python
    values from an ad."""

    __slots__ = ("nodes", "py", "scope", "ctx", "_vals")

    def __init__(self, nodes: list | None, py: list | None, scope: Scope, ctx: Ctx):
        self.nodes = nodes  # list of (node, fn)
        self.py: list = py if py is not None else []  # read only where nodes is None
        self.scope = scope
        self.ctx = ctx
        self._vals: list | None = None

    def __len__(self) -> int:
        return len(self.nodes) if self.nodes is not None else len(self.py)

    def item(self, i: int) -> Any:
        if self._vals is not None:
            return self._vals[i]
        if self.nodes is not None:
            return self.nodes[i][1](self.scope, self.ctx)
        return from_python(self.py[i], self.scope, self.ctx)

    def values(self) -> list:
        vals = self._vals
        if vals is None:
            if self.nodes is not None:
                vals = [fn(self.scope, self.ctx) for _, fn in self.nodes]
            else:
                vals = [from_python(v, self.scope, self.ctx) for v in self.py]
            self._vals = vals
        return vals


class AdValue:
    """A ClassAd value: its scope (whose parent is where it was written) and the context."""

    __slots__ = ("scope", "ctx")

    def __init__(self, scope: Scope, ctx: Ctx):
        self.scope = scope
        self.ctx = ctx

    def lookup(self, name: str, lname: str) -> Any:
        # Selection falls back to the enclosing ads, as HTCondor's scoping does.
        s: Scope | None = self.scope
        while s is not None:
            raw = s.get(name, lname)
            if raw is not MISSING:
                return resolve(s, lname, raw, self.ctx)
            s = s.parent
        return UNDEFINED


def type_name(v: Any) -> str:
    """The ClassAd type name of an internal value (used in messages and by the type tests)."""
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "real"
    if t is str:
        return "string"
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if t is ListValue:
        return "list"
    if t is AdValue:
        return "classad"
    if t is AbsTime:
        return "abstime"
    if t is RelTime:
        return "reltime"
    return "error"
