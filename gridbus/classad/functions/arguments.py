"""A job's arguments as a list and back: ``listToArgs`` and ``argsToList``, on HTCondor's V2
quoting rules as :mod:`gridbus.jobargs` implements them for submit and the starter."""

from __future__ import annotations

from typing import Any

from gridbus.classad.functions.registry import list_of, strict
from gridbus.classad.scope import ListValue
from gridbus.classad.values import ERROR
from gridbus.jobargs import ArgumentError, join_v2, split_v2


@strict("listToArgs", 1)
def _list_to_args(lst: Any) -> Any:
    if type(lst) is not ListValue:
        return ERROR
    words = lst.values()
    if any(type(w) is not str for w in words):
        return ERROR
    return join_v2(words)


@strict("argsToList", 1)
def _args_to_list(s: Any) -> Any:
    if type(s) is not str:
        return ERROR
    try:
        return list_of(split_v2(s))
    except ArgumentError:  # an unterminated single quote
        return ERROR
