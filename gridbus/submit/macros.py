"""Macro expansion in submit descriptions: `$(name)`, `$(name:default)`, `$ENV(NAME)`, `$F...(name)`.

As in condor_submit: names are case-insensitive, an undefined macro expands to the empty string,
a macro's value is itself expanded, and `$$(Attr)` is left alone (it is resolved at match time from
the slot's ad). The expander reports every name it looked up, which is how the job-ad builder
knows whether an attribute can differ from one proc to the next.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from gridbus.submit.errors import SubmitError

MAX_DEPTH = 32

Lookup = Callable[[str], "str | None"]


def _closing(text: str, open_at: int) -> int:
    """Index of the ')' matching the '(' at open_at, allowing nested parentheses."""
    depth = 0
    for j in range(open_at, len(text)):
        c = text[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
    raise SubmitError(f"unterminated macro reference in {text!r}")


def _file_parts(flags: str, path: str) -> str:
    """condor_submit's $F[pdnxqa](name): parts of a file name (d: directory, n: base name, x: extension)."""
    flags = flags.lower()
    if "a" in flags:
        path = os.path.abspath(path)
    if not flags.strip("aq"):
        out = path
    else:
        head, tail = os.path.split(path)
        base, ext = os.path.splitext(tail)
        out = ""
        if "p" in flags or "d" in flags:
            out += (head + "/") if head else ""
        if "n" in flags:
            out += base
        if "x" in flags:
            out += ext
    if "q" in flags:
        out = f'"{out}"'
    return out


class Expander:
    """Expands macros against a lookup; `used` collects every macro name (lower-cased) looked up."""

    def __init__(self, lookup: Lookup, *, env: dict[str, str] | None = None):
        self.lookup = lookup
        self.env = os.environ if env is None else env
        self.used: set[str] = set()

    def expand(self, text: str, _depth: int = 0, _chain: tuple[str, ...] = ()) -> str:
        if "$" not in text:
            return text
        if _depth > MAX_DEPTH:
            raise SubmitError(f"macro expansion is too deep (a macro refers to itself?): {' -> '.join(_chain)}")
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            c = text[i]
            if c != "$":
                out.append(c)
                i += 1
                continue
            # $$(Attr): kept for match time, verbatim.
            if text.startswith("$$(", i):
                j = _closing(text, i + 2)
                out.append(text[i : j + 1])
                i = j + 1
                continue
            k = i + 1
            while k < n and (text[k].isalnum() or text[k] == "_"):
                k += 1
            if k >= n or text[k] != "(":
                out.append(c)
                i += 1
                continue
            func = text[i + 1 : k]
            j = _closing(text, k)
            inner = text[k + 1 : j]
            out.append(self._one(func, inner, _depth, _chain, text))
            i = j + 1
        return "".join(out)

    def _value(self, name: str, _depth: int, _chain: tuple[str, ...]) -> str | None:
        key = name.strip().lower()
        self.used.add(key)
        if key in _chain:
            raise SubmitError(f"macro $({name}) refers to itself: {' -> '.join((*_chain, key))}")
        raw = self.lookup(key)
        if raw is None:
            return None
        return self.expand(raw, _depth + 1, (*_chain, key))

    def _one(self, func: str, inner: str, depth: int, chain: tuple[str, ...], whole: str) -> str:
        inner = self.expand(inner, depth + 1, chain) if "$" in inner else inner
        f = func.upper()
        if f == "":
            name, sep, default = inner.partition(":")
            if name.strip().upper() == "DOLLAR":
                return "$"
            value = self._value(name, depth, chain)
            if value is None or (value == "" and sep):
                return default if sep else ""
            return value
        if f == "ENV":
            name, sep, default = inner.partition(":")
            return self.env.get(name.strip(), default if sep else "")
        if f == "RANDOM_CHOICE":
            choices = [p.strip() for p in inner.split(",") if p.strip()]
            if not choices:
                raise SubmitError(f"$RANDOM_CHOICE() needs at least one choice in {whole!r}")
            return random.choice(choices)
        if f == "RANDOM_INTEGER":
            parts = [p.strip() for p in inner.split(",")]
            try:
                lo, hi = int(parts[0]), int(parts[1])
                step = int(parts[2]) if len(parts) > 2 else 1
            except (ValueError, IndexError):
                raise SubmitError(f"$RANDOM_INTEGER(min, max[, step]) needs integers in {whole!r}") from None
            return str(random.randrange(lo, hi + 1, step))
        if f in ("INT", "REAL"):
            name, _, fmt = inner.partition(",")
            value = self._value(name, depth, chain)
            try:
                number = float(value if value is not None else name)
            except ValueError:
                raise SubmitError(f"${f}({inner}) does not name a number") from None
            if f == "INT":
                return (fmt.strip() % int(number)) if fmt.strip() else str(int(number))
            return (fmt.strip() % number) if fmt.strip() else repr(number)
        if f[0] == "F" and set(f[1:].lower()) <= set("pdnxqa"):
            value = self._value(inner, depth, chain)
            return _file_parts(f[1:], value or "")
        raise SubmitError(f"unknown macro function ${func}() in {whole!r}")
