"""HTCondor's match-time substitution: ``$$(Attr)`` and ``$$([expression])`` in a job's attributes.

A submit file may name what the job will only know once matched: ``executable =
prog.$$(OpSys).$$(Arch)``, ``arguments = --mem $$(Memory)``, ``output = out.$$(Name)``, or an
expression, ``arguments = --mem $$([ Memory * 0.9 ])``. condor_submit leaves them as they are
(gridbus/submit/macros.py does too), and the schedd expands them when it sends the job to the slot
it was matched to, as HTCondor's schedd does:

- ``$$(Attr)`` is the slot ad's Attr as written there (a string without its quotes); ``$$(Attr:
  default)`` gives ``default`` where the slot has no Attr; ``$$(DOLLARDOLLAR)`` is a literal
  ``$$``; a name with a dot, or an Attr the slot lacks with no default, cannot be expanded;
- ``$$([expression])`` is ``string(expression)`` evaluated with the job as MY and the slot as
  TARGET (in an expression attribute, where it sits in a string literal, ``\\"`` and ``\\\\``
  inside it stand for ``"`` and ``\\``);
- attributes named ``MATCH_...`` are never expanded (they hold earlier expansions, which may hold
  a literal ``$$(``).

What was looked up is kept in the job as ``MATCH_<Attr>`` and each expanded attribute as
``MATCH_EXP_<attribute>`` (HTCondor's names), and the expanded values go in the ad the startd
runs and in what the job's file transfer reads (`as_matched`). A job whose attribute cannot be expanded is held with HTCondor's reason, ``Cannot expand $$
expression (<name>).``
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gridbus.classad import ExprTree
from gridbus.classad.unparse import OLD, format_python

MATCH_EXP = "MATCH_EXP_"
_ESCAPE = re.compile(r'\\(["\\])')  # \" and \\ in an expression's text
HOLD_CODE = 0  # HTCondor holds such a job with no reason code of its own


class CannotExpand(Exception):
    """``name`` (a macro's name, or the attribute whose expression failed) has no value here."""

    def __init__(self, name: str):
        super().__init__(f"Cannot expand $$ expression ({name}).")
        self.name = name
        self.reason = str(self)


def _expandable(attr: str, value: Any) -> str | None:
    """The text to expand of an attribute, or None when it has no ``$$(`` (the value is looked at
    first: the activation path asks this of every attribute of every job)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, ExprTree):
        text = str(value)
    else:
        return None
    return text if "$$(" in text and attr[:6].upper() != "MATCH_" else None


def needs_expansion(ad: Mapping[str, Any]) -> bool:
    """Whether any attribute of ``ad`` holds a ``$$(`` to expand (cheap: the activation path asks
    it of every job)."""
    return any(_expandable(attr, value) is not None for attr, value in ad.items())


def _macro(text: str, start: int, escaped: bool) -> tuple[int, int, str] | None:
    """(where it starts, where it ends, its name) of the first ``$$(...)`` at or after ``start``;
    a ``$$([...])`` ends at the ``])`` that closes its bracket (outside quoted strings). In an
    expression's text (``escaped``) the macro sits in a string literal, so its quotes are ``\\"``."""
    i = text.find("$$(", start)
    while i >= 0:
        j = i + 3
        if j < len(text) and text[j] == "[":
            depth, quoted, k = 0, False, j
            while k < len(text):
                ch = text[k]
                if escaped and ch == "\\" and k + 1 < len(text):
                    k += 1
                    ch = text[k]
                if quoted:
                    if ch == "\\":
                        k += 1
                    elif ch == '"':
                        quoted = False
                elif ch == '"':
                    quoted = True
                elif ch == "[":
                    depth += 1
                elif ch == "]":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            if k + 1 < len(text) and text[k + 1] == ")":
                return i, k + 2, text[j:k + 1]
        else:
            end = text.find(")", j)
            if end > j:
                return i, end + 1, text[j:end]
        i = text.find("$$(", i + 3)
    return None


def _unparsed(value: Any) -> str:
    """A slot attribute's value as substituted: a string's characters, else the ClassAd text."""
    if isinstance(value, str):
        return value
    return format_python(value, OLD)  # as HTCondor prints the slot's attribute (0.5, not 5.0E-01)


def _unescaped(expr: str) -> str:
    return _ESCAPE.sub(r"\1", expr)


def _replacement(name: str, ad: dict[str, Any], slot_ad: dict[str, Any],
                 slot: dict[str, tuple[str, Any]], changes: dict[str, Any], escaped: bool) -> str:
    if name.startswith("["):
        inner = _unescaped(name[1:-1]) if escaped else name[1:-1]
        try:
            result = ExprTree(f"string({inner})").eval(scope=ad, target=slot_ad)
        except Exception:
            raise CannotExpand(name) from None
        if not isinstance(result, str):
            raise CannotExpand(name)
        return result
    base, colon, fallback = name.partition(":")
    if base.upper() == "DOLLARDOLLAR":
        return "$$"
    if "." in base or not base:
        raise CannotExpand(name)
    if base.lower() in slot:
        real, found = slot[base.lower()]
        changes[f"MATCH_{real}"] = found
        return _unparsed(found)
    if colon:
        return fallback
    raise CannotExpand(name)


def expand(ad: dict[str, Any], slot_ad: dict[str, Any]) -> dict[str, Any]:
    """The changes ``ad`` needs for the slot ``slot_ad``: each expanded attribute, its
    ``MATCH_EXP_`` copy and a ``MATCH_<Attr>`` for each slot attribute looked up. Raises
    CannotExpand naming what has no value."""
    slot = {k.lower(): (k, v) for k, v in slot_ad.items()}
    changes: dict[str, Any] = {}
    for attr, value in ad.items():
        text = _expandable(attr, value)
        if text is None:
            continue
        pos = 0
        escaped = isinstance(value, ExprTree)
        while (found := _macro(text, pos, escaped)) is not None:
            begin, end, name = found
            replacement = _replacement(name, ad, slot_ad, slot, changes, escaped)
            text = text[:begin] + replacement + text[end:]
            pos = begin + len(replacement)  # what was put in is never expanded again
        if isinstance(value, ExprTree):
            try:
                new: Any = ExprTree(text)
            except Exception:
                raise CannotExpand(attr) from None
        else:
            new = text
        changes[attr] = new
        changes[MATCH_EXP + attr] = new
    return changes


def as_matched(ad: Mapping[str, Any]) -> dict[str, Any]:
    """``ad`` with each attribute expanded at its last activation (its ``MATCH_EXP_`` copy) in
    place of what was submitted: what the job's file transfer reads (an executable named
    ``prog.$$(OpSys)`` is sent as the slot's one)."""
    out = dict(ad)
    for name, value in ad.items():
        if name[:10].upper() == MATCH_EXP:
            out[name[10:]] = value
    return out
