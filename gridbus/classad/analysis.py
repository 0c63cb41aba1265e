"""The sub-expression analysis of a Requirements expression against target ads: the condition
table of condor_q -better-analyze (HTCondor's expression analyzer).

The expression is cut into numbered steps as HTCondor numbers them: each comparison, each
logical operator (``!``, ``||``, ``&&``, a left-nested chain of ``&&`` giving one step per
operator), and each operand of a logical operator; parentheses and arithmetic make no step of
their own. A step that reads no attribute of the target is constant: it shows ``always`` or
``never`` instead of a count, and a logical operator with a constant operand reduces to its other
operand (``false && x`` is never; ``true && x`` is x). The other steps are counted: the number of
target ads for which the step is true. A logical step whose count equals one operand's reduces to
that operand (its row is left out), and an operand that does not change the result is dropped,
so the table ends with the conditions that decide the match.

:func:`numbered_steps` gives the steps as condor_q lists them under the expression, and
:func:`condition_table` the table's rows.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.classad import ClassAd
from gridbus.classad.exprtree import Compiled, ExprTree, parse_cached
from gridbus.classad.unparse import PRETTY, unparse

COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "=?=", "=!=", "is", "isnt"})
# HTCondor's logical operator codes: 1 is !, 2 is ||, 3 is &&, 4 is ?: (0: not logical).
NOT, OR, AND = 1, 2, 3
# The mark after an operand's step number in a logical step's label: its constant value (F, T),
# or nothing where it is counted.
_TRUTH = {0: "F", 1: "T", -1: ""}
_TIME = re.compile(r"\bCurrentTime\b|\btime\s*\(", re.IGNORECASE)  # what makes a value change with time


# The bounds of one analysis (its caller then shows the top-level clauses instead). Each step is
# evaluated against every slot, so an expression of thousands of conditions (a generated
# disjunction) is not analyzed step by step, nor one whose text is long (each step's text is kept),
# and the whole analysis has a time budget, as one evaluation has (gridbus.classad.limits).
MAX_STEPS = 256
MAX_TEXT = 1 << 16  # characters of the Requirements
MAX_SECONDS = 5.0


class TooManySteps(ValueError):
    pass


class Step:
    """One numbered sub-expression."""

    __slots__ = ("node", "label", "logic", "left", "right", "grip", "effective", "constant", "value",
                 "variable", "dont_care", "text", "matched")

    def __init__(self, node: N.Node, label: str, logic: int, left: int, right: int, grip: int):
        self.node = node
        self.label = label
        self.logic = logic
        self.left, self.right, self.grip = left, right, grip
        self.effective = -1  # the step this one reduces to
        self.constant = False
        self.value = -1  # a constant step's truth: 0 or 1
        self.variable = False  # its value depends on the time (CurrentTime, time()): now or not now
        self.dont_care = False  # does not change the result: left out of the table
        self.text = unparse(node, PRETTY)
        self.matched: set[int] = set()  # indexes of the target ads the step is true for

    def compiled(self) -> Compiled:
        return Compiled(self.text, self.node)  # not through compile()'s cache: these are one-off

    def make_label(self) -> str:
        if self.logic == NOT and self.left >= 0:
            return f" ! [{self.left}]"
        if self.logic in (OR, AND):
            return f"[{self.left}] {'||' if self.logic == OR else '&&'} [{self.right}]"
        return ""

    def shown(self) -> str:
        return self.label or self.make_label() or self.text


def _is_my_ref(node: N.Node, my: ClassAd) -> bool:
    """A reference to an attribute of the request ad (MY.x, or x that the ad defines)."""
    while type(node) is N.Paren:
        node = node.inner
    if type(node) is not N.AttrRef:
        return False
    return node.scope == "my" or (node.scope == "" and node.name in my)


class _Builder:
    def __init__(self, my: ClassAd):
        self.my = my
        self.steps: list[Step] = []

    def append(self, step: Step) -> int:
        if len(self.steps) >= MAX_STEPS:
            raise TooManySteps(f"the expression has more than {MAX_STEPS} conditions to analyze")
        self.steps.append(step)
        return len(self.steps) - 1

    def add(self, node: N.Node, must_store: bool) -> int:
        """The step of ``node`` (-1 if it makes none), after its operands' steps."""
        if type(node) is N.Chain:  # `a && b && c` is HTCondor's `(a && b) && c`: one step per operator
            logic = AND if node.op == "&&" else OR
            acc = self.add(node.operands[0], True)
            for k in range(1, len(node.operands)):
                right_ix = self.add(node.operands[k], True)
                acc = self.append(Step(N.Chain(node.op, node.operands[:k + 1]), "", logic, acc, right_ix, -1))
            return acc
        logic, store, children_logical = 0, must_store, False
        left: N.Node | None = None
        right: N.Node | None = None
        grip: N.Node | None = None
        label = ""
        if type(node) is N.Literal:
            label = unparse(node, PRETTY)
        elif type(node) is N.Binary:
            left, right = node.left, node.right
            if node.op in COMPARISONS:
                store = True
            elif node.op in ("&&", "||"):  # the parser makes chains; a tree built by hand may not
                logic, store, children_logical = (AND if node.op == "&&" else OR), True, True
        elif type(node) is N.Unary:
            left = node.operand
            if node.op == "!":
                logic, store, children_logical = NOT, True, True
        elif type(node) is N.Paren:
            left, store, children_logical = node.inner, False, True
        elif type(node) is N.Elvis:
            left, right = node.left, node.right
            # A default for an attribute of the request ad (MY.x ?: 0) is no condition of its own.
            right_core = right
            while type(right_core) is N.Paren:
                right_core = right_core.inner
            if _is_my_ref(left, self.my) and type(right_core) is N.Literal:
                store = False
            store = store or must_store
        elif type(node) is N.Conditional:
            left, right, grip = node.cond, node.then, node.other
        elif type(node) is N.Call:
            label = unparse(node, PRETTY) if must_store else f"{node.name}()"
        elif type(node) is N.Select:
            left = node.base if type(node.base) is not N.AttrRef else None
        elif type(node) is N.Subscript:
            left, right = node.base, node.index
        ix_left = self.add(left, children_logical) if left is not None else -1
        ix_right = self.add(right, children_logical) if right is not None else -1
        ix_grip = self.add(grip, children_logical) if grip is not None else -1
        if store:
            if left is not None and right is None and grip is None and ix_left >= 0:
                # A unary operator: its operand's step, which a ! takes over when it is the last.
                if logic == NOT and ix_left == len(self.steps) - 1:
                    last = self.steps[ix_left]
                    last.node, last.logic, last.text = node, NOT, unparse(node, PRETTY)
                    if last.label:
                        last.label = "! " + last.label
                return ix_left
            return self.append(Step(node, label, logic, ix_left, ix_right, ix_grip))
        if left is not None and right is None and grip is None:
            return ix_left
        return -1


def _steps(my: ClassAd, requirements: str) -> list[Step]:
    builder = _Builder(my)
    builder.add(parse_cached(requirements), True)
    return builder.steps


def _as_ad(my: Mapping[str, Any]) -> ClassAd | None:
    """The request as a ClassAd; None where it holds what no ad can (values off the wire that are
    not ClassAd values): the analysis is then left out, not the whole answer."""
    if isinstance(my, ClassAd):
        return my
    try:
        return ClassAd(dict(my))
    except (TypeError, ValueError):
        return None


def numbered_steps(my: Mapping[str, Any], requirements: str) -> list[str]:
    """The steps as condor_q lists them under the expression: ``[N]    : condition``."""
    ad = _as_ad(my)
    try:
        steps = _steps(ad, requirements) if ad is not None and len(requirements) <= MAX_TEXT else []
    except TooManySteps:
        return []
    lines = []
    for i, s in enumerate(steps):
        label = s.make_label()
        if not label:
            label = s.text if s.left < 0 else f"[{s.left}] {s.text}"
        lines.append(f"{f'[{i}]':<6} : {label}")
    return lines


def _mark_irrelevant(steps: list[Step], i: int) -> None:
    if i >= 0:
        steps[i].dont_care = True
        for j in (steps[i].left, steps[i].right, steps[i].grip):
            _mark_irrelevant(steps, j)


def _constants(my: ClassAd, steps: list[Step], deadline: float) -> bool:
    """Find the steps that read no target attribute, and reduce the logical steps over them
    (False: the time budget ran out)."""
    for s in steps:
        if time.monotonic() > deadline:
            return False
        s.constant = not any(my.externalRefs(ExprTree._from_node(s.node)))  # classad2's answer for none is ['']
        s.variable = bool(_TIME.search(s.text))
        if s.constant:
            s.value = 1 if s.compiled().test(my) else 0
    for s in steps:
        if s.logic == NOT and not s.label and s.left >= 0:
            operand = steps[s.left]
            s.label = f" ! [{s.left}]{_TRUTH[operand.value if operand.constant else -1]}"
        if s.logic not in (OR, AND):
            continue
        hl = steps[s.left].value if s.left >= 0 and steps[s.left].constant else -1
        hr = steps[s.right].value if s.right >= 0 and steps[s.right].constant else -1
        effective = irrelevant = -1
        if s.logic == OR:
            if hl == 1 or hr == 1:
                s.constant, s.value = True, 1
                effective, irrelevant = (s.left, s.right) if hl == 1 else (s.right, s.left)
            elif hl == 0 and hr == 0:
                s.constant, s.value = True, 0
            elif hl == 0:
                effective, irrelevant = s.right, s.left
            elif hr == 0:
                effective, irrelevant = s.left, s.right
        else:
            if hl == 0 or hr == 0:
                s.constant, s.value = True, 0
                effective, irrelevant = (s.left, s.right) if hl == 0 else (s.right, s.left)
            elif hl == 1 and hr == 1:
                s.constant, s.value = True, 1
            elif hl == 1:
                effective = s.right
            elif hr == 1:
                effective = s.left
        op = "||" if s.logic == OR else "&&"
        s.label = f"[{s.left}]{_TRUTH[hl]} {op} [{s.right}]{_TRUTH[hr]}"
        if effective >= 0:
            if irrelevant < 0:
                irrelevant = s.right if effective == s.left else s.left
            while steps[effective].effective >= 0:
                effective = steps[effective].effective
            s.effective = effective
            _mark_irrelevant(steps, irrelevant)
    return True


def _relabel(s: Step, steps: list[Step]) -> None:
    """Point a logical step at what its operands reduced to."""
    changed = False
    if s.left >= 0 and steps[s.left].effective >= 0:
        s.left, changed = steps[s.left].effective, True
    if s.right >= 0 and steps[s.right].effective >= 0:
        s.right, changed = steps[s.right].effective, True
    if s.grip >= 0 and steps[s.grip].effective >= 0:
        s.grip, changed = steps[s.grip].effective, True
    if changed:
        s.label = ""


def condition_table(my: Mapping[str, Any], requirements: str,
                    targets: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of condor_q's condition table for ``requirements`` of ``my`` over ``targets``:
    ``{"Step": n, "Matched": count (or always, never, now, not now), "Condition": text}``."""
    ad = _as_ad(my)
    if ad is None or len(requirements) > MAX_TEXT:
        return []
    deadline = time.monotonic() + MAX_SECONDS
    try:
        steps = _steps(ad, requirements)
    except TooManySteps:
        return []  # the caller shows the top-level clauses instead
    if not _constants(ad, steps, deadline):
        return []
    for s in steps:  # logical steps name what their operands reduced to
        _relabel(s, steps)
    everyone = len(targets)
    for s in steps:
        if s.effective >= 0 or s.dont_care or s.constant:
            continue
        left, right = s.left, s.right
        logical = left >= 0 and right >= 0 and s.logic in (OR, AND)
        if logical:  # decided by the operands' counts: one no target passes, or one every target passes
            nl, nr = len(steps[left].matched), len(steps[right].matched)
            effective = prune = -1
            if s.logic == AND:
                effective = left if nl == 0 else right if nr == 0 else -1
            elif nl == everyone:
                effective, prune = left, right
            elif nr == everyone:
                effective, prune = right, left
            elif nl == 0 and nr != 0:
                effective, prune = right, left
            elif nl != 0 and nr == 0:
                effective, prune = left, right
            if prune >= 0:
                _mark_irrelevant(steps, prune)
            _reduce(s, steps, effective)
        test = s.compiled().test
        for k, target in enumerate(targets):
            if test(ad, target):
                s.matched.add(k)
            if time.monotonic() > deadline:
                return []
        if logical:  # an operand of && that passes the same targets as the whole decides it
            n, nl, nr = len(s.matched), len(steps[left].matched), len(steps[right].matched)
            effective = -1
            if s.logic == AND:
                if nl == n:
                    effective = left
                    steps[right].dont_care = steps[right].dont_care or nr > n
                elif nr == n:
                    effective = right
                    steps[left].dont_care = steps[left].dont_care or nl > n
            _reduce(s, steps, effective)
    rows = []
    for i, s in enumerate(steps):
        if s.effective >= 0 or s.dont_care:
            continue
        if s.constant:
            matched: int | str = ("now" if s.value else "not now") if s.variable else ("always" if s.value else "never")
        else:
            matched = len(s.matched)
        rows.append({"Step": i, "Matched": matched, "Condition": s.shown()})
    return rows


def _reduce(s: Step, steps: list[Step], effective: int) -> None:
    """Make ``s`` reduce to step ``effective`` (to the end of its chain), or, with -1, point it at
    what its operands reduced to."""
    if effective >= 0:
        s.effective = _follow(steps, effective)
        s.label = ""
    else:
        _relabel(s, steps)


def _follow(steps: list[Step], i: int) -> int:
    while steps[i].effective >= 0:
        i = steps[i].effective
    return i


def table_text(rows: Sequence[Mapping[str, Any]], target: str = "Slot") -> str:
    """The table as condor_q prints it: a heading over the match column, then one row a step."""
    out = [" " * 7 + f"{target:>5}s", "Step   Matched  Condition", "----- --------- ---------"]
    for row in rows:
        step = f"[{int(row['Step'])}]"
        out.append(f"{step:<5} {str(row['Matched']):>9}  {row['Condition']}")
    return "\n".join(out) + "\n"
