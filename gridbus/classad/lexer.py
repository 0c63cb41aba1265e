"""The ClassAd lexer: text to tokens, each with its offset in the text."""

from __future__ import annotations

import re
from typing import Any

from gridbus.classad.errors import ClassAdParseError
from gridbus.classad.values import INT_MAX

# Token kinds.
INT, REAL, STR, QNAME, NAME, OP, EOF = "int", "real", "str", "qname", "name", "op", "eof"
# Digits right after a minus that only a negative literal can take: a leading zero (`-03` is -3) or
# a magnitude of 2**63 (`-9223372036854775808`). The value is (magnitude, has a leading zero); the
# parser folds it with the minus, and refuses or zeroes it where there is no minus to fold.
SIGNED = "signed"
_OCTAL_DIGITS = set("01234567")

# Longest operators first so that `=?=` is not read as `=` `?` `=`.
_OPS = sorted(
    [
        "=?=", "=!=", ">>>", "==", "!=", "<=", ">=", "<<", ">>", "&&", "||",
        "(", ")", "[", "]", "{", "}", ",", ";", ".", "?", ":", "=", "<", ">",
        "+", "-", "*", "/", "%", "!", "~", "&", "|", "^",
    ],
    key=len,
    reverse=True,
)
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>(?:\s+|//[^\n]*|/\*(?:.|\n)*?\*/)+)
  | (?P<real>(?:\d+\.\d+|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>")
  | (?P<qname>')
  | (?P<op>"""
    + "|".join(re.escape(o) for o in _OPS)
    + r")",
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "n": 10, "t": 9, "r": 13, "b": 8, "f": 12, "v": 11, "a": 7,
    "\\": 92, '"': 34, "'": 39, "?": 63,
}


class Token:
    __slots__ = ("kind", "value", "pos", "end")

    def __init__(self, kind: str, value: Any, pos: int, end: int):
        self.kind = kind
        # The value's type follows the kind (a NAME's or an OP's is a str, a number's an int or
        # a float, ...): the parser reads it after testing the kind, which no annotation can say.
        self.value: Any = value
        self.pos = pos
        self.end = end

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.pos})"


def _read_quoted(text: str, start: int, quote: str) -> tuple[str, int]:
    """Read a quoted string or name starting after its opening quote; return (value, end)."""
    out = bytearray()
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == quote:
            # HTCondor's strings are byte strings: octal escapes build UTF-8 sequences.
            return out.decode("utf-8", "replace"), i + 1
        if ch == "\\":
            i += 1
            if i >= n:
                break
            e = text[i]
            if e in "01234567":
                j = i
                limit = i + (3 if e in "0123" else 2)
                while j < n and j < limit and text[j] in "01234567":
                    j += 1
                out.append(int(text[i:j], 8) & 0xFF)
                i = j
                continue
            code = _SIMPLE_ESCAPES.get(e)
            if code is not None:
                out.append(code)
            else:  # an unknown escape stands for the character itself
                out += e.encode("utf-8")
            i += 1
            continue
        out += ch.encode("utf-8", "surrogatepass")
        i += 1
    what = "string" if quote == '"' else "quoted attribute name"
    raise ClassAdParseError(f"unterminated {what}", text, start - 1)


def tokenize(text: str) -> list[Token]:
    """All tokens of ``text`` ending with an EOF token; raises ClassAdParseError."""
    toks: list[Token] = []
    pos = 0
    n = len(text)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            if text.startswith("/*", pos):
                raise ClassAdParseError("unterminated comment", text, pos)
            raise ClassAdParseError(f"unexpected character {text[pos]!r}", text, pos)
        kind = m.lastgroup
        end = m.end()
        if kind == "ws":
            pos = end
            continue
        if kind == "int":
            digits = m.group()
            leading_zero = len(digits) > 1 and digits[0] == "0"
            if pos > 0 and text[pos - 1] == "-" and (leading_zero or int(digits) > INT_MAX):
                if end < n and (text[end] == "." or text[end].isalpha() or text[end] == "_"):
                    raise ClassAdParseError("malformed number", text, pos)
                if leading_zero and not set(digits) <= _OCTAL_DIGITS:
                    # The library scans a leading-zero number as octal digits (then reads them in
                    # decimal): an 8 or a 9 ends the number in the middle.
                    raise ClassAdParseError("malformed number", text, pos)
                toks.append(Token(SIGNED, (int(digits), leading_zero), pos, end))
                pos = end
                continue
            if leading_zero:
                # HTCondor's daemon semantics reject octal-looking integers (lexer.cpp).
                raise ClassAdParseError("integer literal with a leading zero", text, pos)
            if end < n and (text[end] == "." or text[end].isalpha() or text[end] == "_"):
                raise ClassAdParseError("malformed number", text, pos)
            number = int(digits)
            # strtoll's overflow answer, as HTCondor's lexer leaves it.
            toks.append(Token(INT, number if number <= INT_MAX else 0, pos, end))
        elif kind == "real":
            if end < n and (text[end] == "." or text[end].isalpha() or text[end] == "_"):
                raise ClassAdParseError("malformed number", text, pos)
            toks.append(Token(REAL, float(m.group()), pos, end))
        elif kind == "name":
            toks.append(Token(NAME, m.group(), pos, end))
        elif kind == "str":
            value, end = _read_quoted(text, end, '"')
            toks.append(Token(STR, value, pos, end))
        elif kind == "qname":
            value, end = _read_quoted(text, end, "'")
            toks.append(Token(QNAME, value, pos, end))
        else:
            toks.append(Token(OP, m.group(), pos, end))
        pos = end
    toks.append(Token(EOF, None, n, n))
    return toks
