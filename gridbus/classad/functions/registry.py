"""The name -> implementation tables of the built-in functions, and the helpers every family uses.

Strict functions receive evaluated arguments; lazy ones (``ifThenElse``, ``eval``, ``unparse``...)
receive the compiled arguments with the scope and the argument nodes. An unknown function or a
wrong number of arguments evaluates to error, as in HTCondor.

The functions sit above the evaluator and import nothing of it: what they call in it (parse and
compile text built at run time, the tree of a stored or computed value) is given to them through
:data:`EVALUATOR`, which :mod:`gridbus.classad.exprtree` fills when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.limits import check_list_size, check_string
from gridbus.classad.scope import EMPTY_SCOPE, Ctx, ListValue, Scope
from gridbus.classad.values import ERROR

Fn = Callable[[Scope, Ctx], Any]


class Evaluator:
    """What the functions call in the evaluator: each attribute is set by :func:`install`."""

    parse: Callable[[str], N.Node]  # text -> tree (cached); raises ClassAdParseError
    compile: Callable[[N.Node], Fn]  # tree -> closure (cached)
    stored_node: Callable[[Any], N.Node]  # the tree of a value as an ad stores it (ExprTree, Python)
    value_node: Callable[[Any], N.Node]  # the literal tree of an evaluated value (a list, an ad)


EVALUATOR = Evaluator()


def install(
    parse: Callable[[str], N.Node],
    compile: Callable[[N.Node], Fn],  # noqa: A002 - the evaluator's word
    stored_node: Callable[[Any], N.Node],
    value_node: Callable[[Any], N.Node],
) -> None:
    """Give the functions the evaluator's entry points (called once, by the evaluator's module)."""
    EVALUATOR.parse = parse
    EVALUATOR.compile = compile
    EVALUATOR.stored_node = stored_node
    EVALUATOR.value_node = value_node


STRICT: dict[str, tuple[Callable[..., Any], int, int]] = {}
LAZY: dict[str, tuple[Callable[..., Any], int, int]] = {}

# The upper bound of a function that takes any number of arguments.
VARIADIC = 1 << 30


def _register(table: dict[str, tuple[Callable[..., Any], int, int]], name: str, lo: int, hi: int) -> Callable:
    def deco(fn: Callable) -> Callable:
        table[name.lower()] = (fn, lo, hi if hi >= 0 else lo)  # names are case-insensitive
        return fn

    return deco


def strict(name: str, lo: int, hi: int = -1) -> Callable:
    """Register a function of evaluated arguments, taking lo..hi of them (exactly lo by default)."""
    return _register(STRICT, name, lo, hi)


def lazy(name: str, lo: int, hi: int = -1) -> Callable:
    """Register a function called as fn(argfns, scope, ctx, nodes), evaluating what it needs."""
    return _register(LAZY, name, lo, hi)


def compile_call(node: N.Call, compile_node: Callable[[N.Node], Fn]) -> Fn:
    argfns = [compile_node(a) for a in node.args]
    n = len(argfns)
    spec = LAZY.get(node.lname)
    if spec is not None:
        fn, lo, hi = spec
        if not lo <= n <= hi:
            return _const_error
        nodes = node.args

        def lazy_call(scope: Scope, ctx: Any) -> Any:
            return fn(argfns, scope, ctx, nodes)

        return lazy_call
    spec = STRICT.get(node.lname)
    if spec is None or not spec[1] <= n <= spec[2]:
        return _const_error
    fn = spec[0]
    if node.lname in _GROWING:
        fn = _bounded(fn)
    # The common arities get closures without a list of arguments: calls sit on the hot path.
    if n == 0:
        return lambda scope, ctx: fn()
    if n == 1:
        a0 = argfns[0]
        return lambda scope, ctx: fn(a0(scope, ctx))
    if n == 2:
        a0, a1 = argfns
        return lambda scope, ctx: fn(a0(scope, ctx), a1(scope, ctx))
    return lambda scope, ctx: fn(*[a(scope, ctx) for a in argfns])


# The functions whose result can be longer than their arguments together (strcat(a, a) doubles,
# replaceAll squares): their strings and lists are checked against the bounds of limits.py.
_GROWING = frozenset(
    n.lower()
    for n in ("strcat", "join", "replace", "replaceAll", "regexps", "mergeEnvironment", "envV1ToV2",
              "listToArgs", "argsToList", "split", "splitUserName", "splitSlotName")
)


def _bounded(fn: Callable[..., Any]) -> Callable[..., Any]:
    def checked(*args: Any) -> Any:
        out = fn(*args)
        if type(out) is str:
            check_string(out)
        elif type(out) is ListValue:
            check_list_size(len(out))
        return out

    return checked


def _const_error(scope: Scope, ctx: Any) -> Any:
    return ERROR


def list_of(items: list, scope: Scope | None = None) -> ListValue:
    """A list value made by a function (never identical to a list literal)."""
    check_list_size(len(items))
    return ListValue(None, items, scope or EMPTY_SCOPE, Ctx(EMPTY_SCOPE, None))
