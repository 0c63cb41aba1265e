"""Reading whole ads: the new ``[ ... ]`` form, the old ``Attr = value`` lines, JSON, and streams
of several ads; plus ``quote``/``unquote``."""

from __future__ import annotations

import enum
import io
import json
from collections.abc import Iterator
from typing import IO, Any

from gridbus.classad import nodes as N
from gridbus.classad.classad import ClassAd
from gridbus.classad.errors import ClassAdException, ClassAdParseError, note_stream_error
from gridbus.classad.exprtree import ExprTree
from gridbus.classad.lexer import NAME, OP, QNAME, STR, tokenize
from gridbus.classad.parser import parse_expression, parse_new_ad
from gridbus.classad.unparse import quote_string


class ParserType(enum.IntEnum):
    Auto = -1
    Old = 0
    XML = 1
    JSON = 2
    New = 3
    FileAuto = 4


def _ad_from_attrs(attrs: list[tuple[str, N.Node]]) -> ClassAd:
    ad = ClassAd()
    for name, node in attrs:
        ad._store(name, ExprTree._from_node(node))
    return ad


def _next_new(text: str, pos: int) -> tuple[Any, int]:
    """The next new-form ad at or after ``pos``: (ad or None, offset after it)."""
    n = len(text)
    i = _skip_space_and_comments(text, pos)
    if i >= n:
        return None, n
    if text[i] != "[":
        raise ClassAdParseError("expected '[' to start a ClassAd", text, i)
    # Tokenize from the '[' to its matching ']' only, so the rest of the stream is not read.
    end = _matching_bracket(text, i)
    chunk = text[i:end]
    try:
        attrs = parse_new_ad(chunk)
    except ClassAdParseError as exc:
        raise ClassAdParseError(exc.reason, text, i + exc.pos) from None
    return _ad_from_attrs(attrs), end


def _skip_space_and_comments(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i) or text[i] == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            break
    return i


def _matching_bracket(text: str, start: int) -> int:
    depth = 0
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            i += 1
            while i < n and text[i] != c:
                i += 2 if text[i] == "\\" else 1
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ClassAdParseError("ClassAd not closed with ']'", text, start)


def _next_old(text: str, pos: int) -> tuple[Any, int]:
    """The next old-form ad (``Attr = value`` lines up to a blank line)."""
    n = len(text)
    i = pos
    attrs: list[tuple[str, N.Node]] = []
    started = False
    while i < n:
        j = text.find("\n", i)
        line_end = n if j < 0 else j
        nxt = n if j < 0 else j + 1
        line = text[i:line_end].strip()
        if not line:
            if started:
                return _ad_from_attrs(attrs), nxt
            i = nxt
            continue
        if line.startswith("#") or line.startswith("//"):
            i = nxt
            continue
        started = True
        eq = line.find("=")
        name = line[:eq].strip() if eq > 0 else ""
        if eq <= 0 or not name:
            raise ClassAdParseError("expected 'Attr = value'", text, i)
        if name.startswith("'") and name.endswith("'") and len(name) > 1:
            name = name[1:-1]
        elif not _is_name(name):
            raise ClassAdParseError(f"bad attribute name {name!r}", text, i)
        try:
            node = parse_expression(line[eq + 1 :])
        except ClassAdParseError as exc:
            offset = i + (text[i:line_end].find("=") + 1) + exc.pos
            raise ClassAdParseError(exc.reason, text, offset) from None
        attrs.append((name, node))
        i = nxt
    if started:
        return _ad_from_attrs(attrs), n
    return None, n


def _is_name(s: str) -> bool:
    toks = tokenize(s)
    return len(toks) == 2 and toks[0].kind in (NAME, QNAME)


def _detect(text: str, pos: int) -> ParserType:
    i = _skip_space_and_comments(text, pos)
    if i < len(text) and text[i] == "[":
        return ParserType.New
    if i < len(text) and text[i] == "{":
        return ParserType.JSON
    return ParserType.Old


def _json_ads(text: str) -> Iterator[Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClassAdParseError(f"invalid JSON: {exc.msg}", text, exc.pos) from None
    for obj in data if isinstance(data, list) else [data]:
        if not isinstance(obj, dict):
            raise ClassAdParseError("a JSON ClassAd must be an object", text, 0)
        yield ClassAd(_from_json(obj))


def _from_json(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _from_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_json(x) for x in v]
    if isinstance(v, str) and v.startswith("/Expr(") and v.endswith(")/"):
        return ExprTree(v[6:-2])
    return v


def next_ad(text: str, pos: int, parser: ParserType) -> tuple[Any, int]:
    kind = _detect(text, pos) if parser in (ParserType.Auto, ParserType.FileAuto) else parser
    try:
        if kind == ParserType.New:
            return _next_new(text, pos)
        if kind == ParserType.Old:
            return _next_old(text, pos)
    except ClassAdParseError as exc:
        note_stream_error(exc)  # classad2's lastError()
        raise
    raise ClassAdException(f"parser {ParserType(kind).name} cannot read ads one by one")


def _text_of(input: Any) -> tuple[str, Any]:
    if isinstance(input, str):
        return input, None
    if hasattr(input, "read"):
        start = input.tell() if hasattr(input, "tell") else 0
        return input.read(), start
    return "".join(input), None


def parseAds(input: str | IO[str], parser: ParserType = ParserType.Auto) -> Iterator[Any]:  # noqa: N802
    """Each ad of a stream of ads in the old, new or JSON form (auto-detected by default)."""
    parser = ParserType(parser)
    text, start = _text_of(input)

    def gen() -> Iterator[Any]:
        if parser == ParserType.JSON or (parser == ParserType.Auto and _detect(text, 0) == ParserType.JSON):
            yield from _json_ads(text)
            return
        pos = 0
        while True:
            ad, end = next_ad(text, pos, parser)
            if start is not None and hasattr(input, "seek"):
                try:
                    input.seek(start + len(text[:end].encode()) if _is_binary_pos(input) else start + end)
                except (io.UnsupportedOperation, OSError):
                    pass
            if ad is None:
                return
            pos = end
            yield ad

    return gen()


def _is_binary_pos(f: Any) -> bool:
    return isinstance(f, io.TextIOWrapper)


def parseNext(input: str | IO[str], parser: ParserType = ParserType.Auto) -> Any:  # noqa: N802
    """The first ad of the input (a file advances past it); None when there is none left."""
    parser = ParserType(parser)
    if isinstance(input, str):
        ad, _ = next_ad(input, 0, parser)
        return ad
    start = input.tell()
    text = input.read()
    ad, end = next_ad(text, 0, parser)
    input.seek(start + (len(text[:end].encode()) if _is_binary_pos(input) else end))
    return ad


def parseOne(input: Any, parser: ParserType = ParserType.Auto) -> Any:  # noqa: N802
    """All ads of the input merged into one (later attributes win), as classad2 does."""
    result = ClassAd()
    for ad in parseAds(input if isinstance(input, str) or hasattr(input, "read") else "\n".join(input), parser):
        for k in ad:
            result._store(k, ad._data[k.lower()])
    return result


def quote(input: str) -> str:
    """``input`` as a ClassAd string literal."""
    if not isinstance(input, str):
        raise TypeError("quote() takes a str")
    return quote_string(input)


def unquote(input: str) -> str:
    """The value of a ClassAd string literal (the inverse of quote)."""
    if not isinstance(input, str):
        raise TypeError("unquote() takes a str")
    toks = tokenize(input)
    if len(toks) != 2 or toks[0].kind != STR:
        raise ClassAdParseError("not a single ClassAd string literal", input, 0)
    return toks[0].value


__all__ = ["ParserType", "parseAds", "parseNext", "parseOne", "quote", "unquote", "parse_new_ad"]
_unused = (NAME, OP)
