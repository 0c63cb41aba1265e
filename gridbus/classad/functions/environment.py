"""A job's environment: ``envV1ToV2`` and ``mergeEnvironment``, on HTCondor's Env rules; the
V2 form is read and written by :mod:`gridbus.jobargs`, as submit and the starter do."""

from __future__ import annotations

import re
from typing import Any

from gridbus.classad.functions.registry import VARIADIC, strict
from gridbus.classad.values import ERROR, UNDEFINED
from gridbus.jobargs import (
    BLANKS,
    ArgumentError,
    add_entry,
    parse_environment_v2,
    unparse_environment_v2,
)

# HTCondor's Env reads V1 entries up to a ';' or a line end, skips the blanks before an entry and
# keeps the rest as written (blanks at the end of a name too, unlike condor_submit's Env reader).
_V1_ENTRY_END = re.compile("[;\n]")


@strict("envV1ToV2", 1)
def _env_v1_to_v2(s: Any) -> Any:
    if type(s) is not str:
        return UNDEFINED if s is UNDEFINED else ERROR
    env: dict[str, str] = {}
    try:
        for entry in _V1_ENTRY_END.split(s):
            entry = entry.lstrip(BLANKS)
            if entry:
                add_entry(env, entry, "envV1ToV2")
    except ArgumentError:  # an entry that is not NAME=value
        return ERROR
    return unparse_environment_v2(env)


@strict("mergeEnvironment", 0, VARIADIC)
def _merge_environment(*envs: Any) -> Any:
    # Later environments win name by name; undefined ones are skipped.
    merged: dict[str, str] = {}
    for e in envs:
        if e is UNDEFINED:
            continue
        if type(e) is not str:
            return ERROR
        try:
            merged.update(parse_environment_v2(e, "mergeEnvironment"))
        except ArgumentError:
            return ERROR
    return unparse_environment_v2(merged)
