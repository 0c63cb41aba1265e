"""The htcondor2-style negotiator client: priorities, factors, usage, limits, analysis.

    from gridbus.console import Negotiator
    neg = Negotiator()                                   # GRIDBUS_URL, or Negotiator(url, name="cm")
    for user in neg.getPriorities():                     # like condor_userprio
        print(user["Name"], user["EffectivePriority"], user["ResourcesUsed"])
    neg.setFactor("bob", 3.0)                            # administrators only (status 6 otherwise)
    neg.analyze(schedd_job_ad)                           # like condor_q -better-analyze

Method names follow htcondor2.Negotiator (``getPriorities``, ``setPriority``, ``setFactor``,
``setUsage``, ``resetUsage``, ``resetAllUsage``, ``getResourceUsage``). Which negotiator: the ``name``
given, else the knob NEGOTIATOR_NAME, else the first agent answering getObjects(_class="negotiator").
A refused call raises `gridbus.rpc.CallFailed` with the negotiator's sentence.
"""

from __future__ import annotations

from typing import Any

from gridbus.console.client import DaemonClient
from gridbus.console.session import Session
from gridbus.rpc import MethodResult


class Negotiator(DaemonClient):
    def __init__(self, pool: str | None = None, name: str | None = None, *, session: Session | None = None,
                 timeout: float = 30.0):
        super().__init__(session, pool, timeout)
        self._name = name
        self._address: str | None = f"negotiator@{name}" if name else None

    @property
    def address(self) -> str:
        if self._address is None:
            name = None
            try:
                from gridbus.config import Config

                name = Config.load(daemon="negotiator").get("NEGOTIATOR_NAME", "") or None
            except Exception:
                name = None
            if name:
                self._address = f"negotiator@{name}"
            else:
                self._address = self.first_agent("negotiator")
        return self._address

    def _call(self, method: str, args: dict[str, Any] | None = None) -> MethodResult:
        return self.session.call(self.address, method, args or {}).check(f"{self.address} {method}")

    # ------------------------------------------------------------------ htcondor2.Negotiator
    def getPriorities(self, rollup: bool = False) -> list[dict[str, Any]]:
        """Every submitter's record, best effective priority first, then (with GROUP_NAMES) every
        accounting group's (``IsAccountingGroup``: quota, usage, surplus); ``rollup`` is accepted,
        unused."""
        return list(self._call("GetPriorities").Priorities)

    def getResourceUsage(self, user: str) -> list[dict[str, Any]]:
        """The user's record (usage, resources in use) as a one-item list, like htcondor2's."""
        return [p for p in self.getPriorities() if p.get("Name") == _user(user)]

    def setPriority(self, user: str, prio: float) -> None:
        self._call("SetPriority", {"Name": user, "Priority": float(prio)})

    def setFactor(self, user: str, factor: float) -> None:
        self._call("SetPriorityFactor", {"Name": user, "PriorityFactor": float(factor)})

    def setUsage(self, user: str, usage: float) -> None:
        """Set the accumulated usage (slot-weight-seconds), like condor_userprio -setaccum."""
        self._call("SetUsage", {"Name": user, "Usage": float(usage)})

    def resetUsage(self, user: str) -> None:
        self.setUsage(user, 0.0)

    def resetAllUsage(self) -> None:
        for p in self.getPriorities():
            if not p.get("IsAccountingGroup"):
                self.setUsage(p["Name"], 0.0)

    # ------------------------------------------------------------------ gridbus additions
    def getLimits(self) -> dict[str, Any]:
        r = self._call("GetLimits")
        return {"Limits": dict(r.Limits), "Default": r.Default}

    def setLimit(self, name: str, maximum: int) -> None:
        self._call("SetLimit", {"Name": name, "Max": int(maximum)})

    def reschedule(self) -> None:
        self._call("Reschedule")

    def analyze(self, job: dict[str, Any], machine: str | None = None) -> dict[str, Any]:
        """Why the job is idle: slots its Requirements reject, slots rejecting it, per clause the
        slots it rejects (``machine``: only the slots with that Name or Machine)."""
        return dict(self._call("Analyze", {"Job": dict(job), "Machine": machine or ""}).outArgs)



def _user(name: str) -> str:
    return name.split("@", 1)[0]
