"""The `if` conditions of HTCondor's submit language (and configuration language).

condor_submit accepts only simple conditions, after `$(macro)` expansion, optionally negated by `!`:

- ``defined NAME``: NAME has a non-empty value (or is one of the built-in macros);
- ``version OP X.Y[.Z]``: compare HTCondor's version (`HTCONDOR_VERSION`) with OP in ==, !=, <,
  <=, >, >=; a two-part literal compares the major and minor numbers only;
- a boolean (true/false/yes/no/t/f, any case) or a number (non-zero is true); empty is false.

Anything else is refused as HTCondor refuses it: one other word "is not a conditional", several
words are a "complex conditional" that is not supported.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gridbus.submit.errors import SubmitError

# The HTCondor release whose submit language gridbus follows (its parity oracle, htcondor 24.0.24);
# `if version >= X.Y` compares with this.
HTCONDOR_VERSION: tuple[int, int, int] = (24, 0, 24)

_VERSION = re.compile(r"^version\s+(==|!=|<=|>=|<|>)\s+(\S+)$", re.I)
_LITERAL = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")
_TRUE = {"true", "yes", "t"}
DefinedTest = Callable[[str], bool]  # does `defined NAME` hold? (the parser asks its commands so far)
_FALSE = {"false", "no", "f"}


def evaluate(expanded: str, is_defined: DefinedTest, lineno: int | None = None) -> bool:
    """The value of an `if`/`elif` condition whose macros are already expanded."""
    text = expanded.strip()
    negate = False
    if text.startswith("!"):
        negate, text = True, text[1:].strip()
    return _simple(text, is_defined, lineno, expanded.strip()) != negate


def _simple(text: str, is_defined: DefinedTest, lineno: int | None, whole: str) -> bool:
    words = text.split()
    if words and words[0].lower() == "defined":
        if len(words) == 1:
            return False
        if len(words) > 2:
            raise SubmitError(f"{whole} is not a valid if condition because complex conditionals are not supported", lineno)
        return is_defined(words[1])
    if words and words[0].lower() == "version":
        m = _VERSION.match(text)
        if not m:
            raise SubmitError(f"{whole} is not a valid if condition because complex conditionals are not supported", lineno)
        lit = _LITERAL.match(m.group(2))
        if not lit:
            raise SubmitError(f"{whole} is not a valid if condition because the version literal is invalid", lineno)
        wanted = tuple(int(x) for x in lit.groups() if x is not None)
        have = HTCONDOR_VERSION[: len(wanted)]
        return {
            "==": have == wanted, "!=": have != wanted, "<": have < wanted,
            "<=": have <= wanted, ">": have > wanted, ">=": have >= wanted,
        }[m.group(1)]
    if not words:
        return False
    if len(words) > 1:
        raise SubmitError(f"{whole} is not a valid if condition because complex conditionals are not supported", lineno)
    word = words[0].lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    try:
        return float(word) != 0.0
    except ValueError:
        raise SubmitError(f"{whole} is not a valid if condition because expression is not a conditional", lineno) from None
