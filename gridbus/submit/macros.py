"""Macro expansion in submit descriptions: `$(name)`, `$(name:default)`, `$ENV(NAME)`, `$F...(name)`.

As in condor_submit: names are case-insensitive, an undefined macro expands to the empty string,
a macro's value is itself expanded, and `$$(Attr)` is left alone (it is resolved at match time from
the slot's ad). The expander reports every name it looked up, which is how the job-ad builder
knows whether an attribute can differ from one proc to the next.
"""

from __future__ import annotations

import os
import random
import re
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
    """condor_submit's $F[pdnxbwqa](name): parts of a file name (p: its directory, d: the last
    directory's name, each with a trailing slash that b takes off; n: base name, x: extension;
    w: backslashes for slashes; q: quoted; a: made absolute; u, a URL's form, leaves a path as it is)."""
    flags = flags.lower()
    if "a" in flags:
        path = os.path.abspath(path)
    if not flags.strip("aqbuw"):
        out = path
    else:
        head, tail = os.path.split(path)
        base, ext = os.path.splitext(tail)
        out = ""
        if "p" in flags and head:
            out += head + "/"
        elif "d" in flags and head:
            out += (os.path.basename(head) or head) + "/"
        if "b" in flags:
            out = out.rstrip("/") or out
        if "n" in flags:
            out += base
        if "x" in flags:
            out += ext
    if "w" in flags:
        out = out.replace("/", "\\")
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
        if f in ("INT", "REAL", "STRING", "EVAL"):
            return self._evaluated(f, inner, depth, chain)
        if f == "CHOICE":
            return self._choice(inner, depth, chain)
        if f == "SUBSTR":
            return self._substr(inner, depth, chain)
        if f[0] == "F" and set(f[1:].lower()) <= set("pdnxqabuw"):
            value = self._value(inner, depth, chain)
            return _file_parts(f[1:], value or "")
        raise SubmitError(f"unknown macro function ${func}() in {whole!r}")

    def _evaluated(self, f: str, inner: str, depth: int, chain: tuple[str, ...]) -> str:
        """$INT(x[, fmt]), $REAL(x[, fmt]), $STRING(x[, fmt]) and $EVAL(x): ``x`` a macro's name
        or a ClassAd expression (`$INT(7/2)`), evaluated; an integer truncated, a real printed
        as "%.16G" unless ``fmt`` (printf-style) says otherwise."""
        from gridbus import classad

        text, _, fmt = inner.partition(",") if f != "EVAL" else (inner, "", "")
        name, fmt = text.strip(), fmt.strip()
        held = self._value(name, depth, chain) if _MACRO_NAME.fullmatch(name) else None
        try:
            value = classad.compile(held if held is not None else name).eval({})
        except Exception:
            value = None
        if isinstance(value, classad.Value):  # (undefined, error: an IntEnum, not a number)
            value = None
        if f == "EVAL":
            from gridbus.classad.exprtree import python_to_node
            from gridbus.classad.unparse import unparse

            return value if isinstance(value, str) else "undefined" if value is None else unparse(python_to_node(value))
        if f == "STRING":
            if isinstance(value, float):
                out = _real_text(value)
            elif isinstance(value, str | int) and not isinstance(value, bool):
                out = str(value)
            else:
                out = held if held is not None else name
            return _formatted(f, inner, fmt, out) if fmt else out
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SubmitError(f"${f}({inner}) does not name a number")
        if f == "INT":
            return _formatted(f, inner, fmt, int(value)) if fmt else str(int(value))
        return _formatted(f, inner, fmt, float(value)) if fmt else _real_text(float(value))

    def _choice(self, inner: str, depth: int, chain: tuple[str, ...]) -> str:
        """$CHOICE(index, item0, item1, ...) or $CHOICE(index, listname): the item at ``index`` (0
        where it is no number or negative); "" out of range, as HTCondor's expansion gives."""
        index_text, _, rest = inner.partition(",")
        items = [p.strip() for p in rest.split(",")]
        if len(items) == 1:  # a list held by a macro
            listed = self._value(items[0], depth, chain) if items[0] else None
            items = [p.strip() for p in listed.split(",")] if listed is not None else []
        index = max(self._number(index_text, depth, chain) or 0, 0)
        return items[index] if index < len(items) else ""

    def _number(self, text: str, depth: int, chain: tuple[str, ...]) -> int | None:
        """An argument of $CHOICE/$SUBSTR: an integer, or the name of a macro holding one."""
        text = text.strip()
        number = _int_or_none(text)
        if number is None and text:
            held = self._value(text, depth, chain)
            number = _int_or_none(held.strip()) if held is not None else None
        return number

    def _substr(self, inner: str, depth: int, chain: tuple[str, ...]) -> str:
        """$SUBSTR(name, start[, length]): part of ``name``'s value from ``start`` (from the end
        when negative); a negative ``length`` leaves that many characters off the end; "" where
        the numbers are not numbers or nothing is left, as HTCondor's expansion gives."""
        parts = [p.strip() for p in inner.split(",")]
        value = self._value(parts[0], depth, chain) if parts[0] else None
        start = self._number(parts[1], depth, chain) if len(parts) > 1 else None
        length = self._number(parts[2], depth, chain) if len(parts) > 2 else None
        if value is None or start is None or (len(parts) > 2 and length is None):
            return ""
        begin = max(len(value) + start, 0) if start < 0 else start
        if length is None:
            return value[begin:]
        end = begin + length if length >= 0 else len(value) + length
        return value[begin:end] if end > begin else ""


def _int_or_none(text: str) -> int | None:
    """An integer literal (signed), or None."""
    try:
        return int(text)
    except ValueError:
        return None


_MACRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _formatted(f: str, inner: str, fmt: str, value: object) -> str:
    """``value`` through a macro function's printf-style format, or a SubmitError naming both."""
    try:
        return fmt % value
    except (TypeError, ValueError) as exc:
        raise SubmitError(f"${f}({inner}): the format {fmt!r} cannot print {value!r} ({exc})") from None


def _real_text(value: float) -> str:
    """A real as HTCondor's macro functions print one: C's "%.16G" (2.5, 150, 1E+20)."""
    return f"{value:.16G}"
