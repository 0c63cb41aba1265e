"""Partial evaluation (ClassAd.flatten): fold in what the ad defines, keep what it does not."""

from __future__ import annotations

from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.values import ERROR, MISSING, UNDEFINED


def flatten(node: N.Node, ad: Any) -> N.Node:
    from gridbus.classad.exprtree import ExprTree, value_to_node

    if _closed(node, ad, set()):
        v = ExprTree._from_node(node).simplify(ad)
        return v._node
    t = type(node)
    if t is N.AttrRef:
        return node
    if t is N.Binary:
        return N.Binary(node.op, flatten(node.left, ad), flatten(node.right, ad))  # type: ignore[attr-defined]
    if t is N.Chain:
        return N.Chain(node.op, [flatten(o, ad) for o in node.operands])  # type: ignore[attr-defined]
    if t is N.Unary:
        return N.Unary(node.op, flatten(node.operand, ad))  # type: ignore[attr-defined]
    if t is N.Paren:
        inner = flatten(node.inner, ad)  # type: ignore[attr-defined]
        return inner if type(inner) is N.Literal else N.Paren(inner)
    if t is N.Conditional:
        return N.Conditional(flatten(node.cond, ad), flatten(node.then, ad), flatten(node.other, ad))  # type: ignore[attr-defined]
    if t is N.Elvis:
        return N.Elvis(flatten(node.left, ad), flatten(node.right, ad))  # type: ignore[attr-defined]
    if t is N.Call:
        return N.Call(node.name, [flatten(a, ad) for a in node.args])  # type: ignore[attr-defined]
    _ = (value_to_node, ERROR, UNDEFINED)
    return node


def _closed(node: N.Node, ad: Any, seen: set[str]) -> bool:
    """Whether every attribute the tree refers to is defined by the ad (transitively)."""
    from gridbus.classad.classad import _children

    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is N.AttrRef:
            if n.scope == "target":  # type: ignore[attr-defined]
                return False
            raw = ad._data.get(n.lname, MISSING)  # type: ignore[attr-defined]
            if raw is MISSING:
                return False
            if n.lname not in seen:  # type: ignore[attr-defined]
                seen.add(n.lname)  # type: ignore[attr-defined]
                if not _closed(ad.lookup(n.lname)._node, ad, seen):  # type: ignore[attr-defined]
                    return False
            continue
        if type(n) is N.Call and n.lname in ("time", "random", "currenttime"):  # type: ignore[attr-defined]
            return False
        stack.extend(_children(n))
    return True
