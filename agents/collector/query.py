"""Answering a Query: candidate selection by index, constraint test on plain dicts, projection.

The common cases avoid touching every ad: the type index narrows to the asked types, and a
constraint that is exactly ``Name == "..."`` (or ``=?=``) is answered from the name index. Any
other constraint is compiled once (``gridbus.classad.compile``, cached by text) and tested against
the stored dicts; no ClassAd object is built per ad.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gridbus.agents.collector.fastpath import fast_predicate
from gridbus.classad.limits import prefix
from gridbus.status import invalid

Predicate = Callable[[dict[str, Any]], bool]

_TRUE_TEXTS = {"", "true", "(true)", "1"}

# `Name == "x"`, `MY.Name =?= "x"`, `"x" == Name`, optionally parenthesised. ClassAd `==` on
# strings ignores case, `=?=` does not.
_NAME_EQ = re.compile(
    r'^\s*\(?\s*(?:(?:my\.)?name\s*(?P<op1>==|=\?=)\s*"(?P<v1>[^"\\]*)"'
    r'|"(?P<v2>[^"\\]*)"\s*(?P<op2>==|=\?=)\s*(?:my\.)?name)\s*\)?\s*$',
    re.IGNORECASE,
)


def constraint_text(constraint: Any) -> str:
    """The ClassAd text of a constraint given as text or as an ExprTree."""
    if constraint is None:
        return "true"
    return str(constraint).strip()


def is_trivially_true(text: str) -> bool:
    return text.lower() in _TRUE_TEXTS


def name_lookup(text: str) -> tuple[str, bool] | None:
    """``(name, case_sensitive)`` when the constraint is exactly a test of Name against a string."""
    m = _NAME_EQ.match(text)
    if not m:
        return None
    value = m.group("v1") if m.group("v1") is not None else m.group("v2")
    op = m.group("op1") or m.group("op2")
    return value, op == "=?="


def compile_constraint(text: str) -> Predicate:
    """A predicate over plain dict ads for ``text``; invalid() with the parser's reason if it is not ClassAd."""
    if is_trivially_true(text):
        return always
    try:
        from gridbus import classad
    except ImportError as exc:  # pragma: no cover - the package is part of gridbus
        raise invalid(f"cannot evaluate constraint {prefix(text)}: the ClassAd package is missing ({exc})") from exc
    compile_expr = classad.compile  # outside the try: a missing function is a bug, not bad input
    try:
        compiled = compile_expr(text)
    except Exception as exc:  # the parser's own error type; its message says where
        raise invalid(f"Constraint {prefix(text)} is not a valid ClassAd expression: {exc}") from exc
    return fast_predicate(compiled)


def always(_ad: dict[str, Any]) -> bool:
    """The predicate of a constraint that is trivially true."""
    return True


def projector(projection: Iterable[Any]) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """A function keeping only the projected attributes (names case-insensitive), or None for all."""
    names = []
    for attr in projection:
        if not isinstance(attr, str) or not attr:
            raise invalid(f"Projection must list attribute names (strings), got {attr!r}")
        names.append(attr)
    if not names:
        return None
    wanted = {n.lower() for n in names}

    def project(ad: dict[str, Any]) -> dict[str, Any]:
        out = {k: ad[k] for k in names if k in ad}
        if len(out) < len(wanted):  # some asked in another spelling: look them up by lower case
            for k, v in ad.items():
                if k.lower() in wanted and k not in out:
                    out[k] = v
        return out

    return project


def select(
    candidates: Iterable[dict[str, Any]],
    predicate: Predicate,
    limit: int,
) -> Iterator[dict[str, Any]]:
    """The candidates that pass the predicate, at most ``limit`` of them (-1: no limit)."""
    if limit == 0:
        return
    n = 0
    for ad in candidates:
        if predicate(ad):
            yield ad
            n += 1
            if n == limit:
                return
