"""Partial evaluation (ClassAd.flatten): fold in what the ad defines, keep what it does not."""

from __future__ import annotations

from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.exprtree import ExprTree
from gridbus.classad.values import MISSING


def flatten(node: N.Node, ad: Any) -> N.Node:
    if _closed(node, ad, set()):
        v = ExprTree._from_node(node).simplify(ad)
        return v._node
    if type(node) is N.AttrRef:
        return node
    if type(node) is N.Binary:
        return N.Binary(node.op, flatten(node.left, ad), flatten(node.right, ad))
    if type(node) is N.Chain:
        return N.Chain(node.op, [flatten(o, ad) for o in node.operands])
    if type(node) is N.Unary:
        return N.Unary(node.op, flatten(node.operand, ad))
    if type(node) is N.Paren:
        inner = flatten(node.inner, ad)
        return inner if type(inner) is N.Literal else N.Paren(inner)
    if type(node) is N.Conditional:
        return N.Conditional(flatten(node.cond, ad), flatten(node.then, ad), flatten(node.other, ad))
    if type(node) is N.Elvis:
        return N.Elvis(flatten(node.left, ad), flatten(node.right, ad))
    if type(node) is N.Call:
        return N.Call(node.name, [flatten(a, ad) for a in node.args])
    return node


def _closed(node: N.Node, ad: Any, seen: set[str]) -> bool:
    """Whether every attribute the tree refers to is defined by the ad (transitively)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is N.AttrRef:
            if n.scope == "target":
                return False
            raw = ad._data.get(n.lname, MISSING)
            if raw is MISSING:
                return False
            if n.lname not in seen:
                seen.add(n.lname)
                if not _closed(ad.lookup(n.lname)._node, ad, seen):
                    return False
            continue
        if type(n) is N.Call and n.lname in ("time", "random", "currenttime"):
            return False
        stack.extend(N.children(n))
    return True
