"""``ExprTree`` (classad2's expression object), the compiled fast path, and value conversion.

This is the layer that puts the evaluator together: it makes the one :class:`Compiler` (given the
functions' call compiler and ExprTree for a nested ad's attributes) and gives the functions what
they call in it (:func:`gridbus.classad.functions.registry.install`). ClassAd sits above this
module (it holds ExprTrees); the conversions that hand ads back as ClassAds are given the type by
:func:`use_ad_type`, which :mod:`classad` calls when it is imported.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.compiler import Compiler, Fn
from gridbus.classad.functions import registry
from gridbus.classad.limits import EvaluationLimitExceeded
from gridbus.classad.nodes import collect_refs
from gridbus.classad.parser import parse_expression
from gridbus.classad.scope import EMPTY_SCOPE, AdValue, Ctx, ListValue, Scope, from_python
from gridbus.classad.unparse import COMPACT, OLD, PRETTY, format_python, unparse
from gridbus.classad.values import ERROR, MISSING, UNDEFINED, AbsTime, RelTime, Value, datetime_secs

# Parsed trees and compiled closures, keyed by expression text. Bounded: cleared when full, which
# costs one re-parse per expression and keeps a daemon's memory flat under arbitrary input.
_PARSE_CACHE: dict[str, N.Node] = {}
_FN_CACHE: dict[int, Any] = {}
# The pretty text of a tree, keyed like _FN_CACHE: every ExprTree decoded from the same wire text
# shares one parsed tree, so a pool's 200,000 slot ads (or a cluster's procs) print each distinct
# expression once instead of once per ad.
_TEXT_CACHE: dict[int, tuple[N.Node, str]] = {}
_CACHE_MAX = 50_000
# One ExprTree per distinct wire text (see `shared`).
_SHARED: dict[str, ExprTree] = {}


def _cached(cache: dict[str, Any], text: str, make: Callable[[str], Any]) -> Any:
    """``cache[text]``, made by ``make(text)`` when missing (the cache is cleared when full)."""
    value = cache.get(text)
    if value is None:
        value = make(text)
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[text] = value
    return value


def parse_cached(text: str) -> N.Node:
    return _cached(_PARSE_CACHE, text, parse_expression)


def fn_for(node: N.Node) -> Fn:
    """The compiled closure of a tree (trees are shared through the parse cache, so is this)."""
    fn = _FN_CACHE.get(id(node))
    if fn is None or fn[0] is not node:
        if len(_FN_CACHE) >= _CACHE_MAX:
            _FN_CACHE.clear()
        fn = (node, _COMPILER.compile(node))
        _FN_CACHE[id(node)] = fn
    return fn[1]


def text_for(node: N.Node) -> str:
    """The pretty text of a tree (cached per shared tree, as :func:`fn_for`)."""
    entry = _TEXT_CACHE.get(id(node))
    if entry is None or entry[0] is not node:
        if len(_TEXT_CACHE) >= _CACHE_MAX:
            _TEXT_CACHE.clear()
        entry = (node, unparse(node, PRETTY))
        _TEXT_CACHE[id(node)] = entry
    return entry[1]


def _make_scope(obj: Any, what: str) -> Scope | None:
    if obj is None:
        return None
    data = getattr(obj, "_data", None)
    if isinstance(data, dict) and hasattr(obj, "_names"):
        return Scope(data, True, None, obj)
    if isinstance(obj, dict):
        return Scope(obj, False, None, obj)
    raise TypeError(f"{what} must be a ClassAd or a dict, not {type(obj).__name__}")


def run(fn: Any, scope: Scope, target: Scope | None, strict: bool = False) -> Any:
    """Evaluate a compiled closure; never raises: a runaway recursion or a bug yields error, and so
    does a bound of :mod:`limits` unless ``strict`` (then its EvaluationLimitExceeded propagates)."""
    try:
        return fn(scope, Ctx(scope, target))
    except EvaluationLimitExceeded:
        if strict:
            raise
        return ERROR
    except RecursionError:
        return ERROR
    except (ArithmeticError, ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError):
        return ERROR


def is_true(v: Any) -> bool:
    """HTCondor's EvalBool: true, or a non-zero number."""
    if v is True:
        return True
    t = type(v)
    return (t is int or t is float) and v != 0


class ExprTree:
    """An expression in the ClassAd language (classad2.ExprTree)."""

    __slots__ = ("_node", "_text", "__weakref__")

    def __init__(self, expr: Any = None):
        if expr is None:
            self._node: N.Node = N.Literal(UNDEFINED)
        elif isinstance(expr, ExprTree):
            self._node = expr._node
        elif isinstance(expr, str):
            self._node = parse_cached(expr)
        else:
            self._node = parse_cached(format_python(expr, COMPACT))
        self._text: str | None = None

    @classmethod
    def _from_node(cls, node: N.Node) -> ExprTree:
        e = cls.__new__(cls)
        e._node = node
        e._text = None
        return e

    def _fn(self) -> Any:
        return fn_for(self._node)

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = text_for(self._node)
        return text

    def __repr__(self) -> str:
        return unparse(self._node, COMPACT)

    def _old(self) -> str:
        return unparse(self._node, OLD)

    def __eq__(self, other: object) -> bool:
        return type(other) is ExprTree and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self) -> tuple:
        return (ExprTree, (repr(self),))

    def eval(self, scope: Any = None, target: Any = None) -> Any:
        """Evaluate with ``scope`` as MY and ``target`` as TARGET (ClassAds or dicts)."""
        my = _make_scope(scope, "scope") or EMPTY_SCOPE
        return to_python(run(self._fn(), my, _make_scope(target, "target")))

    def simplify(self, scope: Any = None, target: Any = None) -> ExprTree:
        """Evaluate and return the value as an expression."""
        my = _make_scope(scope, "scope") or EMPTY_SCOPE
        v = run(self._fn(), my, _make_scope(target, "target"))
        return ExprTree._from_node(value_to_node(v))


def shared(text: str) -> ExprTree:
    """The ExprTree of ``text``, one object for every caller that asks for the same text. An
    ExprTree never changes once made, so the decoder hands the same one to every ad that carries
    the expression: a collector holding 200,000 slot ads of a few distinct Requirements and Start
    expressions holds a few ExprTrees, not 800,000 objects for its garbage collector to walk."""
    expr: ExprTree = _cached(_SHARED, text, ExprTree)
    return expr


class Compiled:
    """An expression compiled once for the daemons' hot path (see docs/protocols.md)."""

    __slots__ = ("text", "node", "fn", "refs", "target_refs")

    def __init__(self, text: str, node: N.Node):
        self.text = text
        self.node = node
        self.fn = fn_for(node)
        my_refs: set[str] = set()
        target_refs: set[str] = set()
        collect_refs(node, my_refs, target_refs)
        self.refs = frozenset(my_refs)  # unscoped and MY. names, lower-case
        self.target_refs = frozenset(target_refs)  # TARGET. names, lower-case

    def eval(self, my: Any, target: Any = None, strict: bool = False) -> Any:
        """The value; ``strict``: a bound of the evaluation raises EvaluationLimitExceeded
        instead of answering error (for a caller that reports it to whoever sent the text)."""
        scope = _make_scope(my, "my") or EMPTY_SCOPE
        return to_python(run(self.fn, scope, _make_scope(target, "target"), strict))

    def test(self, my: Any, target: Any = None, strict: bool = False) -> bool:
        scope = _make_scope(my, "my") or EMPTY_SCOPE
        return is_true(run(self.fn, scope, _make_scope(target, "target"), strict))

    def __repr__(self) -> str:
        return f"Compiled({self.text!r})"


_COMPILED: dict[str, Compiled] = {}


def compile(expr: str | ExprTree) -> Compiled:  # noqa: A001 - the contract's name
    """The compiled form of an expression, cached by its text."""
    if isinstance(expr, ExprTree):
        text = str(expr)
        node = expr._node
    elif isinstance(expr, str):
        text = expr
        node = None
    else:
        raise TypeError(f"compile() takes an expression text or ExprTree, not {type(expr).__name__}")
    c = _COMPILED.get(text)
    if c is None:
        c = Compiled(text, node if node is not None else parse_cached(text))
        if len(_COMPILED) >= _CACHE_MAX:
            _COMPILED.clear()
        _COMPILED[text] = c
    return c


# -- conversions -------------------------------------------------------------------------------


def node_to_python(node: N.Node) -> Any:
    """What classad2 hands back for a stored expression: literals as Python values, lists and
    nested ads converted element by element, anything else as an ExprTree."""
    if type(node) is N.Literal:
        v = node.value
        if node.folded == "reltime":
            return float(v.secs)
        if type(v) is AbsTime:
            return v.to_datetime()
        return v
    if type(node) is N.ListExpr:
        return [node_to_python(n) for n in node.items]
    if type(node) is N.RecordExpr:
        ad = _ad_type()
        for name, n in node.attrs:
            ad._store(name, ExprTree._from_node(n))
        return ad
    return ExprTree._from_node(node)


def to_python(v: Any) -> Any:
    """An internal value as classad2 returns it from eval()."""
    t = type(v)
    if t is int or t is float or t is str or t is bool:
        return v
    if v is UNDEFINED or v is ERROR:
        return v
    if t is ListValue:
        if v.nodes is not None:
            return [node_to_python(n) for n, _ in v.nodes]
        return [_py_element(x) for x in v.py]
    if t is AdValue:
        src = v.scope.source
        if isinstance(src, N.RecordExpr):
            return node_to_python(src)
        if isinstance(src, _ad_type):
            return src
        if isinstance(src, dict):
            return _ad_type(src)
        ad = _ad_type()
        for k, raw in v.scope.d.items():
            ad._store(k, raw)
        return ad
    if t is AbsTime:
        return v.to_datetime()
    if t is RelTime:
        return float(v.secs)
    return ERROR


def _py_element(x: Any) -> Any:
    t = type(x)
    if t is ListValue or t is AdValue or t is AbsTime or t is RelTime:
        return to_python(x)
    if isinstance(x, dict) and not hasattr(x, "_data"):
        return _ad_type(x)
    if x is None:
        return UNDEFINED
    return x


def value_to_node(v: Any) -> N.Node:
    """A literal tree for an internal value (simplify(), flatten())."""
    t = type(v)
    if t in (int, float, str, bool) or v is UNDEFINED or v is ERROR or t is AbsTime or t is RelTime:
        return N.Literal(v)
    if t is ListValue:
        if v.nodes is not None:
            return N.ListExpr([n for n, _ in v.nodes])
        return N.ListExpr([python_to_node(x) for x in v.py])
    if t is AdValue:
        src = v.scope.source
        if isinstance(src, N.RecordExpr):
            return src
        return python_to_node(to_python(v))
    return N.Literal(ERROR)


def python_to_node(v: Any) -> N.Node:
    """A tree for a Python value stored in an ad."""
    if isinstance(v, ExprTree):
        return v._node
    t = type(v)
    if t in (int, float, str, bool):
        return N.Literal(v)
    if v is None:
        return N.Literal(UNDEFINED)
    if isinstance(v, Value):
        return N.Literal(UNDEFINED if v is UNDEFINED else ERROR)
    if t in (ListValue, AdValue, AbsTime, RelTime):
        return value_to_node(v)
    if isinstance(v, (list, tuple)):
        return N.ListExpr([python_to_node(x) for x in v])
    data = getattr(v, "_data", None)
    if isinstance(data, dict):
        return N.RecordExpr([(v._names[k], python_to_node(x)) for k, x in data.items()])
    if isinstance(v, dict):
        return N.RecordExpr([(str(k), python_to_node(x)) for k, x in v.items()])
    if isinstance(v, _dt.datetime):
        return N.Literal(AbsTime(datetime_secs(v), 0), "abstime")
    if isinstance(v, bool):
        return N.Literal(bool(v))
    if isinstance(v, int):
        return N.Literal(int(v))
    if isinstance(v, float):
        return N.Literal(float(v))
    if isinstance(v, str):
        return N.Literal(str(v))
    raise TypeError(f"a {type(v).__name__} cannot be a ClassAd value")


def eval_attr(scope: Scope, name: str, target: Scope | None) -> Any:
    """The internal value of attribute ``name`` of ``scope``'s ad, with TARGET ``target``.

    The attribute's expression is evaluated as such, not as a reference to it: as in HTCondor's
    library, a reference to ``name`` inside it is then followed once before the cycle is cut
    (``[e = ifThenElse(e is undefined, 1, 2)]``: ``eval("e")`` is 2, ``[...].e`` is 1).
    """
    raw = scope.get(name, name.lower())
    if raw is MISSING:
        return UNDEFINED
    try:
        return from_python(raw, scope, Ctx(scope, target))
    except (RecursionError, EvaluationLimitExceeded):
        return ERROR


class _AdTypeNotGiven:
    """Stands for ClassAd until :mod:`classad` gives it (it always has by the time anything is
    evaluated: the package's ``__init__`` imports it)."""

    def __init__(self, *args: Any) -> None:
        raise RuntimeError("gridbus.classad.classad has not given exprtree its ClassAd type")


# The type the conversions hand nested ads back as (see the module's docstring).
_ad_type: type[Any] = _AdTypeNotGiven


def use_ad_type(ad_type: type[Any]) -> None:
    """Hand nested ads back as ``ad_type`` (a mapping with ``_store``): classad.ClassAd."""
    global _ad_type
    _ad_type = ad_type


_COMPILER = Compiler(registry.compile_call, ExprTree._from_node)
registry.install(parse_cached, fn_for, python_to_node, value_to_node)

__all__ = ["ExprTree", "Compiled", "compile", "OLD", "collect_refs", "use_ad_type"]
