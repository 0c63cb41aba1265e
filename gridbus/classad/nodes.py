"""The syntax tree of the ClassAd language. Trees are immutable once built and shared by caches."""

from __future__ import annotations

from typing import Any


class Node:
    __slots__ = ("depth",)
    depth: int


class Literal(Node):
    """A constant. ``folded`` marks absTime("...")/relTime("...") calls the parser turned into
    literals (HTCondor does the same; a folded relTime evaluates to a real, a library quirk)."""

    __slots__ = ("value", "folded", "text")

    def __init__(self, value: Any, folded: str = "", text: str = ""):
        self.value = value
        self.folded = folded  # "", "abstime" or "reltime"
        self.text = text  # the argument text of a folded call, printed back as written
        self.depth = 1


class AttrRef(Node):
    """An attribute reference: ``scope`` is "" (unscoped), "my" or "target"; ``scope_text`` keeps
    the case the scope was written in, for printing."""

    __slots__ = ("name", "lname", "scope", "scope_text")

    def __init__(self, name: str, scope: str = "", scope_text: str = ""):
        self.name = name
        self.lname = name.lower()
        self.scope = scope
        self.scope_text = scope_text
        self.depth = 1


class Unary(Node):
    __slots__ = ("op", "operand")

    def __init__(self, op: str, operand: Node):
        self.op = op
        self.operand = operand
        self.depth = operand.depth + 1


class Binary(Node):
    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Node, right: Node):
        self.op = op
        self.left = left
        self.right = right
        self.depth = max(left.depth, right.depth) + 1


class Chain(Node):
    """A run of the same non-strict logical operator (``a && b && c``). Held flat so that a long
    generated disjunction neither deepens the tree nor the evaluator's stack."""

    __slots__ = ("op", "operands")

    def __init__(self, op: str, operands: list[Node]):
        self.op = op
        self.operands = operands
        self.depth = max(o.depth for o in operands) + 1


class Conditional(Node):
    __slots__ = ("cond", "then", "other")

    def __init__(self, cond: Node, then: Node, other: Node):
        self.cond = cond
        self.then = then
        self.other = other
        self.depth = max(cond.depth, then.depth, other.depth) + 1


class Elvis(Node):
    __slots__ = ("left", "right")

    def __init__(self, left: Node, right: Node):
        self.left = left
        self.right = right
        self.depth = max(left.depth, right.depth) + 1


class Paren(Node):
    __slots__ = ("inner",)

    def __init__(self, inner: Node):
        self.inner = inner
        self.depth = inner.depth + 1


class Call(Node):
    __slots__ = ("name", "lname", "args")

    def __init__(self, name: str, args: list[Node]):
        self.name = name
        self.lname = name.lower()
        self.args = args
        self.depth = max((a.depth for a in args), default=0) + 1


class ListExpr(Node):
    __slots__ = ("items",)

    def __init__(self, items: list[Node]):
        self.items = items
        self.depth = max((a.depth for a in items), default=0) + 1


class RecordExpr(Node):
    """A nested ClassAd literal ``[ a = 1; b = a + 1 ]``; ``attrs`` keeps the written order."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: list[tuple[str, Node]]):
        self.attrs = attrs
        self.depth = max((n.depth for _, n in attrs), default=0) + 1


class Select(Node):
    __slots__ = ("base", "name", "lname")

    def __init__(self, base: Node, name: str):
        self.base = base
        self.name = name
        self.lname = name.lower()
        self.depth = base.depth + 1


class Subscript(Node):
    __slots__ = ("base", "index")

    def __init__(self, base: Node, index: Node):
        self.base = base
        self.index = index
        self.depth = max(base.depth, index.depth) + 1


def children(n: Node) -> list[Node]:
    """The subtrees of a node, in no promised order."""
    if type(n) is Binary or type(n) is Elvis:
        return [n.left, n.right]
    if type(n) is Chain:
        return list(n.operands)
    if type(n) is Unary:
        return [n.operand]
    if type(n) is Paren:
        return [n.inner]
    if type(n) is Conditional:
        return [n.cond, n.then, n.other]
    if type(n) is Call:
        return list(n.args)
    if type(n) is ListExpr:
        return list(n.items)
    if type(n) is RecordExpr:
        return [v for _, v in n.attrs]
    if type(n) is Select:
        return [n.base]
    if type(n) is Subscript:
        return [n.base, n.index]
    return []


def collect_refs(node: Node, my_refs: set[str], target_refs: set[str]) -> None:
    """Add the lower-case names the tree refers to: unscoped and MY. ones to ``my_refs``, TARGET.
    ones to ``target_refs``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is AttrRef:
            (target_refs if n.scope == "target" else my_refs).add(n.lname)
        else:
            stack += children(n)
