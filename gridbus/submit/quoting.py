"""Arguments and environment written into the job ad as condor_submit does.

The quoting rules are `gridbus.jobargs` (shared with the starter, which reads them back); this
module holds condor_submit's choices on top of them:

- Old (V1) arguments: the value is kept as written in `Args`; a double quote is not allowed in it.
- New (V2) arguments: the double-quoted value becomes `Arguments`, re-quoted the way HTCondor's
  ArgList writes V2 (`a b' 'c`).
- Environment: new form `"A=1 B='x y'"`, old form `A=1;B=2`. Either way the ad gets `Environment`
  in the V2 form, variables sorted by name (HTCondor keeps them in a map).
"""

from __future__ import annotations

from gridbus import jobargs
from gridbus.jobargs import ArgumentError, is_submit_v2, join_v2
from gridbus.submit.errors import SubmitError

__all__ = ["arguments_attrs", "environment_attr", "is_v2", "join_v2", "split_v2", "words_of"]

is_v2 = is_submit_v2


def split_v2(raw: str, what: str) -> list[str]:
    """Split a V2 raw string into words; a malformed one is a SubmitError naming `what`."""
    try:
        return jobargs.split_v2(raw, what)
    except ArgumentError as exc:
        raise SubmitError(str(exc)) from None


def arguments_attrs(value: str | None) -> dict[str, str]:
    """The ad attribute for an `arguments` value: {"Args": v1} or {"Arguments": v2}."""
    if value is None or value.strip() == "":
        return {"Arguments": ""}
    if is_v2(value):
        try:
            return {"Arguments": join_v2(jobargs.split_v2(jobargs.unquote_submit_v2(value, "arguments"), "arguments"))}
        except ArgumentError as exc:
            raise SubmitError(str(exc)) from None
    if '"' in value:
        raise SubmitError(
            f"arguments: found an unescaped double quote in the old syntax: {value} "
            '(wrap the whole value in double quotes to use the new syntax)'
        )
    return {"Args": value.strip()}


def environment_attr(value: str | None) -> str:
    """The V2 `Environment` string for an `environment` value in either syntax."""
    if value is None or value.strip() == "":
        return ""
    try:
        if is_v2(value):
            env = jobargs.parse_environment_v2(jobargs.unquote_submit_v2(value, "environment"), "environment")
        else:
            env = jobargs.parse_env_v1(value, ";", "environment")
    except ArgumentError as exc:
        raise SubmitError(str(exc)) from None
    return jobargs.unparse_environment_v2(env)


def env_v1_attr(value: str, extra: dict[str, str] | None = None) -> str:
    """The V1 `Env` string HTCondor keeps for `env = A=1;B=2` (old syntax under the name `env`):
    the entries by name, `;`-separated, each as written but for leading blanks; ``extra`` (getenv)
    under them."""
    try:
        jobargs.parse_env_v1(value, ";", "env")  # refuses an entry that is not NAME=value
    except ArgumentError as exc:
        raise SubmitError(str(exc)) from None
    entries: dict[str, str] = {k: v for k, v in (extra or {}).items()}
    for entry in value.split(";"):
        entry = entry.lstrip(" \t")
        if entry.strip():
            name, _, rest = entry.partition("=")
            entries[name] = rest
    return ";".join(f"{name}={entries[name]}" for name in sorted(entries))


def words_of(attrs: dict[str, str]) -> list[str]:
    """The argument list a starter would run, from `Args` (V1: split on blanks) or `Arguments` (V2)."""
    try:
        return jobargs.job_argv(attrs)
    except ArgumentError as exc:
        raise SubmitError(str(exc)) from None
