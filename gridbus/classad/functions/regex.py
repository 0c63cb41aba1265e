"""Regular expressions: ``regexp``, ``regexpMember``, ``regexps``, ``replace`` and ``replaceAll``,
with the compiled-pattern cache the string-list functions share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

try:  # the regex package bounds a match by time; re cannot be interrupted
    import regex as _rx
except ImportError:  # pragma: no cover - a dependency; re keeps the functions working without it
    _rx = None

from gridbus.classad import limits
from gridbus.classad.functions.registry import strict
from gridbus.classad.limits import EvaluationLimitExceeded, prefix
from gridbus.classad.scope import ListValue
from gridbus.classad.values import ERROR, UNDEFINED, first_bad

_RE_CACHE: dict[tuple[str, int], Any] = {}
_OPTION_FLAGS = {"i": re.I, "I": re.I, "m": re.M, "M": re.M, "s": re.S, "S": re.S, "x": re.X, "X": re.X}
if _rx is not None:
    _OPTION_FLAGS = {k: {re.I: _rx.I, re.M: _rx.M, re.S: _rx.S, re.X: _rx.X}[v] for k, v in _OPTION_FLAGS.items()}


_COMPILE_ERRORS: tuple = (re.error, RecursionError, OverflowError, ValueError, TypeError)
if _rx is not None:
    _COMPILE_ERRORS += (_rx.error,)


class _Budgeted:
    """A compiled pattern whose matches each get the match budget (REGEX_SECONDS): a pattern that
    backtracks without end, as ``(a|aa)+$`` does on a long run of a's, fails the evaluation
    with a sentence naming the bound instead of holding the daemon."""

    __slots__ = ("rx", "groups")

    def __init__(self, rx: Any):
        self.rx = rx
        self.groups = rx.groups

    def _over(self) -> EvaluationLimitExceeded:
        return EvaluationLimitExceeded(
            f"the regular expression {prefix(self.rx.pattern)} took more than its match budget "
            f"of {limits.REGEX_SECONDS:g} s"
        )

    def search(self, target: str) -> Any:
        try:
            return self.rx.search(target, timeout=limits.REGEX_SECONDS)
        except TimeoutError:
            raise self._over() from None

    def finditer(self, target: str) -> list:
        try:
            return list(self.rx.finditer(target, timeout=limits.REGEX_SECONDS))
        except TimeoutError:
            raise self._over() from None

    def sub(self, repl: Any, target: str, count: int = 0) -> str:
        try:
            return self.rx.sub(repl, target, count=count, timeout=limits.REGEX_SECONDS)
        except TimeoutError:
            raise self._over() from None

    def fullmatch(self, target: str) -> Any:
        try:
            return self.rx.fullmatch(target, timeout=limits.REGEX_SECONDS)
        except TimeoutError:
            raise self._over() from None

    def match(self, target: str) -> Any:
        try:
            return self.rx.match(target, timeout=limits.REGEX_SECONDS)
        except TimeoutError:
            raise self._over() from None


def compile_regex(pattern: str, options: Any) -> Any:
    """The compiled pattern with HTCondor's option letters (others are ignored), None when the
    options are no string or the pattern does not compile."""
    flags = 0
    if options is not None:
        if type(options) is not str:
            return None
        for ch in options:
            flags |= _OPTION_FLAGS.get(ch, 0)
    key = (pattern, flags)
    rx = _RE_CACHE.get(key)
    if rx is None:
        try:
            if _rx is not None:
                rx = _Budgeted(_rx.compile(pattern, flags))
            else:
                rx = re.compile(pattern, flags)
        except _COMPILE_ERRORS:
            return None
        if len(_RE_CACHE) > 2000:  # patterns can come from ads: keep the cache bounded
            _RE_CACHE.clear()
        _RE_CACHE[key] = rx
    return rx


def _pattern(pattern: Any, options: Any, *operands: tuple[Any, type]) -> Any:
    """The compiled pattern, or what the function answers instead: error, else undefined, when an
    argument is one; error when the pattern or an (operand, type) pair has the wrong type or the
    pattern does not compile."""
    bad = first_bad(pattern, options, *(v for v, _ in operands))
    if bad is not None:
        return bad
    if type(pattern) is not str or any(type(v) is not t for v, t in operands):
        return ERROR
    rx = compile_regex(pattern, options)
    return ERROR if rx is None else rx


@strict("regexp", 2, 3)
def _regexp(pattern: Any, target: Any, options: Any = None) -> Any:
    rx = _pattern(pattern, options, (target, str))
    if rx is ERROR or rx is UNDEFINED:
        return rx
    return rx.search(target) is not None


@strict("regexpMember", 2, 3)
def _regexp_member(pattern: Any, lst: Any, options: Any = None) -> Any:
    rx = _pattern(pattern, options, (lst, ListValue))
    if rx is ERROR or rx is UNDEFINED:
        return rx
    for e in lst.values():
        if type(e) is not str:
            return ERROR
        if rx.search(e):
            return True
    return False


class _NoGroup(Exception):
    pass


def _expand(m: Any, template: str) -> str:
    def group(g: Any) -> str:
        i = int(g.group(1))
        if i > (m.re.groups or 0):  # (m.re is the compiled pattern of either package)
            raise _NoGroup(i)  # HTCondor answers error for a group the pattern does not have
        return m.group(i) or ""

    return re.sub(r"\\(\d)", group, template)


def _regex_sub(mode: str) -> Callable:
    def fn(pattern: Any, target: Any, subst: Any, options: Any = None) -> Any:
        rx = _pattern(pattern, options, (target, str), (subst, str))
        if rx is ERROR or rx is UNDEFINED:
            return rx
        try:
            if mode == "regexps":
                m = rx.search(target)
                return _expand(m, subst) if m else ""
            if mode == "replaceall":
                if any(m.end() == m.start() for m in rx.finditer(target)):
                    return ERROR  # HTCondor's global replace fails on an empty match
                return rx.sub(lambda m: _expand(m, subst), target)
            return rx.sub(lambda m: _expand(m, subst), target, count=1)
        except _NoGroup:
            return ERROR

    return fn


strict("regexps", 3, 4)(_regex_sub("regexps"))
strict("replace", 3, 4)(_regex_sub("replace"))
strict("replaceAll", 3, 4)(_regex_sub("replaceall"))
