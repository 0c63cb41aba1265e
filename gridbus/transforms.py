"""HTCondor's ClassAd transform language: a parser (`parse`) and an applier (`Transform.apply`).

The schedd applies these to every submitted job (JOB_TRANSFORM_NAMES, JOB_TRANSFORM_<Name>),
in order, before its SUBMIT_REQUIREMENT_<Name> checks. A transform is lines, top to bottom:

- ``# comment``; ``<var> = <value>``: a temporary macro, ``$(var)`` in the lines after it;
- ``REQUIREMENTS <expr>``: the transform applies only where this is true of the untransformed ad;
- ``SET <attr> <expr>``; ``DEFAULT <attr> <expr>`` (only where ``<attr>`` is absent or
  undefined); ``EVALSET <attr> <expr>`` (the value of ``<expr>``, evaluated now);
  ``EVALMACRO <var> <expr>`` (a macro holding the value);
- ``COPY <attr> <newattr>``, ``RENAME <attr> <newattr>``, ``DELETE <attr>``, and their regex forms
  ``COPY /<regex>/ <attrpat>``, ``RENAME /<regex>/ <attrpat>``, ``DELETE /<regex>/``: every
  attribute whose name the regex finds (any case), ``\\0`` the whole name and ``\\1``... its groups
  in the new name;
- ``if <cond>`` / ``elif`` / ``else`` / ``endif``, with condor_submit's conditions
  (``defined MY.<attr>``, ``defined <var>``, booleans, numbers, ``version``); ``NAME`` is noted
  and ignored.

An ``=`` or ``,`` between a keyword's two arguments is allowed (``EVALSET AcctGroup = ...``).
Macros are expanded as in submit descriptions (gridbus.submit.macros): ``$(MY.<attr>)`` is the
attribute of the ad being transformed, a string without its quotes and an expression as its text,
unevaluated (``$INT(MY.<attr>)``/``$STRING(MY.<attr>)`` evaluate); other names are the
transform's macros, then the configuration's knobs.

Where this goes past a slip HTCondor would log and skip: a line that cannot be applied (an
expression that does not parse after expansion, a new name that is no attribute name) fails the
whole transform with a `TransformError` naming its line, so a broken site rule refuses the job
instead of letting it through untransformed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gridbus import classad
from gridbus.submit import conditions
from gridbus.submit.errors import SubmitError
from gridbus.submit.jobad import classad_value
from gridbus.submit.macros import Expander

# A configuration lookup: a knob's text, or None where it is not set.
ConfigLookup = Callable[[str], "str | None"]

_ATTR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a ClassAd attribute name (and a word of a text)
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\s*=(.*)", re.S)
_TWO_ARGS = frozenset({"SET", "DEFAULT", "EVALSET", "EVALMACRO", "COPY", "RENAME"})
_REGEX_FORMS = frozenset({"COPY", "RENAME", "DELETE"})
_KEYWORDS = _TWO_ARGS | {"DELETE", "REQUIREMENTS", "NAME"}
_CONDITIONALS = frozenset({"if", "elif", "else", "endif"})


class TransformError(ValueError):
    """A transform that does not parse, or a line of it that cannot be applied to an ad."""


@dataclass(frozen=True)
class Step:
    """One line: ``keyword`` (upper-case; "VAR" for a macro assignment, "if"/"elif"/"else"/"endif"
    for a conditional), its first argument (an attribute or macro name), its compiled regex for a
    regex form, and the rest of the line, expanded when it is applied."""

    lineno: int
    keyword: str
    name: str = ""
    rest: str = ""
    regex: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Transform:
    name: str
    steps: tuple[Step, ...]
    requirements: str | None = None  # REQUIREMENTS, unexpanded
    config: ConfigLookup | None = field(default=None, compare=False)
    # The names (lower-case) its text mentions: a superset of the attributes it reads; None when
    # it reads attribute names themselves (a regex form), so any attribute may matter.
    mentions: frozenset[str] | None = field(default=None, compare=False)

    def matches(self, ad: Mapping[str, Any]) -> bool:
        """Whether the REQUIREMENTS of this transform hold for ``ad`` (true without any)."""
        return self._matches(_Ad(ad))

    def apply(self, ad: Mapping[str, Any]) -> dict[str, Any] | None:
        """``ad`` transformed (a new dict), or None where REQUIREMENTS does not hold."""
        work = _Ad(ad)
        return work.d if self._apply(work) else None

    def _matches(self, ad: _Ad) -> bool:
        if self.requirements is None:
            return True
        text = self._expander(ad, {}).expand(self.requirements) if "$" in self.requirements else self.requirements
        try:
            return classad.compile(text).test(ad.d)
        except Exception as exc:
            raise TransformError(f"{self.name}: REQUIREMENTS {text} could not be evaluated: {exc}") from None

    def _apply(self, out: _Ad) -> bool:
        """Transform ``out`` in place; False (and nothing done) where REQUIREMENTS does not hold."""
        if not self._matches(out):
            return False
        macros: dict[str, str] = {}
        expander = self._expander(out, macros)
        # Conditionals: a stack of (the enclosing block runs, one of this if's branches was taken).
        stack: list[tuple[bool, bool]] = []
        running = True
        for step in self.steps:
            try:
                running = self._control(step, stack, running, expander, out, macros)
                if step.keyword in _CONDITIONALS or not running:
                    continue
                self._run(step, out, macros, expander)
            except SubmitError as exc:  # a macro function's complaint
                raise TransformError(f"{self.name} line {step.lineno}: {exc.reason}") from None
        return True

    # ------------------------------------------------------------------ the steps
    def _control(self, step: Step, stack: list[tuple[bool, bool]], running: bool, expander: Expander,
                 ad: _Ad, macros: dict[str, str]) -> bool:
        """Whether the lines after ``step`` run (``running``: whether ``step``'s own do)."""
        kw = step.keyword
        if kw == "if":
            holds = running and self._condition(step, expander, ad, macros)
            stack.append((running, holds))
            return holds
        if kw == "elif":
            outer, taken = stack.pop()
            holds = outer and not taken and self._condition(step, expander, ad, macros)
            stack.append((outer, taken or holds))
            return holds
        if kw == "else":
            outer, taken = stack.pop()
            stack.append((outer, True))
            return outer and not taken
        if kw == "endif":
            return stack.pop()[0]
        return running

    def _condition(self, step: Step, expander: Expander, ad: _Ad, macros: dict[str, str]) -> bool:
        def is_defined(name: str) -> bool:
            if name.lower().startswith("my."):
                key = ad.key(name[3:])
                return key is not None and not _is_undefined(ad.d[key])
            return bool(self._macro(name.lower(), ad, macros))

        try:
            return conditions.evaluate(expander.expand(step.rest), is_defined)
        except SubmitError as exc:
            raise TransformError(f"{self.name} line {step.lineno}: {exc.reason}") from None

    def _run(self, step: Step, ad: _Ad, macros: dict[str, str], expander: Expander) -> None:
        kw = step.keyword
        rest = expander.expand(step.rest).strip() if "$" in step.rest else step.rest.strip()
        where = f"{self.name} line {step.lineno}"
        if kw == "VAR":
            macros[step.name.lower()] = rest
        elif kw in ("SET", "DEFAULT"):
            if kw == "DEFAULT":
                key = ad.key(step.name)
                if key is not None and not _is_undefined(ad.d[key]):
                    return
            ad.put(step.name, _value(rest, f"{where}: {kw} {step.name}"))
        elif kw in ("EVALSET", "EVALMACRO"):
            try:
                value = classad.compile(rest).eval(ad.d)
            except Exception as exc:
                raise TransformError(f"{where}: {kw} {step.name} could not evaluate {rest}: {exc}") from None
            if kw == "EVALSET":
                ad.put(step.name, _literal(value))
            else:
                macros[step.name.lower()] = value if isinstance(value, str) else _text(_literal(value))
        elif step.regex is not None:
            _regex_op(kw, ad, step.regex, rest, where)
        elif kw == "DELETE":
            ad.delete(step.name)
        elif kw in ("COPY", "RENAME"):
            ad.copy(step.name, _new_name(rest, where), rename=kw == "RENAME")
        # NAME: noted, nothing to do

    # ------------------------------------------------------------------ macros
    def _expander(self, ad: _Ad, macros: dict[str, str]) -> Expander:
        return Expander(lambda key: self._macro(key, ad, macros), env={})

    def _macro(self, key: str, ad: _Ad, macros: dict[str, str]) -> str | None:
        if key.startswith("my."):
            attr = ad.key(key[3:])
            return None if attr is None else _text(ad.d[attr])
        if key in macros:
            return macros[key]
        return self.config(key.upper()) if self.config is not None else None


def apply_all(transforms: Iterable[Transform], ad: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``ad`` through every transform in order (each that matches it as it is by then), and the
    names of those applied."""
    work = _Ad(ad)
    return work.d, [t.name for t in transforms if t._apply(work)]


def transform_changes(transforms: Iterable[Transform], ad: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What every transform in order does to ``ad``, as `changes` tells it (found from the names
    the transforms touched, not by comparing whole ads)."""
    work = _Ad(ad)
    for t in transforms:
        t._apply(work)
    return work.changes()


def reads(transforms: Iterable[Transform], ad: Mapping[str, Any]) -> frozenset[str] | None:
    """The attributes (lower-case) whose values can change what ``transforms`` do to ads like
    ``ad``: the names their text mentions, and those the expressions of ``ad`` they reach mention
    in turn (evaluating one reads the others). A superset; None where any attribute may matter.
    Two ads that agree on these are transformed alike."""
    names: set[str] = set()
    for t in transforms:
        if t.mentions is None:
            return None
        names |= t.mentions
    lowered = {k.lower(): v for k, v in ad.items()}
    pending = list(names)
    while pending:
        value = lowered.get(pending.pop())
        if isinstance(value, classad.ExprTree):
            for name in _mentions(str(value)):
                if name not in names:
                    names.add(name)
                    pending.append(name)
    return frozenset(names)


def _mentions(text: str) -> set[str]:
    return {w.lower() for w in _ATTR.findall(text)}


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What a transform did: the attributes set (new or changed, as ``after`` spells them) and the
    names of those deleted (as ``before`` spells them)."""
    was = {k.lower(): k for k in before}
    changed: dict[str, Any] = {}
    for key, value in after.items():
        old = was.pop(key.lower(), None)
        if old is None or old != key or not _same(before[old], value):
            changed[key] = value
    return changed, list(was.values())


# ---------------------------------------------------------------------- parsing
def parse(name: str, text: str, config: ConfigLookup | None = None) -> Transform:
    """A transform from its rules; ``name`` names it in every error (e.g. JOB_TRANSFORM_Big)."""
    if not isinstance(text, str):
        raise TransformError(f"{name} must be text (transform rules), not {type(text).__name__}")
    if text.lstrip().startswith("["):
        raise TransformError(f"{name} is in the earlier New ClassAds form of transforms ([ set_X = ...; ]), which "
                             "HTCondor converts and gridbus does not: write it in the transform language "
                             "(SET, DEFAULT, COPY, RENAME, DELETE, EVALSET)")
    steps: list[Step] = []
    requirements: str | None = None
    depth = 0
    for lineno, line in _lines(text):
        where = f"{name} line {lineno}"
        first, after = (line.split(None, 1) + [""])[:2]
        word = first.lower()
        if word in _CONDITIONALS:
            if word in ("if", "elif") and not after.strip():
                raise TransformError(f"{where}: {word} needs a condition")
            if word != "if" and depth == 0:
                raise TransformError(f"{where}: {word} without an if")
            depth += 1 if word == "if" else -1 if word == "endif" else 0
            steps.append(Step(lineno, word, rest=after.strip()))
            continue
        assign = _ASSIGN.fullmatch(line)
        if assign:
            steps.append(Step(lineno, "VAR", assign.group(1), assign.group(2).strip()))
            continue
        kw = first.upper()
        if kw not in _KEYWORDS:
            if kw in ("TRANSFORM", "UNIVERSE"):
                raise TransformError(f"{where}: {kw} is a keyword of condor_transform_ads and the job router, "
                                     "not of a job transform")
            raise TransformError(f"{where}: {first} is not a valid transform keyword")
        after = after.strip()
        if kw == "REQUIREMENTS":
            if not after:
                raise TransformError(f"{where}: REQUIREMENTS needs an expression")
            if requirements is not None:
                raise TransformError(f"{where}: a transform has one REQUIREMENTS")
            _check_expr(after, where, kw)
            requirements = after
            continue
        if kw == "NAME":
            continue
        steps.append(_keyword_step(kw, after, lineno, where))
    if depth:
        raise TransformError(f"{name}: an if has no endif")
    mentions = _mentions(requirements or "")
    for step in steps:
        mentions |= _mentions(step.name) | _mentions(step.rest)
    by_name = any(step.regex is not None for step in steps)
    return Transform(name, tuple(steps), requirements, config, None if by_name else frozenset(mentions))


def _keyword_step(kw: str, after: str, lineno: int, where: str) -> Step:
    if kw in _REGEX_FORMS and after.startswith("/"):
        pattern, rest = _regex_arg(after, where)
        rest = _skip_separator(rest)
        if kw != "DELETE" and not rest:
            raise TransformError(f"{where}: {kw} /regex/ needs a new attribute name pattern")
        return Step(lineno, kw, pattern.pattern, rest, pattern)
    m = _ATTR.match(after)
    if not m:
        raise TransformError(f"{where}: {kw} needs an attribute name, got {after.split()[0] if after else 'nothing'}")
    attr, rest = m.group(0), after[m.end():]
    if rest and not (rest[0].isspace() or rest[0] in "=,"):
        raise TransformError(f"{where}: {kw}: {attr + rest.split()[0]} is not an attribute name")
    rest = _skip_separator(rest)
    if kw in _TWO_ARGS and not rest:
        raise TransformError(f"{where}: {kw} needs 2 arguments")
    if kw in ("SET", "DEFAULT", "EVALSET", "EVALMACRO"):
        _check_expr(rest, where, f"{kw} {attr}")
    elif kw in ("COPY", "RENAME") and "$" not in rest:
        _new_name(rest, where)
    return Step(lineno, kw, attr, rest)


def _lines(text: str) -> Iterable[tuple[int, str]]:
    """The non-empty, non-comment lines with their numbers, a trailing backslash joining the next."""
    pending, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = n
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, (pending + line).strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def _regex_arg(after: str, where: str) -> tuple[re.Pattern[str], str]:
    """``/regex/`` at the start of ``after`` (a ``\\/`` inside is a slash), compiled to match any case."""
    i = 1
    while i < len(after) and after[i] != "/":
        i += 2 if after[i] == "\\" else 1
    if i >= len(after):
        raise TransformError(f"{where}: invalid regex: {after.split()[0]} has no closing /")
    source = after[1:i]
    flags_end = i + 1
    while flags_end < len(after) and after[flags_end].isalpha():  # /regex/i: every regex ignores case
        flags_end += 1
    try:
        return re.compile(source.replace("\\/", "/"), re.IGNORECASE), after[flags_end:]
    except re.error as exc:
        raise TransformError(f"{where}: invalid regex /{source}/: {exc}") from None


def _skip_separator(rest: str) -> str:
    rest = rest.strip()
    if rest[:1] in ("=", ","):
        rest = rest[1:].strip()
    return rest


def _check_expr(text: str, where: str, what: str) -> None:
    if "$" in text:
        return  # checked once expanded
    try:
        classad.ExprTree(text)
    except Exception as exc:
        raise TransformError(f"{where}: {what}: invalid expression {text}: {exc}") from None


# ---------------------------------------------------------------------- applying
def _value(text: str, what: str) -> Any:
    """A SET value: a literal as Python's value (as submitted ads hold them), else the expression."""
    try:
        return classad_value(text)
    except Exception as exc:
        raise TransformError(f"{what}: invalid expression {text}: {exc}") from None


def _literal(value: Any) -> Any:
    """An evaluated value as an ad holds it: scalars as themselves, anything else as an expression."""
    if type(value) in (bool, int, float, str):
        return value
    return classad.ExprTree(value)


def _text(value: Any) -> str:
    """An attribute as ``$(MY.attr)`` expands it: a string without quotes, anything else as ClassAd text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, classad.ExprTree):
        return str(value)
    return str(classad.ExprTree(value))


def _is_undefined(value: Any) -> bool:
    return value is classad.Value.Undefined or (isinstance(value, classad.ExprTree) and str(value) == "undefined")


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b  # (1 == True in Python, not in an ad)


class _Ad:
    """The ad being transformed: its dict, and its names by lower case (names ignore case)."""

    __slots__ = ("d", "names", "was")

    def __init__(self, ad: Mapping[str, Any]):
        self.d = dict(ad)
        self.names = {k.lower(): k for k in self.d}
        # What each name touched held before the first change: (its key, its value), or None.
        self.was: dict[str, tuple[str, Any] | None] = {}

    def key(self, name: str) -> str | None:
        return self.names.get(name.lower())

    def _touch(self, low: str) -> None:
        if low not in self.was:
            key = self.names.get(low)
            self.was[low] = None if key is None else (key, self.d[key])

    def changes(self) -> tuple[dict[str, Any], list[str]]:
        changed: dict[str, Any] = {}
        deleted = []
        for low, before in self.was.items():
            key = self.names.get(low)
            if key is None:
                if before is not None:
                    deleted.append(before[0])
            elif before is None or before[0] != key or not _same(before[1], self.d[key]):
                changed[key] = self.d[key]
        return changed, deleted

    def put(self, name: str, value: Any) -> None:
        self._touch(name.lower())
        old = self.names.get(name.lower())
        if old is not None and old != name:
            del self.d[old]
        self.d[name] = value
        self.names[name.lower()] = name

    def delete(self, name: str) -> None:
        self._touch(name.lower())
        key = self.names.pop(name.lower(), None)
        if key is not None:
            del self.d[key]

    def copy(self, name: str, new: str, *, rename: bool) -> None:
        key = self.key(name)
        if key is None:
            return  # nothing to copy, as HTCondor's COPY of a missing attribute
        value = self.d[key]
        if rename and key.lower() != new.lower():
            self.delete(key)
        self.put(new, value)


def _new_name(text: str, where: str) -> str:
    name = text.strip()
    if not _ATTR.fullmatch(name):
        raise TransformError(f"{where}: {name or 'nothing'} is not an attribute name")
    return name


def _regex_op(kw: str, ad: _Ad, regex: re.Pattern[str], pattern: str, where: str) -> None:
    """COPY, RENAME or DELETE of every attribute whose name ``regex`` finds; the ad is changed
    only once every name is read (in name order, as HTCondor walks them)."""
    found: dict[str, str] = {}
    for key in ad.d:
        m = regex.search(key)
        if m:
            found[key] = "" if kw == "DELETE" else _new_name(_substitute(pattern, m), where)
    for key in sorted(found):
        if kw == "DELETE":
            ad.delete(key)
        else:
            ad.copy(key, found[key], rename=kw == "RENAME")


def _substitute(pattern: str, m: re.Match[str]) -> str:
    """``pattern`` with ``\\0`` the whole match and ``\\1``... its groups (a group that took no part
    is empty); a backslash before anything else stays as it is."""
    groups = (m.group(0), *m.groups())

    def one(g: re.Match[str]) -> str:
        i = int(g.group(1))
        return (groups[i] or "") if i < len(groups) else g.group(0)

    return re.sub(r"\\(\d)", one, pattern)
