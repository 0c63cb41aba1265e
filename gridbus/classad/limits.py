"""The bounds of one evaluation, so an expression a user sends cannot hang or exhaust a daemon.

An expression comes from anyone who may call a method: a Query constraint, a job's Requirements,
an edit. The language has no loops, so its cost is bounded by the text except where attribute
references multiply work (``[a0=1; a1=a0+a0; ...].a30``), where functions build strings and lists,
and where a regular expression backtracks. Each evaluation therefore carries:

- a memo: an attribute's value is computed once per evaluation, however often it is referenced,
  which makes the doubling chain above linear;
- a step budget (attribute evaluations and calls of ``eval``) and a time budget, checked as it goes;
- a size bound on the strings and lists functions make (values read from ads are never cut);
- a match budget for regular expressions (see ``functions/regex.py``);
- the parser's nesting depth (``MAX_DEPTH`` in ``parser.py``).

A bound that trips raises :class:`EvaluationLimitExceeded`, whose message names the bound. Where
an expression only decides a match (matchmaking, policy) the evaluation answers error, as HTCondor
answers error for an expression it cannot evaluate; where a caller asked for the evaluation (a
Query's constraint) it gets the sentence (``strict=True``).
"""

from __future__ import annotations

import time

from gridbus.classad.errors import ClassAdException

MAX_STEPS = 1_000_000  # attribute evaluations per evaluation; ordinary ads use tens
MAX_SECONDS = 1.0  # wall-clock time per evaluation
MAX_STRING = 1 << 20  # characters of a string a function makes
MAX_LIST = 1 << 16  # elements of a list a function makes
REGEX_SECONDS = 0.05  # one regular expression match
_CHECK_EVERY = 1023  # the clock is read once per this many steps (a mask)


class EvaluationLimitExceeded(ClassAdException):
    """An evaluation went past one of the bounds above; the message names it."""


class Evaluation:
    """What the contexts of one evaluation share: attributes being evaluated (to turn a cycle into
    undefined) and the budget spent so far. (The memo of values is per context: scope.Ctx.memo.)"""

    __slots__ = ("busy", "steps", "deadline", "cycles")

    def __init__(self) -> None:
        self.busy: set = set()
        self.steps = 0
        self.deadline = 0.0  # set at the first step: most evaluations never take one
        self.cycles = 0

    def step(self) -> None:
        self.steps = n = self.steps + 1
        if (n & _CHECK_EVERY) == 1:
            now = time.monotonic()
            if n == 1:
                self.deadline = now + MAX_SECONDS
            elif now > self.deadline:
                raise EvaluationLimitExceeded(
                    f"the expression took more than its time budget of {MAX_SECONDS:g} s to evaluate"
                )
        if n > MAX_STEPS:
            raise EvaluationLimitExceeded(
                f"the expression needed more than its budget of {MAX_STEPS:,} attribute evaluations"
            )


def check_string(s: str) -> str:
    if len(s) > MAX_STRING:
        raise EvaluationLimitExceeded(
            f"a function made a string of {len(s):,} characters, over the bound of {MAX_STRING:,}"
        )
    return s


def check_list_size(n: int) -> None:
    if n > MAX_LIST:
        raise EvaluationLimitExceeded(
            f"a function made a list of {n:,} elements, over the bound of {MAX_LIST:,}"
        )


def prefix(text: object, n: int = 60) -> str:
    """At most ``n`` characters of what was sent, quoted, with its length when cut (error
    sentences and log lines never repeat a long argument whole)."""
    s = text if isinstance(text, str) else repr(text)
    if len(s) <= n:
        return repr(s)
    return f"{s[:n]!r}... ({len(s):,} characters)"
