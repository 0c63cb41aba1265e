"""The accountant's calls (condor_userprio's): priorities, priority factors, usage and
concurrency limits, read by anyone and set by the pool's administrators."""

from __future__ import annotations

from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.negotiator.accountant import Accountant
from gridbus.agents.negotiator.accountant_store import AccountantStore
from gridbus.agents.negotiator.groups import GroupConfig
from gridbus.status import MethodError, Status, invalid


def user_name(name: str) -> str:
    """The user a submitter name (``owner`` or ``owner@domain``) is accounted as."""
    if not name or not name.strip():
        raise invalid("a submitter name is needed (the job Owner, e.g. 'alice')")
    return name.strip().split("@", 1)[0]


class AccountantCalls:
    def __init__(self, accountant: Accountant, store: AccountantStore, groups: GroupConfig):
        self.accountant = accountant
        self.store = store
        self.groups = groups

    def save(self) -> None:
        """Persist the accountant (an OSError is the caller's)."""
        self.store.save(self.accountant)

    def _saved(self) -> None:
        try:
            self.save()
        except OSError as exc:
            raise MethodError(Status.EXCEPTION, f"could not persist the accountant: {exc}") from None

    @method("negotiator")
    async def GetPriorities(self, call: Call) -> dict[str, Any]:
        """Every submitter's record, then (with GROUP_NAMES) every group's: its quotas, usage and
        surplus as the last cycle assigned them (``IsAccountingGroup`` true)."""
        groups = [g.ad() for g in self.groups.groups()] if self.groups.enabled else []
        return {"Priorities": self.accountant.priorities() + groups}

    @method("negotiator")
    async def SetPriority(self, call: Call, Name: str, Priority: float) -> dict[str, Any]:
        try:
            self.accountant.set_priority(user_name(Name), Priority)
        except ValueError as exc:
            raise invalid(f"SetPriority: {exc}") from None
        self._saved()
        return {}

    @method("negotiator")
    async def SetPriorityFactor(self, call: Call, Name: str, PriorityFactor: float) -> dict[str, Any]:
        try:
            self.accountant.set_factor(user_name(Name), PriorityFactor)
        except ValueError as exc:
            raise invalid(f"SetPriorityFactor: {exc}") from None
        self._saved()
        return {}

    @method("negotiator")
    async def SetUsage(self, call: Call, Name: str, Usage: float) -> dict[str, Any]:
        try:
            self.accountant.set_usage(user_name(Name), Usage)
        except ValueError as exc:
            raise invalid(f"SetUsage: {exc}") from None
        self._saved()
        return {}

    @method("negotiator")
    async def GetLimits(self, call: Call) -> dict[str, Any]:
        return {"Limits": dict(self.accountant.limits), "Default": self.accountant.default_limit}

    @method("negotiator")
    async def SetLimit(self, call: Call, Name: str, Max: int) -> dict[str, Any]:
        try:
            self.accountant.set_limit(Name, Max)
        except ValueError as exc:
            raise invalid(f"SetLimit: {exc}") from None
        self._saved()
        return {}
