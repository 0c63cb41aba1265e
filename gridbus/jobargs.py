"""HTCondor's quoting rules for a job's arguments and environment, in one place.

condor_submit writes them into the job ad and the starter reads them back, so both sides use these
functions (`gridbus.submit.quoting` for the submit side, `gridbus.agents.startd.arguments` for the
starter) and cannot drift apart.

The syntaxes (HTCondor manual, condor_submit "arguments" and "environment"):

- New arguments (V2). In a submit file the value is wrapped in double quotes and a doubled double
  quote inside stands for one (`unquote_submit_v2` undoes that). What is left — the "V2 raw" form the
  job ad's ``Arguments`` holds — separates arguments by whitespace; a single quote starts and ends a
  quoted part in which whitespace is literal, and inside it two single quotes stand for one. Double
  quotes are ordinary characters there. `join_v2` writes a list back the way HTCondor's ArgList does
  (``a b' 'c``: only blanks and single quotes are quoted, adjacent quoted parts merged).
- Old arguments (V1, ``Args``): split on whitespace, no quoting; a double quote is not allowed.
- New environment (``Environment``): ``NAME=value`` entries quoted exactly like V2 arguments.
- Old environment (``Env``): ``NAME=value`` entries separated by semicolons, no quoting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridbus import attrs

# HTCondor's ArgList treats exactly these as argument separators (not every Unicode space).
BLANKS = " \t\r\n"


class ArgumentError(ValueError):
    """Arguments or environment that cannot be parsed; the message says which, where and why."""


# ------------------------------------------------------------------ arguments
def split_v2(text: str, what: str = "Arguments") -> list[str]:
    """Split a V2 raw string into its words: blanks separate, single quotes group, '' is a quote."""
    if not isinstance(text, str):
        raise ArgumentError(f"{what} must be a string, not {type(text).__name__}")
    words: list[str] = []
    current: list[str] = []
    in_word = False  # '' is an argument of its own, so an empty quoted part still counts
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in BLANKS:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
            continue
        in_word = True
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
    if in_word:
        words.append("".join(current))
    return words


def join_v2(words: list[str]) -> str:
    """The V2 raw form of a word list, as HTCondor's ArgList writes it (``a b' 'c``, ``it''s``)."""
    result = ""
    for word in words:
        if result:
            result += " "
        if not word:
            result += "''"
        for ch in word:
            if ch in BLANKS or ch == "'":
                # Reopen the quoted part just closed rather than starting a new one: a' 'b'c'.
                if result.endswith("'"):
                    result = result[:-1]
                else:
                    result += "'"
                if ch == "'":
                    result += "'"
                result += ch + "'"
            else:
                result += ch
    return result


def split_v1(text: str) -> list[str]:
    """Old-style ``Args``: whitespace-separated, no quoting at all."""
    return text.split()


def is_submit_v2(value: str) -> bool:
    """True when a submit file's value is in the new, double-quoted syntax."""
    v = value.strip()
    return len(v) >= 2 and v[0] == '"' and v[-1] == '"'


def unquote_submit_v2(value: str, what: str = "arguments") -> str:
    """The V2 raw form of a submit file's double-quoted value: the outer double quotes go and
    each doubled double quote inside becomes one; a lone one is an error."""
    if not is_submit_v2(value):
        raise ArgumentError(f"{what}: {value.strip()!r} is not in the double-quoted new syntax")
    inner = value.strip()[1:-1]
    out: list[str] = []
    i = 0
    while i < len(inner):
        if inner[i] == '"':
            if i + 1 < len(inner) and inner[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            raise ArgumentError(
                f"{what}: a lone double quote inside the new syntax must be doubled (\"\"): {value.strip()}"
            )
        out.append(inner[i])
        i += 1
    return "".join(out)


# ------------------------------------------------------------------ environment
def parse_environment_v2(text: str, what: str = "Environment") -> dict[str, str]:
    """A V2 raw environment string as a mapping (a later entry for a name wins, as in HTCondor)."""
    env: dict[str, str] = {}
    for entry in split_v2(text, what):
        add_entry(env, entry, what)
    return env


def parse_env_v1(text: str, delimiter: str = ";", what: str = "Env") -> dict[str, str]:
    """An old-style environment: entries separated by `delimiter`; blanks around a name go, a
    value is kept as written (HTCondor's V1 reader keeps trailing blanks)."""
    if not isinstance(text, str):
        raise ArgumentError(f"{what} must be a string, not {type(text).__name__}")
    env: dict[str, str] = {}
    for entry in text.split(delimiter):
        if entry.strip():
            add_entry(env, entry.lstrip(BLANKS), what, strip_name=True)
    return env


def unparse_environment_v2(env: Mapping[str, str]) -> str:
    """The V2 raw ``Environment`` for a mapping, names sorted (HTCondor keeps them in a map)."""
    return join_v2([f"{name}={env[name]}" for name in sorted(env)])


def add_entry(env: dict[str, str], entry: str, what: str, strip_name: bool = False) -> None:
    name, sep, value = entry.partition("=")
    if strip_name:
        name = name.strip(BLANKS)
    if not sep or not name:
        raise ArgumentError(f"{what}: entry {entry!r} is not NAME=value")
    if "\0" in name or "\0" in value:
        raise ArgumentError(f"{what}: entry {entry!r} contains a NUL character")
    env[name] = value


# ------------------------------------------------------------------ from a job ad
def job_argv(ad: Mapping[str, Any]) -> list[str]:
    """The arguments (without argv[0]) a job asks for: Arguments (V2), else Args (V1), else none."""
    new = _string(ad, "Arguments")
    if new is not None:
        return split_v2(new)
    old = _string(ad, "Args")
    if old is not None:
        return split_v1(old)
    return []


def job_environment(ad: Mapping[str, Any]) -> dict[str, str]:
    """The environment a job asks for: Environment (V2), else Env (V1), else none."""
    new = _string(ad, "Environment")
    if new is not None:
        return parse_environment_v2(new)
    old = _string(ad, "Env")
    if old is not None:
        return parse_env_v1(old)
    return {}


# A job attribute, case-insensitively (ads from the wire are plain dicts): attrs.get, by its
# name here (an alias, not a wrapper: the starter looks up dozens per job).
lookup = attrs.get


def _string(ad: Mapping[str, Any], name: str) -> str | None:
    value = lookup(ad, name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ArgumentError(f"{name} must be a string, not {type(value).__name__}")
    return value
