"""HTCondor's own library as the oracle, and a comparison of its values with ours.

``htcondor2`` is imported before ``classad2`` so the library runs with the daemons' semantics.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

htcondor2 = pytest.importorskip("htcondor2")
import classad2  # noqa: E402  (must come after htcondor2)

import gridbus.classad as ours  # noqa: E402


def norm(v: Any, depth: int = 0) -> Any:
    """A comparable form of a value from either library: (type, value)."""
    if isinstance(v, (ours.Value, classad2.Value)):
        return ("value", v.name)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", int(v))
    if isinstance(v, float):
        return ("real", "nan" if math.isnan(v) else v)
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, list):
        return ("list", tuple(norm(x, depth + 1) for x in v))
    if isinstance(v, (ours.ClassAd, classad2.ClassAd)):
        return ("ad", tuple(sorted((k.lower(), norm(v[k], depth + 1)) for k in v.keys())))
    if isinstance(v, (ours.ExprTree, classad2.ExprTree)):
        return ("expr", norm_expr(v))
    return (type(v).__name__, v)


def norm_expr(e: Any) -> Any:
    """Expressions compare by their one-line text with whitespace removed."""
    return "".join(repr(e).split())


def theirs_eval(text: str, ad_text: str | None = None, target_text: str | None = None) -> Any:
    e = classad2.ExprTree(text)
    scope = classad2.ClassAd(ad_text) if ad_text else None
    target = classad2.ClassAd(target_text) if target_text else None
    return e.eval(scope, target)


def ours_eval(text: str, ad_text: str | None = None, target_text: str | None = None) -> Any:
    e = ours.ExprTree(text)
    scope = ours.ClassAd(ad_text) if ad_text else None
    target = ours.ClassAd(target_text) if target_text else None
    return e.eval(scope, target)


def parses_in_theirs(text: str) -> bool:
    try:
        classad2.ExprTree(text)
    except Exception:
        return False
    return True
