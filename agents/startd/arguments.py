"""A job's argv and environment from its ad, by HTCondor's quoting rules.

HTCondor keeps two syntaxes in the job ad (condor_submit converts the submit file's form):

- ``Arguments`` (new, "V2 raw"): arguments are separated by whitespace; a single quote starts and
  ends a quoted part in which whitespace is literal, and two single quotes inside a quoted part
  stand for one literal single quote. Double quotes are ordinary characters (the submit file's
  ``""`` doubling has already been undone by condor_submit). ``Args`` (old, "V1") is split on
  whitespace with no quoting at all. ``Arguments`` wins when both are present.
- ``Environment`` (new): ``NAME=value`` entries separated by whitespace, quoted like
  ``Arguments``. ``Env`` (old): entries separated by semicolons.

`quoted_v2` turns the submit file's double-quoted form into the raw form,
for tools and tests that start from submit syntax (a doubled double quote stands for one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ArgumentError(ValueError):
    """Arguments or environment that cannot be parsed; the message says where and why."""


def split_v2(text: str, what: str = "Arguments") -> list[str]:
    """Split a new-style (V2 raw) argument string into its arguments."""
    out: list[str] = []
    current: list[str] = []
    have_arg = False  # '' is an argument of its own, so an empty quoted part still counts
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            if have_arg:
                out.append("".join(current))
                current, have_arg = [], False
            i += 1
            continue
        have_arg = True
        if ch != "'":
            current.append(ch)
            i += 1
            continue
        # a quoted part: runs to the next single quote that is not doubled
        i += 1
        while True:
            if i >= n:
                raise ArgumentError(f"{what}: unterminated single quote in {text!r}")
            if text[i] == "'":
                if i + 1 < n and text[i + 1] == "'":
                    current.append("'")
                    i += 2
                    continue
                i += 1
                break
            current.append(text[i])
            i += 1
    if have_arg:
        out.append("".join(current))
    return out


def split_v1(text: str) -> list[str]:
    """Old-style ``Args``: whitespace-separated, no quoting."""
    return text.split()


def quoted_v2(text: str) -> str:
    """The raw V2 form of a submit file's double-quoted string: the outer double quotes go and
    each doubled double quote inside becomes one."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ArgumentError(f"{text!r} is not in the double-quoted new syntax")
    inner = text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(inner):
        if inner[i] == '"':
            if i + 1 < len(inner) and inner[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            raise ArgumentError(f"a lone double quote inside {text!r}; write it twice")
        out.append(inner[i])
        i += 1
    return "".join(out)


def job_argv(ad: Mapping[str, Any]) -> list[str]:
    """The arguments (without argv[0]) a job asks for: Arguments, else Args, else none."""
    new = _string(ad, "Arguments")
    if new is not None:
        return split_v2(new)
    old = _string(ad, "Args")
    if old is not None:
        return split_v1(old)
    return []


def parse_environment_v2(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in split_v2(text, "Environment"):
        _add_entry(env, entry, "Environment")
    return env


def parse_env_v1(text: str, delimiter: str = ";") -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in text.split(delimiter):
        if entry.strip():
            _add_entry(env, entry.strip(), "Env")
    return env


def job_environment(ad: Mapping[str, Any]) -> dict[str, str]:
    """The environment a job asks for: Environment, else Env, else none."""
    new = _string(ad, "Environment")
    if new is not None:
        return parse_environment_v2(new)
    old = _string(ad, "Env")
    if old is not None:
        return parse_env_v1(old)
    return {}


def _add_entry(env: dict[str, str], entry: str, what: str) -> None:
    name, sep, value = entry.partition("=")
    if not sep or not name:
        raise ArgumentError(f"{what}: entry {entry!r} is not NAME=value")
    if "\0" in name or "\0" in value:
        raise ArgumentError(f"{what}: entry {entry!r} contains a NUL character")
    env[name] = value


def _string(ad: Mapping[str, Any], name: str) -> str | None:
    value = lookup(ad, name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ArgumentError(f"{name} must be a string, not {type(value).__name__}")
    return value


def lookup(ad: Mapping[str, Any], name: str) -> Any:
    """A job attribute, case-insensitively (ads from the wire are plain dicts)."""
    if name in ad:
        return ad[name]
    lowered = name.lower()
    for key, value in ad.items():
        if key.lower() == lowered:
            return value
    return None
