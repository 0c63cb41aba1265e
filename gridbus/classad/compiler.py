"""Compile a syntax tree to nested Python closures ``fn(scope, ctx) -> value``.

Each node becomes one closure that calls its children's closures directly, so evaluation never
walks or dispatches on a generic tree. Common shapes of matchmaking expressions (an attribute
compared with a constant, conjunctions) get specialised closures with a fast path for plain
numbers and strings that falls back to the full semantics in :mod:`operators`.

The compiler sits below the built-in functions and the ``ExprTree`` type: it is given what it
calls for them (how to compile a call, how to hold a nested ad's attribute) by the layer above,
:mod:`exprtree`, which makes the one :class:`Compiler` the package uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad import operators as O
from gridbus.classad.cnumbers import int32
from gridbus.classad.scope import AdValue, Ctx, ListValue, Scope, resolve
from gridbus.classad.values import ERROR, MISSING, UNDEFINED, AbsTime, RelTime

Fn = Callable[[Scope, Ctx], Any]
# How a call is compiled: given the Call node and the compiler for its arguments (functions.registry).
CallCompiler = Callable[[N.Call, Callable[[N.Node], Fn]], Fn]
# What a nested ad literal's table holds for each attribute: an object the evaluator resolves
# through its ``_fn`` (an ExprTree).
AttrHolder = Callable[[N.Node], Any]


def _literal(node: N.Literal) -> Fn:
    value = node.value
    if node.folded == "reltime":
        # HTCondor's folded relTime("...") literal evaluates to a plain real (literals.h).
        value = float(value.secs)

    def lit(scope: Scope, ctx: Ctx) -> Any:
        return value

    lit.const = value  # type: ignore[attr-defined]  # marks a constant for the callers that fold it
    return lit


def _attr(node: N.AttrRef) -> Fn:
    name, lname = node.name, node.lname
    if node.scope == "target":

        def target_ref(scope: Scope, ctx: Ctx) -> Any:
            t = ctx.target
            if t is None:
                return UNDEFINED
            raw = t.get(name, lname)
            if raw is MISSING:
                return UNDEFINED
            tr = type(raw)
            if tr is int or tr is str or tr is float or tr is bool:
                return raw
            return resolve(t, lname, raw, ctx.swapped())

        return target_ref
    my_only = node.scope == "my"  # MY.x looks in the current ad and its enclosing ads, never in TARGET
    is_current_time = lname == "currenttime"
    is_other = lname == "other"

    def ref(scope: Scope, ctx: Ctx) -> Any:
        s: Scope | None = scope
        while s is not None:
            raw = s.get(name, lname)
            if raw is not MISSING:
                tr = type(raw)
                if tr is int or tr is str or tr is float or tr is bool:
                    return raw
                return resolve(s, lname, raw, ctx)
            s = s.parent
        if my_only:
            return UNDEFINED
        # HTCondor's daemon semantics: a name missing from MY is looked up in TARGET (only from
        # the top-level ad; inside a nested ad a missing name stays undefined).
        t = ctx.target
        if t is not None and scope.parent is None:
            raw = t.get(name, lname)
            if raw is not MISSING:
                tr = type(raw)
                if tr is int or tr is str or tr is float or tr is bool:
                    return raw
                return resolve(t, lname, raw, ctx.swapped())
        if is_current_time:
            return int(time.time())
        if is_other and t is not None:  # `other` names the ad being matched against
            return AdValue(t, ctx.swapped())
        return UNDEFINED

    return ref


_ARITH = {"+", "-", "*", "/", "%"}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_BITWISE = {"&", "|", "^", "<<", ">>", ">>>"}

_PY_CMP = {
    "==": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def _comparison(op: str, lf: Fn, rf: Fn) -> Fn:
    pycmp = _PY_CMP[op]
    compare = O.compare
    const = getattr(rf, "const", MISSING)
    ctype = type(const)
    if ctype in (int, float):
        # `TARGET.Memory >= 1024`: compare numbers of the constant's type inline (an integer
        # against a real compares as reals: O.compare).
        def cmp_const(scope: Scope, ctx: Ctx) -> Any:
            a = lf(scope, ctx)
            if type(a) is ctype:
                return pycmp(a, const)
            return compare(op, a, const)

        return cmp_const

    def cmp(scope: Scope, ctx: Ctx) -> Any:
        a = lf(scope, ctx)
        b = rf(scope, ctx)
        ta = type(a)
        if ta is type(b) and (ta is int or ta is float):
            return pycmp(a, b)
        return compare(op, a, b)

    return cmp


def select_value(base: Any, name: str, lname: str) -> Any:
    tb = type(base)
    if tb is AdValue:
        return base.lookup(name, lname)
    if tb is ListValue:
        # `{[a=1], [a=2]}.a` selects from every element.
        out = [select_value(v, name, lname) for v in base.values()]
        return ListValue(None, out, base.scope, base.ctx)
    if base is UNDEFINED:
        return UNDEFINED
    return ERROR


def subscript_value(base: Any, index: Any) -> Any:
    tb = type(base)
    ti = type(index)
    if tb is ListValue and ti is int:
        index = int32(index)  # HTCondor takes the index as a C int
        if index < 0 or index >= len(base):
            return ERROR
        return base.item(index)
    if tb is AdValue and ti is str:
        return base.lookup(index, index.lower())
    return O.failure(base, index)


class Compiler:
    """Compiles trees; given how to compile a call and what to hold a nested ad's attributes in."""

    __slots__ = ("_call", "_hold")

    def __init__(self, call: CallCompiler, hold: AttrHolder):
        self._call = call
        self._hold = hold

    def compile(self, node: N.Node) -> Fn:
        """The closure of a tree."""
        t = type(node)
        if type(node) is N.Literal:
            return _literal(node)
        if type(node) is N.AttrRef:
            return _attr(node)
        if type(node) is N.Binary:
            return self._binary(node)
        if type(node) is N.Chain:
            return self._chain(node)
        if type(node) is N.Unary:
            return self._unary(node)
        if type(node) is N.Paren:
            return self.compile(node.inner)
        if type(node) is N.Conditional:
            return self._conditional(node)
        if type(node) is N.Elvis:
            return self._elvis(node)
        if type(node) is N.Call:
            return self._call(node, self.compile)
        if type(node) is N.ListExpr:
            return self._list(node)
        if type(node) is N.RecordExpr:
            return self._record(node)
        if type(node) is N.Select:
            return self._select(node)
        if type(node) is N.Subscript:
            return self._subscript(node)
        raise TypeError(f"cannot compile a {t.__name__}")

    def _binary(self, node: N.Binary) -> Fn:
        op = node.op
        lf = self.compile(node.left)
        rf = self.compile(node.right)
        if op in _COMPARE:
            return _comparison(op, lf, rf)
        if op in _ARITH:
            arith = O.arith
            if op == "+":

                def add(scope: Scope, ctx: Ctx) -> Any:
                    a = lf(scope, ctx)
                    b = rf(scope, ctx)
                    if type(a) is int and type(b) is int:
                        r = a + b
                        if -0x8000000000000000 <= r <= 0x7FFFFFFFFFFFFFFF:
                            return r
                    return arith("+", a, b)

                return add

            def arith_op(scope: Scope, ctx: Ctx) -> Any:
                return arith(op, lf(scope, ctx), rf(scope, ctx))

            return arith_op
        if op in _BITWISE:
            bitwise = O.bitwise

            def bit_op(scope: Scope, ctx: Ctx) -> Any:
                return bitwise(op, lf(scope, ctx), rf(scope, ctx))

            return bit_op
        identical = O.identical
        if op in ("=?=", "is"):

            def is_op(scope: Scope, ctx: Ctx) -> Any:
                return identical(lf(scope, ctx), rf(scope, ctx))

            return is_op

        def isnt_op(scope: Scope, ctx: Ctx) -> Any:
            r = identical(lf(scope, ctx), rf(scope, ctx))
            return r if r is ERROR else not r

        return isnt_op

    def _chain(self, node: N.Chain) -> Fn:
        fns = [self.compile(o) for o in node.operands]
        first, rest = fns[0], fns[1:]
        if node.op == "&&":

            def and_chain(scope: Scope, ctx: Ctx) -> Any:
                acc = first(scope, ctx)
                if acc is not True and acc is not False:
                    acc = O.truth(acc)
                for fn in rest:
                    if acc is False or acc is ERROR:
                        return acc
                    b = fn(scope, ctx)
                    if b is True:
                        continue  # true && true = true; undefined && true = undefined
                    if b is not False:
                        b = O.truth(b)
                    if b is False:
                        acc = False
                    elif b is ERROR:
                        acc = ERROR
                    elif acc is True:
                        acc = b
                return acc

            return and_chain

        def or_chain(scope: Scope, ctx: Ctx) -> Any:
            acc = first(scope, ctx)
            if acc is not True and acc is not False:
                acc = O.truth(acc)
            for fn in rest:
                if acc is True or acc is ERROR:
                    return acc
                b = fn(scope, ctx)
                if b is False:
                    continue
                if b is not True:
                    b = O.truth(b)
                if b is True:
                    acc = True
                elif b is ERROR:
                    acc = ERROR
                elif acc is False:
                    acc = b
            return acc

        return or_chain

    def _unary(self, node: N.Unary) -> Fn:
        op = node.op
        f = self.compile(node.operand)
        unary = O.unary

        def un(scope: Scope, ctx: Ctx) -> Any:
            return unary(op, f(scope, ctx))

        return un

    def _conditional(self, node: N.Conditional) -> Fn:
        cf = self.compile(node.cond)
        tf = self.compile(node.then)
        ef = self.compile(node.other)

        def cond(scope: Scope, ctx: Ctx) -> Any:
            c = cf(scope, ctx)
            if c is True:
                return tf(scope, ctx)
            if c is False:
                return ef(scope, ctx)
            c = O.truth(c)
            if c is True:
                return tf(scope, ctx)
            if c is False:
                return ef(scope, ctx)
            return c

        return cond

    def _elvis(self, node: N.Elvis) -> Fn:
        lf = self.compile(node.left)
        rf = self.compile(node.right)

        def elvis(scope: Scope, ctx: Ctx) -> Any:
            a = lf(scope, ctx)
            return rf(scope, ctx) if a is UNDEFINED else a

        return elvis

    def _list(self, node: N.ListExpr) -> Fn:
        items = [(n, self.compile(n)) for n in node.items]

        def list_value(scope: Scope, ctx: Ctx) -> Any:
            return ListValue(items, None, scope, ctx)

        return list_value

    def _record(self, node: N.RecordExpr) -> Fn:
        hold = self._hold
        table = {name.lower(): hold(value) for name, value in node.attrs}

        def record(scope: Scope, ctx: Ctx) -> Any:
            return AdValue(Scope(table, True, scope, node), ctx)

        return record

    def _select(self, node: N.Select) -> Fn:
        bf = self.compile(node.base)
        name, lname = node.name, node.lname
        inner = node.base
        while type(inner) is N.Paren:
            inner = inner.inner
        if type(inner) is N.Subscript:
            cf = self.compile(inner.base)
            xf = self.compile(inner.index)

            def select_from_subscript(scope: Scope, ctx: Ctx) -> Any:
                # HTCondor answers undefined when selecting from an ad that came out of ad["name"]
                # (the nested ad loses its scope there); a list element's ad selects normally.
                container = cf(scope, ctx)
                v = subscript_value(container, xf(scope, ctx))
                if type(container) is AdValue and type(v) is AdValue:
                    return UNDEFINED
                return select_value(v, name, lname)

            return select_from_subscript

        def select(scope: Scope, ctx: Ctx) -> Any:
            return select_value(bf(scope, ctx), name, lname)

        return select

    def _subscript(self, node: N.Subscript) -> Fn:
        bf = self.compile(node.base)
        xf = self.compile(node.index)

        def subscript(scope: Scope, ctx: Ctx) -> Any:
            return subscript_value(bf(scope, ctx), xf(scope, ctx))

        return subscript


__all__ = ["Compiler", "select_value", "subscript_value", "AbsTime", "RelTime"]
