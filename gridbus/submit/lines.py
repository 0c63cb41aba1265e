"""Split a submit description into its commands and its queue statement.

HTCondor's grammar, as condor_submit reads it: one `command = value` per line, `#` comments,
a trailing backslash continues a line, `+Attr = value` is shorthand for `MY.Attr = value`, and a
`queue` line ends the description. The queue statement's item list may run over several lines when
it is written `(` ... `)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gridbus.submit.errors import SubmitError

_ASSIGN = re.compile(r"^\s*(\+?[A-Za-z_][A-Za-z0-9_.]*)\s*=(.*)$", re.S)
_QUEUE = re.compile(r"^\s*queue(?:\s+(.*)|\s*)$", re.I | re.S)


@dataclass(frozen=True)
class Statement:
    key: str  # as written, with `+Attr` turned into `MY.Attr`
    value: str
    lineno: int


@dataclass
class Parsed:
    statements: list[Statement]
    queue_args: str | None  # None: no queue statement at all; "" : a bare `queue`
    queue_lineno: int | None
    trailing: list[Statement]  # commands after the queue statement (they apply to no job)


def canonical_key(key: str) -> str:
    """`+Foo` and `my.Foo` both mean `MY.Foo`, as htcondor2 stores them."""
    if key.startswith("+"):
        return "MY." + key[1:]
    if key[:3].lower() == "my.":
        return "MY." + key[3:]
    return key


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash-continued lines; each result keeps the number of its first physical line."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not pending:
            start = number
        if line.rstrip().endswith("\\") and not line.lstrip().startswith("#"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        # The continuation's indentation goes; the blank before the backslash stays.
        out.append((start, "".join(p.lstrip() if i else p for i, p in enumerate(pending))))
        pending = []
    if pending:
        out.append((start, "".join(p.lstrip() if i else p for i, p in enumerate(pending))))
    return out


def parse(text: str) -> Parsed:
    statements: list[Statement] = []
    trailing: list[Statement] = []
    queue_args: str | None = None
    queue_lineno: int | None = None
    lines = _logical_lines(text)
    i = 0
    while i < len(lines):
        lineno, line = lines[i]
        i += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        q = _QUEUE.match(stripped)
        if q and not _ASSIGN.match(stripped):
            if queue_lineno is not None:
                raise SubmitError(
                    f"gridbus takes one queue statement per submit description (the first is on line {queue_lineno})",
                    lineno,
                )
            args = (q.group(1) or "").strip()
            # An item list in parentheses may continue over the following lines.
            if "(" in args and ")" not in args[args.index("(") :]:
                body = [args]
                while i < len(lines):
                    _, more = lines[i]
                    i += 1
                    body.append(more)
                    if ")" in more:
                        break
                else:
                    raise SubmitError("the queue statement's item list has no closing ')'", lineno)
                args = "\n".join(body)
            queue_args, queue_lineno = args, lineno
            continue
        m = _ASSIGN.match(line)
        if not m:
            raise SubmitError(f"cannot read {stripped!r}: expected 'command = value' or a queue statement", lineno)
        st = Statement(canonical_key(m.group(1)), m.group(2).strip(), lineno)
        if st.key == "MY.":
            raise SubmitError("'+' or 'MY.' must be followed by an attribute name", lineno)
        (trailing if queue_lineno is not None else statements).append(st)
    return Parsed(statements, queue_args, queue_lineno, trailing)
