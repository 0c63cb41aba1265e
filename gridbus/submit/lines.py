"""Split a submit description into its commands and queue statements.

HTCondor's grammar, as condor_submit reads it: one `command = value` per line, `#` comments,
a trailing backslash continues a line, `+Attr = value` is shorthand for `MY.Attr = value`.
A `queue` statement makes jobs with the commands above it in effect; a file may hold several,
each making its own procs in the same cluster, and commands between them change what the later
ones make. A queue statement's item list may run over several lines when written `(` ... `)`.

Also as in condor_submit:
- `include : FILE` reads FILE's lines in place (relative to the current directory; macros in the
  name are expanded); `include command : CMD` or `include : CMD |` runs CMD (split on blanks, no
  shell, as HTCondor does) and reads its output in place. Includes nest up to `MAX_INCLUDE_DEPTH`.
- `if COND` / `elif COND` (or `else if COND`) / `else` / `endif`, nested, with the conditions of
  `gridbus.submit.conditions`; lines in branches not taken are skipped unread.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

from gridbus.submit import conditions
from gridbus.submit.commands import BUILTIN_MACROS
from gridbus.submit.errors import SubmitError
from gridbus.submit.macros import Expander

_ASSIGN = re.compile(r"^\s*(\+?[A-Za-z_][A-Za-z0-9_.]*)\s*=(.*)$", re.S)
_QUEUE = re.compile(r"^\s*queue(?:\s+(.*)|\s*)$", re.I | re.S)
_INCLUDE = re.compile(r"^include(\s+command)?\s*:(.*)$", re.I | re.S)
_BRANCH = re.compile(r"^(if|elif|else\s+if|else|endif)(?:\s+(.*)|)$", re.I | re.S)

MAX_INCLUDE_DEPTH = 20
COMMAND_TIMEOUT = 60.0  # seconds an `include command` may run


@dataclass(frozen=True)
class Statement:
    key: str  # as written, with `+Attr` turned into `MY.Attr`
    value: str
    lineno: int


@dataclass
class QueueStatement:
    """One `queue` line and the commands written since the previous one (in effect from here on)."""

    statements: list[Statement]
    args: str  # "" for a bare `queue`
    lineno: int


@dataclass
class Parsed:
    statements: list[Statement]  # the commands before the first queue statement (all, when none)
    queue_args: str | None  # None: no queue statement at all; "" : a bare `queue`
    queue_lineno: int | None
    trailing: list[Statement]  # commands after the last queue statement (they apply to no job)
    more: list[QueueStatement] = field(default_factory=list)  # the second and later queue statements
    referenced: set[str] = field(default_factory=set)  # macros that if conditions and include names use


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


@dataclass
class _Source:
    """Lines being read: the description itself, or an included file's or command's output."""

    lines: Iterator[tuple[int, str]]
    name: str | None  # None for the description; else "file X" / "command X"
    at: int  # the description's line of the outermost include (what errors and statements cite)


@dataclass
class _Branch:
    lineno: int
    outer_live: bool  # were lines being read where this `if` starts?
    taken: bool  # has a branch of this if been chosen already?
    live: bool  # is the current branch being read?
    seen_else: bool = False


class _Reader:
    def __init__(self, text: str, cwd: str | None):
        self.cwd = cwd or os.getcwd()
        self.sources = [_Source(iter(_logical_lines(text)), None, 0)]
        self.branches: list[_Branch] = []
        self.values: dict[str, str] = {}  # commands so far, lower-case name -> value (for if/include)
        self.line_of_source = 0  # the current line's number within its own source
        self.referenced: set[str] = set()  # lower-case macro names if/include looked at

    # -------------------------------------------------- lines
    def next(self) -> tuple[int, str] | None:
        """The next logical line (the description's line number), reading includes in place."""
        while self.sources:
            src = self.sources[-1]
            try:
                number, line = next(src.lines)
            except StopIteration:
                self.sources.pop()
                continue
            self.line_of_source = number
            return (number if src.name is None else src.at), line
        return None

    def error(self, message: str, lineno: int) -> SubmitError:
        src = self.sources[-1] if self.sources else None
        if src is not None and src.name is not None:
            message = f"{src.name}, line {self.line_of_source}: {message}"
        return SubmitError(message, lineno)

    @property
    def live(self) -> bool:
        return not self.branches or self.branches[-1].live

    # -------------------------------------------------- macros
    def expand(self, text: str, lineno: int) -> str:
        expander = Expander(self.values.get)
        try:
            return expander.expand(text)
        except SubmitError as exc:
            raise self.error(exc.reason, lineno) from None
        finally:
            self.referenced |= {name.lower() for name in expander.used}

    def is_defined(self, name: str) -> bool:
        key = canonical_key(name).lower()
        self.referenced.add(key)
        return bool(self.values.get(key, "").strip()) or key in BUILTIN_MACROS

    # -------------------------------------------------- if / elif / else / endif
    def branch(self, word: str, rest: str, lineno: int) -> None:
        word = " ".join(word.lower().split())
        if word == "if":
            live = self.live and self._holds(rest, lineno)
            self.branches.append(_Branch(lineno, self.live, live, live))
            return
        if not self.branches:
            raise self.error(f"{word} without matching if", lineno)
        top = self.branches[-1]
        if word == "endif":
            self.branches.pop()
            return
        if top.seen_else:
            raise self.error(f"{word} is not allowed after else", lineno)
        if word == "else":
            top.seen_else = True
            top.live = top.outer_live and not top.taken
        else:  # elif, else if
            top.live = top.outer_live and not top.taken and self._holds(rest, lineno)
        top.taken = top.taken or top.live

    def _holds(self, condition: str, lineno: int) -> bool:
        if not condition.strip():
            raise self.error("if needs a condition", lineno)
        try:
            return conditions.evaluate(self.expand(condition, lineno), self.is_defined)
        except SubmitError as exc:
            raise self.error(exc.reason, lineno) from None

    # -------------------------------------------------- include
    def include(self, command: bool, target: str, lineno: int) -> None:
        if len(self.sources) > MAX_INCLUDE_DEPTH:
            raise self.error(f"includes nest deeper than {MAX_INCLUDE_DEPTH} (an include that includes itself?)", lineno)
        target = self.expand(target, lineno).strip()
        if target.endswith("|"):
            command, target = True, target[:-1].strip()
        if not target:
            raise self.error("include needs a file name or a command", lineno)
        at = lineno
        if command:
            text = self._run(target, lineno)
            name = f"include command {target!r}"
        else:
            path = target if os.path.isabs(target) else os.path.join(self.cwd, target)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as exc:
                raise self.error(f"cannot read the include file {target}: {exc.strerror}", lineno) from None
            name = f"include file {target}"
        self.sources.append(_Source(iter(_logical_lines(text)), name, at))

    def _run(self, command: str, lineno: int) -> str:
        argv = command.split()
        try:
            done = subprocess.run(argv, cwd=self.cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise self.error(f"include command {command!r}: no such program {argv[0]!r}", lineno) from None
        except subprocess.TimeoutExpired:
            raise self.error(f"include command {command!r} ran longer than {COMMAND_TIMEOUT:g} s", lineno) from None
        except OSError as exc:
            raise self.error(f"include command {command!r} cannot run: {exc.strerror}", lineno) from None
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or [""])[-1]
            raise self.error(f"include command {command!r} exited with status {done.returncode}"
                             + (f": {why}" if why else ""), lineno)
        return done.stdout


def parse(text: str, cwd: str | None = None) -> Parsed:
    """Read a submit description; includes are read relative to `cwd` (default: the current directory)."""
    reader = _Reader(text, cwd)
    queues: list[QueueStatement] = []
    pending: list[Statement] = []
    while (item := reader.next()) is not None:
        lineno, line = item
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        assignment = _ASSIGN.match(line)
        branch = None if assignment else _BRANCH.match(stripped)
        if branch:
            reader.branch(branch.group(1), branch.group(2) or "", lineno)
            continue
        if not reader.live:
            continue  # a branch not taken: HTCondor does not read it
        inc = None if assignment else _INCLUDE.match(stripped)
        if inc:
            reader.include(bool(inc.group(1)), inc.group(2), lineno)
            continue
        q = _QUEUE.match(stripped)
        if q and not assignment:
            args = (q.group(1) or "").strip()
            # An item list in parentheses may continue over the following lines.
            if "(" in args and ")" not in args[args.index("(") :]:
                body = [args]
                while (more := reader.next()) is not None:
                    body.append(more[1])
                    if ")" in more[1]:
                        break
                else:
                    raise reader.error("the queue statement's item list has no closing ')'", lineno)
                args = "\n".join(body)
            queues.append(QueueStatement(pending, args, lineno))
            pending = []
            continue
        if not assignment:
            raise reader.error(f"cannot read {stripped!r}: expected 'command = value' or a queue statement", lineno)
        st = Statement(canonical_key(assignment.group(1)), assignment.group(2).strip(), lineno)
        if st.key == "MY.":
            raise reader.error("'+' or 'MY.' must be followed by an attribute name", lineno)
        pending.append(st)
        reader.values[st.key.lower()] = st.value
    if reader.branches:
        raise SubmitError(f"endif(s) not found before end-of-file (the if on line {reader.branches[-1].lineno})",
                          reader.branches[-1].lineno)
    if not queues:
        return Parsed(pending, None, None, [], [], reader.referenced)
    first = queues[0]
    return Parsed(first.statements, first.args, first.lineno, pending, queues[1:], reader.referenced)
