"""Printing expressions and values back as ClassAd text.

Three styles, as HTCondor prints them: ``pretty`` (``str()`` of an expression or ad: lists and
nested ads on indented lines), ``compact`` (``repr()`` and the old ``Attr = value`` format: one
line) and ``old`` (compact, but reals in ``%.16G`` style and ``=?=``/``=!=`` spelled as written in
the old syntax, strings without doubled backslashes).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

from gridbus.classad import nodes as N
from gridbus.classad.timefmt import format_abstime, format_reltime
from gridbus.classad.values import ERROR, UNDEFINED, AbsTime, RelTime, Value, datetime_secs

PRETTY, COMPACT, OLD = 0, 1, 2

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"true", "false", "undefined", "error", "is", "isnt", "parent"}


def attr_name(name: str) -> str:
    """An attribute name, quoted when it is not a plain identifier or is a reserved word."""
    if _IDENT_RE.match(name) and name.lower() not in _RESERVED:
        return name
    return "'" + _escape(name, "'", True) + "'"


def _escape(s: str, quote: str, double_backslash: bool) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        if ch == quote:
            out.append("\\" + quote)
        elif ch == "\\":
            out.append("\\\\" if double_backslash else "\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\{o:03o}")
        elif o < 0x80:
            out.append(ch)
        else:  # non-ASCII goes out as octal escapes of its UTF-8 bytes, as HTCondor writes it
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def quote_string(s: str, style: int = COMPACT) -> str:
    if style == OLD:
        # The old format escapes only quotes (classad2's printOld leaves backslashes single).
        return '"' + s.replace('"', '\\"') + '"'
    return '"' + _escape(s, '"', True) + '"'


def format_real(x: float, style: int = COMPACT) -> str:
    if math.isnan(x):
        return 'real("NaN")'
    if math.isinf(x):
        return 'real("INF")' if x > 0 else 'real("-INF")'
    if x == 0.0:  # HTCondor prints zero as 0.0 (and -0.0) in every style
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if style == OLD:
        text = f"{x:.16G}"
        if "." not in text and "E" not in text:
            text += ".0"
        return text
    return f"{x:.15E}"


def format_scalar(v: Any, style: int = COMPACT) -> str:
    t = type(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return format_real(v, style)
    if t is str:
        return quote_string(v, style)
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if t is AbsTime:
        return f'absTime("{format_abstime(v)}")'
    if t is RelTime:
        return f'relTime("{format_reltime(v.secs)}")'
    raise TypeError(f"not a scalar ClassAd value: {v!r}")


_UNARY_SPACE = " "


def unparse(node: N.Node, style: int = PRETTY, indent: int = 0) -> str:
    t = type(node)
    if type(node) is N.Literal:
        if node.folded == "reltime":
            return f'relTime("{format_reltime(node.value.secs)}")'
        return format_scalar(node.value, style)
    if type(node) is N.AttrRef:
        name = attr_name(node.name)
        if node.scope:
            return f"{node.scope_text}.{name}"
        return name
    if type(node) is N.Binary:
        op = node.op
        if style != OLD:
            op = {"=?=": "is", "=!=": "isnt"}.get(op, op)
        else:
            op = {"is": "=?=", "isnt": "=!="}.get(op, op)
        return f"{unparse(node.left, style, indent)} {op} {unparse(node.right, style, indent)}"
    if type(node) is N.Chain:
        sep = f" {node.op} "
        return sep.join(unparse(o, style, indent) for o in node.operands)
    if type(node) is N.Unary:
        return f"{_UNARY_SPACE}{node.op}{unparse(node.operand, style, indent)}"
    if type(node) is N.Paren:
        return f"({unparse(node.inner, style, indent)})"
    if type(node) is N.Conditional:
        return (
            f"{unparse(node.cond, style, indent)} ? {unparse(node.then, style, indent)}"
            f" : {unparse(node.other, style, indent)}"
        )
    if type(node) is N.Elvis:
        return f"{unparse(node.left, style, indent)} ?: {unparse(node.right, style, indent)}"
    if type(node) is N.Call:
        args = ",".join(unparse(a, style, indent) for a in node.args)
        return f"{node.name}({args})"
    if type(node) is N.ListExpr:
        return format_list([(lambda i, n=n: unparse(n, style, i)) for n in node.items], style, indent)
    if type(node) is N.RecordExpr:
        return format_record(
            [(name, (lambda i, n=n: unparse(n, style, i))) for name, n in node.attrs], style, indent
        )
    if type(node) is N.Select:
        return f"{unparse(node.base, style, indent)}.{attr_name(node.name)}"
    if type(node) is N.Subscript:
        return f"{unparse(node.base, style, indent)}[{unparse(node.index, style, indent)}]"
    raise TypeError(f"cannot print a {t.__name__}")


def format_list(items: list, style: int, indent: int) -> str:
    """``items`` are callables taking the indent of the item and returning its text."""
    if style != PRETTY:
        if not items:
            return "{  }"
        return "{ " + ",".join(f(0) for f in items) + " }"
    pad = " " * (indent + 3)
    inner = indent + 6
    body = ",\n".join(" " * inner + f(inner) for f in items)
    return "\n" + pad + "{\n" + (body + "\n" if items else "") + pad + "}"


def format_record(attrs: list, style: int, indent: int) -> str:
    """``attrs`` are (name, callable taking the indent and returning the value's text)."""
    if style != PRETTY:
        if not attrs:
            return "[  ]"
        return "[ " + "; ".join(f"{attr_name(n)} = {f(0)}" for n, f in attrs) + " ]"
    pad = " " * (indent + 4)
    inner = indent + 8
    body = "; \n".join(" " * inner + f"{attr_name(n)} = {f(inner)}" for n, f in attrs)
    return "\n" + pad + "[\n" + (body + "\n" if attrs else "") + pad + "]"


def format_python(v: Any, style: int = PRETTY, indent: int = 0) -> str:
    """Print a Python value held in an ad (literal, list, dict/ClassAd, datetime, ExprTree)."""
    if v is None:
        return "undefined"
    if isinstance(v, Value):
        return "undefined" if v is UNDEFINED else "error"
    t = type(v)
    if t in (bool, int, float, str):
        return format_scalar(v, style)
    node = getattr(v, "_node", None)
    if node is not None:  # an ExprTree
        return unparse(node, style, indent)
    if isinstance(v, (list, tuple)):
        return format_list([(lambda i, x=x: format_python(x, style, i)) for x in v], style, indent)
    data = getattr(v, "_data", None)
    if isinstance(data, dict):  # a ClassAd
        names = v._names
        return format_record(
            [(names[k], (lambda i, x=x: format_python(x, style, i))) for k, x in data.items()], style, indent
        )
    if isinstance(v, dict):
        return format_record(
            [(str(k), (lambda i, x=x: format_python(x, style, i))) for k, x in v.items()], style, indent
        )
    if isinstance(v, _dt.datetime):
        off = v.utcoffset()
        return format_scalar(
            AbsTime(datetime_secs(v), int(off.total_seconds()) if off is not None else 0)
        )
    if isinstance(v, bool):
        return format_scalar(bool(v), style)
    if isinstance(v, int):
        return format_scalar(int(v), style)
    if isinstance(v, float):
        return format_scalar(float(v), style)
    if isinstance(v, str):
        return format_scalar(str(v), style)
    raise TypeError(f"cannot print a {type(v).__name__} as a ClassAd value")
