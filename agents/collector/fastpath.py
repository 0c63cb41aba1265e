"""A fast predicate for the commonest constraints: a conjunction of ``Attr <op> literal``.

A collector query tests one constraint against up to 100,000 stored dicts. The general evaluator
(`gridbus.classad.compile(...).test`) costs a few microseconds per ad, mostly in setting up the
evaluation; this module turns constraints like ``Cpus >= 4 && State == "Unclaimed"`` into plain
Python comparisons on the dict. It decides an ad only where ClassAd semantics are plainly Python's:

- both sides numbers (int or float, never bool) for ``== != < <= > >=``;
- both sides ASCII strings for ``==``/``!=`` (ClassAd string equality ignores case);
- the same Python type for ``=?=``/``is`` and ``=!=``/``isnt`` (``1 =?= 1.0`` is false).

Anything else (a missing or differently spelled attribute, an expression, a bool, a list, a NaN)
is left undecided, and the whole constraint is evaluated for that ad by the general evaluator, so
the answer is always the evaluator's. A conjunct decided false makes the ad fail at once: in
ClassAds ``false && x`` is false whatever x is.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from gridbus.classad import nodes as N

Predicate = Callable[[dict[str, Any]], bool]
_MISSING = object()
_UNDECIDED = None

_NUMERIC_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=",
            "=?=": "=?=", "is": "is", "=!=": "=!=", "isnt": "isnt"}
_NUMBER = (int, float)


def _literal(node: Any) -> tuple[bool, Any]:
    while isinstance(node, N.Paren):
        node = node.inner
    if isinstance(node, N.Literal) and not node.folded and type(node.value) in (int, float, str):
        return True, node.value
    return False, None


def _attr(node: Any) -> str | None:
    while isinstance(node, N.Paren):
        node = node.inner
    if isinstance(node, N.AttrRef) and node.scope in ("", "my"):
        return node.name
    return None


def _term(node: Any) -> tuple[str, Callable[[Any], bool | None]] | None:
    """(attribute, decide) for one ``Attr op literal`` comparison, or None if it is not one."""
    while isinstance(node, N.Paren):
        node = node.inner
    if not isinstance(node, N.Binary) or node.op not in _FLIPPED:
        return None
    name, (ok, lit), op = _attr(node.left), _literal(node.right), node.op
    if name is None or not ok:
        name, (ok, lit), op = _attr(node.right), _literal(node.left), _FLIPPED[node.op]
    if name is None or not ok:
        return None
    return name, _decider(op, lit)


def _decider(op: str, lit: Any) -> Callable[[Any], bool | None]:
    if op in ("=?=", "is", "=!=", "isnt"):
        want = op in ("=?=", "is")
        lit_type = type(lit)

        def identical(v: Any) -> bool | None:
            if type(v) is not lit_type or v != v:  # another type, or NaN: the evaluator decides
                return _UNDECIDED
            return (v == lit) is want

        return identical
    if isinstance(lit, str):
        if op not in ("==", "!=") or not lit.isascii():
            return lambda v: _UNDECIDED
        folded, want = lit.lower(), op == "=="

        def string_eq(v: Any) -> bool | None:
            if type(v) is not str or not v.isascii():
                return _UNDECIDED
            return (v.lower() == folded) is want

        return string_eq
    compare = _NUMERIC_OPS[op]
    if lit != lit:  # a NaN literal
        return lambda v: _UNDECIDED
    lit_type = type(lit)

    def numeric(v: Any) -> bool | None:
        t = type(v)
        if (t is int or t is float) and v == v:
            # Mixed int/real beyond 2**53 is where Python's exact comparison and the evaluator's
            # conversion to real may differ: leave it to the evaluator.
            if t is not lit_type and (abs(v) > 2**53 or abs(lit) > 2**53):
                return _UNDECIDED
            return compare(v, lit)
        return _UNDECIDED

    return numeric


def fast_predicate(compiled: Any) -> Predicate:
    """A predicate equal to ``compiled.test`` on plain dicts, faster for simple conjunctions."""
    node = compiled.node
    while isinstance(node, N.Paren):
        node = node.inner
    operands = node.operands if isinstance(node, N.Chain) and node.op == "&&" else [node]
    terms = [_term(o) for o in operands]
    def slow(ad: dict[str, Any]) -> bool:
        # strict: a bound of the evaluation ends the Query with a sentence (limits.py), instead
        # of each ad spending the whole budget
        return compiled.test(ad, None, True)

    if not terms or any(t is None for t in terms):
        return slow
    checks = [(name, decide) for name, decide in terms]  # type: ignore[misc]  # each term's decide function takes its own kind of value

    def predicate(ad: dict[str, Any]) -> bool:
        for name, decide in checks:
            verdict = decide(ad.get(name, _MISSING))
            if verdict is None:
                return slow(ad)
            if not verdict:
                return False
        return True

    return predicate
