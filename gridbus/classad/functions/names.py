"""User and slot names: ``splitUserName``, ``splitSlotName``, ``userHome`` and ``userMap``."""

from __future__ import annotations

import pwd
from collections.abc import Callable
from typing import Any

from gridbus.classad.functions.registry import list_of, strict
from gridbus.classad.values import ERROR, UNDEFINED


def _split_at(name_first: bool) -> Callable:
    # "user@domain" and "slot1@host"; without an @ the whole text is the user (or the host).
    def fn(s: Any) -> Any:
        if type(s) is not str:
            return ERROR
        at = s.find("@")
        if at < 0:
            return list_of([s, ""] if name_first else ["", s])
        return list_of([s[:at], s[at + 1 :]])

    return fn


strict("splitUserName", 1)(_split_at(True))
strict("splitSlotName", 1)(_split_at(False))


@strict("userHome", 1, 2)
def _user_home(user: Any, default: Any = None) -> Any:
    dflt = default if type(default) is str and default else ""
    if user is UNDEFINED and not dflt:
        return UNDEFINED
    if type(user) is not str:
        return dflt or ERROR
    try:
        home = pwd.getpwnam(user).pw_dir
    except (KeyError, ValueError):
        return dflt or UNDEFINED
    return home or dflt or UNDEFINED


@strict("userMap", 2, 4)
def _user_map(mapname: Any, user: Any, preferred: Any = None, default: Any = None) -> Any:
    # No map files are configured in gridbus, so no user maps: HTCondor then answers the
    # 4-argument form's default and undefined otherwise.
    if type(mapname) is not str or type(user) is not str:
        if mapname is ERROR or user is ERROR:
            return ERROR
    return default if default is not None else UNDEFINED
