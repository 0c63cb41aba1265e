"""The name HTCondor keeps a job's usage and priority under (its accounting name), made once for
the negotiator, which charges it, and the startd, which advertises it on the slot that runs the
job (``AccountingGroup``): the two must agree to the letter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gridbus import attrs


def accounting_name(job: Mapping[str, Any], owner: str,
                    get: Callable[[Any, str], Any] = attrs.get) -> str:
    """``<AcctGroup>.<AcctGroupUser or Owner>`` for a job in an accounting group, else ``owner``.
    ``get`` reads an attribute of ``job`` (case-insensitively, by default)."""
    return group_member(job, owner, get) or owner


def group_member(job: Mapping[str, Any], owner: str,
                 get: Callable[[Any, str], Any] = attrs.get) -> str | None:
    """``<AcctGroup>.<AcctGroupUser or Owner>``, or None for a job in no accounting group."""
    group = get(job, "AcctGroup")
    if not isinstance(group, str) or not group.strip():
        return None
    user = get(job, "AcctGroupUser")
    user = user.strip() if isinstance(user, str) and user.strip() else owner
    return f"{group.strip()}.{user}"
