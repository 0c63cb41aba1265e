"""Candidate slots from the simple conjuncts of a job's Requirements, before any evaluation.

A top-level conjunct such as ``TARGET.Memory >= MY.RequestMemory`` or ``TARGET.Arch == "X86_64"``
compares one slot attribute with a value the job alone decides. If it is not true the whole
``&&`` chain is not true, so only the slots whose attribute satisfies it can match. Sorted arrays
(numbers) and dictionaries (strings) over the pool's slots answer such a conjunct without
evaluating anything; the full two-way test then runs only on what is left.

The filter is a superset: a slot whose value is not a plain number or string (an expression, a
boolean, an integer beyond 2**53) is always kept, and evaluation decides.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from gridbus import classad
from gridbus.adrefs import operands
from gridbus.classad import nodes as N

# `value op slot` is `slot flipped(op) value`.
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "=?=": "=?="}
_EXACT = 2**53  # integers up to here compare as reals do


@dataclass(frozen=True)
class Conjunct:
    """``slot.<name> <op> value``; ``value`` is a number or a string."""

    name: str  # lower-case
    op: str
    value: int | float | str


def _is_number(v: Any) -> TypeGuard[int | float]:
    t = type(v)
    return (t is int and -_EXACT <= v <= _EXACT) or (t is float and math.isfinite(v))


def _job_constant(node: N.Node, job_low: dict[str, Any], seen: set[str]) -> bool:
    """Whether ``node`` evaluated with the job as MY never looks at the slot."""
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is N.Literal:
            continue
        if type(n) is N.AttrRef:
            if n.scope == "target":
                return False
            lname = n.lname
            if lname not in job_low:
                if n.scope == "my":
                    continue  # MY.x missing is undefined, not a TARGET lookup
                return False  # an unscoped name missing from the job is read from the slot
            value = job_low[lname]
            if value is None or type(value) in (int, float, str, bool):
                continue
            if not isinstance(value, classad.ExprTree):
                return False  # lists and nested ads may hold expressions of their own
            if lname not in seen:
                seen.add(lname)
                stack.append(classad.compile(value).node)
        else:
            kids = None if type(n) is N.Call and n.lname == "eval" else operands(n)
            if kids is None:
                return False  # eval(), selections, lists, records: not worth proving
            stack += kids
    return True


def _unwrap(node: N.Node) -> N.Node:
    while type(node) is N.Paren:
        node = node.inner
    return node


def conjuncts(requirements: Any, job_low: dict[str, Any]) -> list[Conjunct]:
    """The indexable top-level conjuncts of a job's Requirements (an ExprTree)."""
    if not isinstance(requirements, classad.ExprTree):
        return []
    top = _unwrap(classad.compile(requirements).node)
    parts = top.operands if type(top) is N.Chain and top.op == "&&" else [top]
    out = []
    for part in parts:
        part = _unwrap(part)
        if type(part) is not N.Binary or part.op not in _FLIP:
            continue
        left, right, op = _unwrap(part.left), _unwrap(part.right), part.op
        for ref, other, slot_op in ((left, right, op), (right, left, _FLIP[op])):
            if type(ref) is not N.AttrRef:
                continue
            scope, lname = ref.scope, ref.lname
            if not (scope == "target" or (scope == "" and lname not in job_low)):
                continue
            if not _job_constant(other, job_low, set()):
                continue
            value = classad.ExprTree._from_node(other).eval(job_low)
            if _is_number(value) and slot_op != "=?=":
                out.append(Conjunct(lname, slot_op, value))
            elif type(value) is str and slot_op in ("==", "=?="):
                out.append(Conjunct(lname, slot_op, value))
            break
    return out


class AttrIndex:
    """One attribute over the static slots: numbers sorted, strings by (folded) value."""

    def __init__(self, name: str, slots: list[tuple[int, dict[str, Any]]]):
        pairs: list[tuple[float, int]] = []
        self.folded: dict[str, list[int]] = {}
        self.exact: dict[str, list[int]] = {}
        self.other: list[int] = []  # values no conjunct can rule out without evaluation
        for index, low in slots:
            v = low.get(name)
            if type(v) is str:
                self.folded.setdefault(v.lower(), []).append(index)
                self.exact.setdefault(v, []).append(index)
            elif _is_number(v):
                pairs.append((float(v), index))
            else:
                self.other.append(index)
        pairs.sort()
        self.values = [p[0] for p in pairs]
        self.indices = [p[1] for p in pairs]

    def satisfying(self, op: str, value: int | float | str) -> set[int]:
        """Slots that may satisfy ``slot op value`` (a superset; strings never equal numbers)."""
        if type(value) is str:
            hits = (self.folded.get(value.lower()) if op == "==" else self.exact.get(value)) or []
            return set(hits).union(self.other)
        v = float(value)
        values, indices = self.values, self.indices
        if op == ">=":
            found = indices[bisect.bisect_left(values, v):]
        elif op == ">":
            found = indices[bisect.bisect_right(values, v):]
        elif op == "<=":
            found = indices[: bisect.bisect_right(values, v)]
        elif op == "<":
            found = indices[: bisect.bisect_left(values, v)]
        else:  # ==
            found = indices[bisect.bisect_left(values, v): bisect.bisect_right(values, v)]
        return set(found).union(self.other)
