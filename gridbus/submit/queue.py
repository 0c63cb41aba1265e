"""The queue statement: `queue [N] [vars in|matching|from [slice] items]`, and its item expansion.

Every form condor_submit knows (HTCondor Week 2015's "What's new in HTCondor"): `queue`, `queue N`, `queue N var in (a, b)`,
`queue var matching [files|dirs] (globs)`, `queue a,b from file`, `queue a,b from ( rows )`,
`queue from command |`, and a Python-style slice `[start:stop:step]` after the keyword. The default
variable is `Item`.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass, field

from gridbus.submit.errors import SubmitError

_KEYWORDS = ("in", "from", "matching")
_SEP = re.compile(r"[\s,]+")
_SLICE = re.compile(r"^\[\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?(?::\s*(-?\d*)\s*)?\]")


@dataclass
class QueueArgs:
    count: str = ""  # as written (a number, or a macro that expands to one); "" means 1
    variables: list[str] = field(default_factory=list)
    mode: str | None = None  # None, "in", "from", "matching"
    slice: tuple[int | None, int | None, int | None] | None = None
    slice_text: str = ""
    matching_kind: str | None = None  # "files", "dirs" or None for both
    inline: str | None = None  # the text between the parentheses
    source: str | None = None  # file name, command, or the unparenthesised item list
    command: bool = False

    @property
    def names(self) -> list[str]:
        return self.variables or (["Item"] if self.mode else [])


def parse_queue(args: str, lineno: int | None = None) -> QueueArgs:
    """Parse the text after `queue` (already macro-expanded for the count part)."""
    qa = QueueArgs()
    rest = args.strip()
    m = re.match(r"^([0-9]+|\$\([^)]*\))(?=\s|$)", rest)
    if m:
        qa.count = m.group(1)
        rest = rest[m.end() :].strip()
    if not rest:
        return qa
    # Variables up to a keyword (vars are separated by commas and/or blanks).
    words = re.match(r"^((?:[A-Za-z_][A-Za-z0-9_.]*[\s,]*)*)", rest)
    head = words.group(1) if words else ""
    tokens = [t for t in _SEP.split(head) if t]
    keyword_at = next((k for k, t in enumerate(tokens) if t.lower() in _KEYWORDS), None)
    if keyword_at is None:
        raise SubmitError(
            f"cannot read the queue statement 'queue {args.strip()}': expected a count, or variables "
            "followed by 'in', 'from' or 'matching'",
            lineno,
        )
    qa.variables = tokens[:keyword_at]
    qa.mode = tokens[keyword_at].lower()
    # Consume up to and including the keyword in the original text.
    pattern = r"^" + r"[\s,]*".join(re.escape(t) for t in tokens[: keyword_at + 1])
    km = re.match(pattern, rest)
    assert km is not None
    rest = rest[km.end() :].strip()
    if qa.mode == "matching":
        mk = re.match(r"^(files|dirs)\b", rest, re.I)
        if mk:
            qa.matching_kind = mk.group(1).lower()
            rest = rest[mk.end() :].strip()
    sm = _SLICE.match(rest)
    if sm:
        qa.slice_text = sm.group(0)
        try:
            start, stop, step = (int(g) if g not in (None, "") else None for g in sm.groups())
        except ValueError:
            raise SubmitError(f"bad slice {sm.group(0)!r} in the queue statement", lineno) from None
        qa.slice = (start, stop, step)
        if step == 0:
            raise SubmitError(f"slice step cannot be zero in {sm.group(0)!r}", lineno)
        rest = rest[sm.end() :].strip()
    if rest.startswith("("):
        close = rest.rfind(")")
        if close < 0:
            raise SubmitError("the queue statement's item list has no closing ')'", lineno)
        qa.inline = rest[1:close]
        if rest[close + 1 :].strip():
            raise SubmitError(f"unexpected text after the item list: {rest[close + 1:].strip()!r}", lineno)
    else:
        if not rest:
            raise SubmitError(f"'queue ... {qa.mode}' needs items", lineno)
        if qa.mode == "from" and rest.endswith("|"):
            qa.command = True
            rest = rest[:-1].strip()
        qa.source = rest
    for v in qa.variables:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", v):
            raise SubmitError(f"bad queue variable name {v!r}", lineno)
    return qa


def count_of(qa: QueueArgs, lineno: int | None = None) -> int:
    text = qa.count.strip()
    if not text:
        return 1
    try:
        n = int(text)
    except ValueError:
        raise SubmitError(f"Invalid queue count {text!r}: it must be a whole number", lineno) from None
    if n < 0:
        raise SubmitError(f"Invalid queue count {n}: it cannot be negative", lineno)
    return n


def _split_row(line: str, names: list[str]) -> dict[str, str]:
    """One `from` row: each variable takes one field, the last takes the rest of the line."""
    row: dict[str, str] = {}
    rest = line.strip()
    for k, name in enumerate(names):
        rest = rest.lstrip(" \t,")
        if k == len(names) - 1:
            row[name] = rest.strip()
            break
        m = re.match(r"[^\s,]*", rest)
        token = m.group(0) if m else ""
        row[name] = token
        rest = rest[len(token) :]
    return row


def _rows(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def raw_items(qa: QueueArgs, cwd: str, lineno: int | None = None) -> list[dict[str, str]] | None:
    """The item rows before slicing (None when the statement has no items)."""
    if qa.mode is None:
        return None
    names = qa.names
    if qa.mode == "in":
        text = qa.inline if qa.inline is not None else (qa.source or "")
        values = [t for t in _SEP.split(text) if t]
        return [{names[0]: v, **{n: "" for n in names[1:]}} for v in values]
    if qa.mode == "matching":
        text = qa.inline if qa.inline is not None else (qa.source or "")
        seen: set[str] = set()
        found: list[str] = []
        for pattern in (t for t in _SEP.split(text) if t):
            for path in sorted(glob.glob(pattern, root_dir=cwd)):
                full = os.path.join(cwd, path)
                if qa.matching_kind == "files" and not os.path.isfile(full):
                    continue
                if qa.matching_kind == "dirs" and not os.path.isdir(full):
                    continue
                if path not in seen:
                    seen.add(path)
                    found.append(path)
        return [{names[0]: p, **{n: "" for n in names[1:]}} for p in found]
    # from: inline rows, a file, or a command's output
    if qa.inline is not None:
        lines = _rows(qa.inline)
    elif qa.command:
        try:
            done = subprocess.run(qa.source or "", shell=True, cwd=cwd, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise SubmitError(f"the queue command {qa.source!r} did not finish within 60 s", lineno) from None
        if done.returncode != 0:
            raise SubmitError(f"the queue command {qa.source!r} failed with exit code {done.returncode}", lineno)
        lines = _rows(done.stdout)
    else:
        path = os.path.join(cwd, qa.source or "")
        try:
            with open(path, encoding="utf-8") as f:
                lines = _rows(f.read())
        except OSError as exc:
            raise SubmitError(f"cannot read the queue item file {qa.source!r}: {exc.strerror}", lineno) from None
    return [_split_row(line, names) for line in lines]


def sliced(qa: QueueArgs, rows: list[dict[str, str]]) -> list[tuple[int, dict[str, str]]]:
    """(row number, row) pairs after the slice; the row number is the position before slicing."""
    indexed = list(enumerate(rows))
    if qa.slice is None:
        return indexed
    start, stop, step = qa.slice
    return indexed[slice(start, stop, step)]
