"""``ClassAd``: a case-insensitive mapping of attribute to value or expression (classad2.ClassAd)."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterator, MutableMapping
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.exprtree import (
    ExprTree,
    collect_refs,
    eval_attr,
    fn_for,
    is_true,
    node_to_python,
    python_to_node,
    run,
    to_python,
    use_ad_type,
    value_to_node,
)
from gridbus.classad.flatten import flatten
from gridbus.classad.parser import parse_new_ad
from gridbus.classad.scope import Scope
from gridbus.classad.unparse import (
    COMPACT,
    OLD,
    PRETTY,
    attr_name,
    format_python,
    format_real,
    format_record,
    format_scalar,
)
from gridbus.classad.values import ERROR, MISSING, UNDEFINED, AbsTime, Value


def _normalise(value: Any) -> Any:
    """A Python value as stored in an ad; raises TypeError for what a ClassAd cannot hold."""
    t = type(value)
    if t in (int, float, str, bool) or isinstance(value, (ExprTree, ClassAd)):
        return value
    if value is None:
        return UNDEFINED
    if isinstance(value, Value):
        return value
    if isinstance(value, dict):
        return ClassAd(value)
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, _dt.datetime):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"a {type(value).__name__} cannot be a ClassAd value")


class ClassAd(MutableMapping):
    """A ClassAd. Keys are compared without regard to case and keep the case first given."""

    __slots__ = ("_data", "_names")

    def __init__(self, input: Any = None):
        self._data: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        if input is None:
            return
        if isinstance(input, str):
            for name, node in parse_new_ad(input):
                self._store(name, ExprTree._from_node(node))
            return
        # classad2 refuses a ClassAd here (TypeError); gridbus copies it, a superset that code
        # written for classad2 never reaches, and callers in gridbus rely on.
        if isinstance(input, (dict, ClassAd)):
            for k, v in input.items():
                self[k] = v if not isinstance(input, ClassAd) else input._data[k.lower()]
            return
        raise TypeError(f"input must be None, str, dict or ClassAd, not {type(input).__name__}")

    def _store(self, name: str, value: Any) -> None:
        low = name.lower()
        if low not in self._names:
            self._names[low] = name
        self._data[low] = value

    # -- mapping --------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str):
            raise TypeError("ClassAd keys are strings")
        raw = self._data[key.lower()]
        if isinstance(raw, ExprTree):
            return node_to_python(raw._node)
        if isinstance(raw, _dt.datetime):
            return raw
        return raw

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError("ClassAd keys are strings")
        if not key:
            raise ValueError("a ClassAd attribute name cannot be empty")
        self._store(key, _normalise(value))

    def __delitem__(self, key: str) -> None:
        if not isinstance(key, str):
            raise TypeError("ClassAd keys are strings")
        low = key.lower()
        del self._data[low]
        del self._names[low]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names.values()))

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._data

    def __eq__(self, other: object) -> bool:
        if type(other) is not ClassAd:
            return NotImplemented
        if self._data.keys() != other._data.keys():
            return False
        return all(str(self.lookup(k)) == str(other.lookup(k)) for k in self._data)

    __hash__ = None  # type: ignore[assignment]  # a mutable mapping, unhashable as a dict is

    def __reduce__(self) -> tuple:
        return (ClassAd, (repr(self),))

    def __str__(self) -> str:
        return format_python(self, PRETTY)

    def __repr__(self) -> str:
        return format_python(self, COMPACT)

    # -- classad2 API ---------------------------------------------------------------------
    def lookup(self, attr: str) -> ExprTree:
        """The attribute's expression (always an ExprTree); KeyError if absent."""
        if not isinstance(attr, str):
            raise TypeError("ClassAd keys are strings")
        raw = self._data[attr.lower()]
        if isinstance(raw, ExprTree):
            return raw
        return ExprTree._from_node(python_to_node(raw))

    def eval(self, attr: str) -> Any:
        """Evaluate the attribute in this ad's scope; KeyError if absent."""
        if not isinstance(attr, str):
            raise TypeError("ClassAd keys are strings")
        if attr.lower() not in self._data:
            raise KeyError(attr)
        return to_python(eval_attr(Scope(self._data, True, None, self), attr, None))

    def matches(self, ad: ClassAd) -> bool:
        """Whether ``ad``'s Requirements hold with ``ad`` as MY and this ad as TARGET."""
        if not isinstance(ad, ClassAd):
            raise TypeError("ad must be a ClassAd")
        return _requirements_hold(ad, self)

    def symmetricMatch(self, ad: ClassAd) -> bool:  # noqa: N802 - classad2's name
        if not isinstance(ad, ClassAd):
            raise TypeError("ad must be a ClassAd")
        return self.matches(ad) and ad.matches(self)

    def externalRefs(self, expr: ExprTree) -> list[str]:  # noqa: N802
        """Attributes ``expr`` refers to that this ad does not define (as written)."""
        return self._refs(expr, external=True)

    def internalRefs(self, expr: ExprTree) -> list[str]:  # noqa: N802
        """Attributes ``expr`` refers to that this ad defines."""
        return self._refs(expr, external=False)

    def _refs(self, expr: ExprTree, external: bool) -> list[str]:
        if not isinstance(expr, ExprTree):
            raise TypeError("expr must be an ExprTree")
        found: dict[str, str] = {}
        self._walk_refs(expr._node, external, found, set())
        return sorted(found.values(), key=str.lower) if found else [""]

    def _walk_refs(self, node: N.Node, external: bool, found: dict[str, str], seen: set[str]) -> None:
        refs: list[N.AttrRef] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if type(n) is N.AttrRef:
                refs.append(n)
                continue
            for child in N.children(n):
                stack.append(child)
        for r in refs:
            if r.scope == "target":
                if external:
                    found.setdefault("target." + r.lname, f"TARGET.{r.name}")
                continue
            defined = r.lname in self._data
            if defined:
                if not external:
                    found.setdefault(r.lname, r.name)
                if r.lname not in seen:  # follow internal references into their definitions
                    seen.add(r.lname)
                    self._walk_refs(self.lookup(r.lname)._node, external, found, seen)
            elif external:
                found.setdefault(r.lname, r.name)

    def flatten(self, expr: ExprTree) -> ExprTree:
        """Partially evaluate ``expr`` in this ad: what this ad defines is folded in."""
        if not isinstance(expr, ExprTree):
            raise TypeError("expr must be an ExprTree")
        return ExprTree._from_node(flatten(expr._node, self))

    def printOld(self) -> str:  # noqa: N802
        if not self._data:
            return "\n"
        return "".join(f"{attr_name(self._names[k])} = {format_python(v, OLD)}\n" for k, v in self._data.items())

    formatOld = printOld

    def printJson(self) -> str:  # noqa: N802
        return _json_ad(self, 0)

    formatJson = printJson


def _scope(ad: Any, what: str) -> Scope:
    if isinstance(ad, ClassAd):
        return Scope(ad._data, True, None, ad)
    if isinstance(ad, dict):
        return Scope(ad, False, None, ad)
    raise TypeError(f"{what} must be a ClassAd or a dict, not {type(ad).__name__}")


def _requirements_hold(my: Any, target: Any) -> bool:
    ms = _scope(my, "ad")
    raw = ms.get("Requirements", "requirements")
    if raw is MISSING:
        return False
    return is_true(eval_attr(ms, "Requirements", _scope(target, "ad")))


def symmetric_match(job: Any, machine: Any) -> bool:
    """Both Requirements true, each evaluated with TARGET = the other (ClassAds or plain dicts)."""
    return _requirements_hold(job, machine) and _requirements_hold(machine, job)


use_ad_type(ClassAd)  # eval() hands nested ads back as ClassAds (exprtree sits below this module)


# -- JSON --------------------------------------------------------------------------------------


def _json_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _json_expr(text: str) -> str:
    return '"\\/Expr(' + json.dumps(text, ensure_ascii=False)[1:-1] + ')\\/"'


def _json_value(v: Any, indent: int) -> str:
    if isinstance(v, ExprTree):
        node = v._node
        if type(node) is N.Literal and node.folded != "abstime" and type(node.value) is not AbsTime:
            return _json_value(node_to_python(node), indent)
        if type(node) is N.ListExpr:
            return _json_value(node_to_python(node), indent)
        if type(node) is N.RecordExpr:
            return _json_ad(node_to_python(node), indent)
        return _json_expr(_compact_text(v))  # any other expression is written as \/Expr(...)\/
    t = type(v)
    if t is bool or t is int:
        return format_scalar(v)  # JSON writes booleans and integers as ClassAds do
    if t is float:
        text = format_real(v, OLD)
        return _json_expr(text) if text.startswith("real(") else text
    if t is str:
        return _json_str(v)
    if v is None or v is UNDEFINED:
        return "null"
    if v is ERROR:
        return _json_expr("error")
    if isinstance(v, ClassAd):
        return _json_ad(v, indent)
    if isinstance(v, dict):
        return _json_ad(ClassAd(v), indent)
    if isinstance(v, (list, tuple)):
        if not v:
            return "[\n" + " " * indent + "]"
        pad = " " * (indent + 2)
        return "[\n" + ",\n".join(pad + _json_value(x, indent + 2) for x in v) + "\n" + " " * indent + "]"
    return _json_expr(format_python(v, COMPACT))


def _compact_text(e: ExprTree) -> str:
    return repr(e)


def _json_ad(ad: ClassAd, indent: int) -> str:
    if not ad._data:
        return "{\n" + " " * indent + "}"
    pad = " " * (indent + 2)
    items = [f"{pad}{_json_str(ad._names[k])}: {_json_value(v, indent + 2)}" for k, v in ad._data.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


__all__ = ["ClassAd", "symmetric_match", "format_record", "value_to_node", "fn_for", "run", "collect_refs"]
