"""Functions that evaluate their arguments themselves, in the ad being evaluated or in others:
``ifThenElse``, ``eval``, ``unparse``, ``evalInEachContext``, ``countMatches``, ``unresolved``,
and ``debug``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.errors import ClassAdParseError
from gridbus.classad.functions.conversions import to_string
from gridbus.classad.functions.registry import EVALUATOR, lazy, list_of, strict
from gridbus.classad.operators import truth
from gridbus.classad.scope import AdValue, Ctx, ListValue, Scope
from gridbus.classad.unparse import COMPACT, unparse
from gridbus.classad.values import ERROR, MISSING, UNDEFINED


@lazy("ifThenElse", 3)
def _if_then_else(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    c = truth(args[0](scope, ctx))
    if c is True:
        return args[1](scope, ctx)
    if c is False:
        return args[2](scope, ctx)
    return c  # undefined or error: neither branch is evaluated


@lazy("eval", 1)
def _eval(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    s = to_string(args[0](scope, ctx))
    if type(s) is not str:
        return ERROR  # undefined too: there is no text to parse
    ctx.evaluation().step()  # eval() can parse text built at run time: each call counts against the budget
    try:
        node = EVALUATOR.parse(s)
    except ClassAdParseError:
        return ERROR
    return EVALUATOR.compile(node)(scope, ctx)


@lazy("unparse", 1)
def _unparse(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    # HTCondor unparses only an attribute reference, looked up by its full text in the ad being
    # evaluated (so a scoped or missing reference gives "").
    node = nodes[0]
    if type(node) is not N.AttrRef:
        return ERROR
    if node.scope:
        return ""
    raw = scope.get(node.name, node.lname)
    if raw is MISSING:
        return ""
    return unparse(EVALUATOR.stored_node(raw), COMPACT)


def _lookup_raw(node: N.AttrRef, scope: Scope, ctx: Any) -> Any:
    """The unevaluated value an attribute reference names (MY, the enclosing ads, then TARGET,
    as its scope allows), None when it names nothing."""
    scopes: list[Scope | None]
    if node.scope == "target":
        scopes = [ctx.target]
    elif node.scope == "my":
        scopes = [scope]
    else:
        scopes = []
        s: Scope | None = scope
        while s is not None:
            scopes.append(s)
            s = s.parent
        scopes.append(ctx.target)
    for s in scopes:
        if s is None:
            continue
        raw = s.get(node.name, node.lname)
        if raw is not MISSING:
            return raw
    return None


@strict("debug", 1)
def _debug(v: Any) -> Any:
    return v


def _each_context(count: bool) -> Callable:
    # HTCondor's evalInEachContext_func: an attribute reference is looked up here first and its
    # expression is evaluated in each nested ad, alone (no TARGET); the list may be a literal
    # whose elements are evaluated one by one.
    def fn(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
        expr_fn = args[0]
        node = nodes[0]
        unresolved = False
        if type(node) is N.AttrRef:
            raw = _lookup_raw(node, scope, ctx)
            if raw is not None:
                expr_fn = EVALUATOR.compile(EVALUATOR.stored_node(raw))
            else:
                unresolved = True
        lst = args[1](scope, ctx)
        if unresolved and type(nodes[1]) is N.AttrRef and (lst is UNDEFINED or type(lst) is not ListValue):
            return 0 if count else UNDEFINED  # as classad2 answers an unresolved reference here
        if type(lst) is not ListValue:
            if lst is UNDEFINED:
                return 0 if count else UNDEFINED
            return ERROR
        out = []
        for e in lst.values():
            if type(e) is not AdValue:
                out.append(UNDEFINED if e is UNDEFINED else ERROR)
                continue
            out.append(expr_fn(e.scope, Ctx(e.scope, None)))
        if count:
            return sum(1 for r in out if (r is True) or (type(r) in (int, float) and r != 0))
        return list_of(out)

    return fn


lazy("evalInEachContext", 2)(_each_context(False))
lazy("countMatches", 2)(_each_context(True))


@lazy("unresolved", 1, 2)
def _unresolved(args: list, scope: Scope, ctx: Any, nodes: list) -> Any:
    node = nodes[0]
    if type(node) is N.AttrRef:
        raw = _lookup_raw(node, scope, ctx)
        if raw is None:
            return UNDEFINED
        node = EVALUATOR.stored_node(raw)
    mine: set[str] = set()
    other: set[str] = set()
    N.collect_refs(node, mine, other)
    missing = sorted(n for n in mine if scope.get(n, n) is MISSING)
    return ",".join(missing) if missing else UNDEFINED
