"""The htcondor2-style startd client: `Startd`, `DrainType`, `CompletionType`, `VacateType`.

    from gridbus.console import Startd
    startd = Startd("startd@node7")                   # an address, a Machine ad, or a name
    request_id = startd.drainJobs(how_fast="graceful", reason="kernel update")
    startd.cancelDrainJobs(request_id)

Names mirror `htcondor2.Startd` (``drainJobs``/``cancelDrainJobs``; ``drain_type=DrainType.Quick``
works too). Drain, CancelDrain and Vacate are for administrators (daemon accounts): a refusal
raises `CallFailed` with status 6 and the reason.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from gridbus.console.client import DaemonClient
from gridbus.console.session import Session
from gridbus.errors import HTCondorLookupError, HTCondorNotImplementedError, HTCondorValueError
from gridbus.rpc import MethodResult


class DrainType(enum.IntEnum):
    """How fast to drain; values are htcondor2's (HTCondor's DRAIN_GRACEFUL, _QUICK, _FAST)."""

    Graceful = 0
    Quick = 10
    Fast = 20


DrainTypes = DrainType


class CompletionType(enum.IntEnum):
    """What to do once drained; values are htcondor2's (gridbus does Nothing and Resume)."""

    Nothing = 0
    Resume = 1
    Exit = 2
    Restart = 3
    Reconfig = 4


class VacateType(enum.IntEnum):
    """How to evict a slot's job (Startd.vacate, vacateSlot); values are htcondor2's."""

    Graceful = 0
    Fast = 1


class Startd(DaemonClient):
    """One startd, reached through a Session (a new one on GRIDBUS_URL if none is given)."""

    def __init__(self, location: str | Mapping[str, Any] | None = None, *, session: Session | None = None,
                 url: str | None = None, timeout: float = 30.0):
        super().__init__(session, url, timeout, connect=True)
        self.address = _address(location)

    def _call(self, method: str, args: dict[str, Any] | None = None) -> MethodResult:
        return self.session.call(self.address, method, args or {}, timeout=self.timeout).check(
            f"{self.address} {method}"
        )

    def drainJobs(self, how_fast: str | DrainType = "graceful", on_completion: str | CompletionType = "nothing",
                  reason: str | None = None, *, drain_type: DrainType | None = None,
                  check_expr: str | None = None, start_expr: str | None = None) -> str:
        """Start draining; returns the request id. ``how_fast``: graceful, quick or fast.

        htcondor2's ``check_expr`` and ``start_expr`` are accepted only as None: a gridbus startd
        drains every slot and starts nothing while it drains."""
        for name, value in (("check_expr", check_expr), ("start_expr", start_expr)):
            if value is not None:
                raise HTCondorNotImplementedError(
                    f"drainJobs: {name} is not supported by gridbus (a startd drains every slot and starts nothing while draining)")
        how = _choice(drain_type if drain_type is not None else how_fast, DrainType, "how_fast")
        done = _choice(on_completion, CompletionType, "on_completion")
        if done not in ("nothing", "resume"):
            raise HTCondorValueError(f"on_completion {done!r} is not supported by gridbus (use nothing or resume)")
        return str(self._call("Drain", {"HowFast": how, "OnCompletion": done, "Reason": reason or ""}).RequestId)

    def cancelDrainJobs(self, request_id: str | None = None) -> None:
        """Stop draining (the drain ``request_id``, or whichever is in effect)."""
        self._call("CancelDrain", {"RequestId": request_id or ""})

    def vacate(self, slot: str | VacateType | None = None, graceful: bool = True) -> int:
        """Vacate one slot's claims (or every slot's); returns how many claims ended. As in
        htcondor2, ``vacate(VacateType.Fast)`` evicts every slot's job fast."""
        if isinstance(slot, VacateType):  # htcondor2's vacate(vacate_fast)
            slot, graceful = None, slot is VacateType.Graceful
        if slot is not None and not isinstance(slot, str):
            raise HTCondorValueError(f"slot must be a slot name or a VacateType, not {slot!r}")
        return int(self._call("Vacate", {"Slot": slot or "", "Graceful": graceful}).Count)

    def vacateSlot(self, slot_name: str | None = None, vacate_fast: VacateType | None = VacateType.Graceful) -> int:
        """htcondor2's vacateSlot: evict the job of slot ``slot_name``, fast if VacateType.Fast."""
        if not slot_name or not isinstance(slot_name, str):
            raise HTCondorValueError("slot_name must be a non-empty string")
        fast = vacate_fast is not None and _choice(vacate_fast, VacateType, "vacate_fast") == "fast"
        return self.vacate(slot_name, graceful=not fast)

    def slots(self) -> list[dict[str, Any]]:
        """The slots' public ads, as the startd advertises them."""
        return list(self._call("GetSlots").Slots)

    def status(self) -> dict[str, Any]:
        """The startd's management object: its properties and statistics in one map."""
        objs = self.session.getObjects(_class="startd", _agent=self.address)
        if not objs:
            raise HTCondorLookupError(f"{self.address} did not answer")
        obj = objs[0]
        return {**dict(obj.getProperties()), **dict(obj.getStatistics())}

    def __repr__(self) -> str:
        return f"Startd({self.address!r})"


def _address(location: str | Mapping[str, Any] | None) -> str:
    if location is None:
        import socket

        return f"startd@{socket.getfqdn()}"
    if isinstance(location, Mapping):
        for key in ("MyAddress", "myaddress"):
            if isinstance(location.get(key), str):
                return str(location[key])
        raise HTCondorValueError("the location ad has no MyAddress")
    if not isinstance(location, str) or not location:
        raise HTCondorValueError(f"a startd location must be an address, a name or an ad, not {location!r}")
    return location if location.startswith("startd@") else f"startd@{location}"


def _choice(value: Any, enum_type: type[enum.IntEnum], what: str) -> str:
    if isinstance(value, enum_type):
        return value.name.lower()
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value).name.lower()
        except ValueError:
            raise HTCondorValueError(f"{what} {value} is not one of {[m.value for m in enum_type]}") from None
    if isinstance(value, str) and value.strip().lower() in {m.name.lower() for m in enum_type}:
        return value.strip().lower()
    raise HTCondorValueError(f"{what} must be one of {', '.join(m.name.lower() for m in enum_type)}, not {value!r}")
