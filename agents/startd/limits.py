"""The numbers a job is given when its claim is activated: its requests, evaluated.

RequestCpus, RequestMemory and RequestDisk are often expressions (condor_submit's default
``RequestMemory = ifthenelse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize + 1023) / 1024)``).
At activation they are evaluated against the job ad, with the slot as TARGET, and only numbers go
on: an absent request takes the startd's default (JOB_DEFAULT_REQUEST*); one that evaluates to
undefined, an error or anything but a non-negative number puts the job on hold with a reason that
names it, since no limit can be set from it.

The memory limit the starter enforces is the memory HTCondor would give the job in a dynamic
slot: the request rounded up to a multiple of 128 MiB (its default MODIFY_REQUEST_EXPR_REQUESTMEMORY,
``quantize(RequestMemory, {128})``). A default request for a few KiB of executable (1 MiB) so gets
128 MiB, not a limit no program fits in, whether the slot it runs in was carved for 1 MiB or not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from gridbus import classad
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.slots import Request
from gridbus.classad.values import is_number

HOLD_STARTD_HELD_JOB = 21  # HTCondor's StartdHeldJob: the execute side put the job on hold
MEMORY_QUANTUM = 128  # MiB


class RequestUndefined(Exception):
    """A request that does not evaluate to a usable number; ``reason`` is the hold reason."""

    def __init__(self, attr: str, reason: str):
        super().__init__(reason)
        self.attr = attr
        self.reason = reason


def _evaluate(job_ad: Mapping[str, Any], slot_ad: Mapping[str, Any], attr: str, default: int) -> int:
    value = lookup(job_ad, attr)
    if value is None:
        return default
    out = value
    if isinstance(value, classad.ExprTree):
        out = classad.compile(str(value)).eval(job_ad, slot_ad)
    if not is_number(out) or not math.isfinite(out) or out < 0:
        # classad.Value.Undefined / Error print as their names, as a ClassAd shows them
        what = "undefined" if out is None else (out.name.lower() if isinstance(out, Enum) else repr(out))
        slot = lookup(slot_ad, "Name") or "the slot"
        shown = f"{attr} = {value}" if isinstance(value, classad.ExprTree) else f"{attr}"
        raise RequestUndefined(attr, f"{shown} evaluates to {what} for {slot}, not a number of "
                                     f"{_UNITS[attr]}: the startd cannot size the job's {_WHAT[attr]}")
    return int(math.ceil(out))


_UNITS = {"RequestCpus": "cpus", "RequestMemory": "MiB", "RequestDisk": "KiB"}
_WHAT = {"RequestCpus": "cpus", "RequestMemory": "memory limit", "RequestDisk": "disk"}


def activation_requests(job_ad: Mapping[str, Any], slot_ad: Mapping[str, Any], defaults: Request) -> Request:
    """RequestCpus, RequestMemory, RequestDisk as numbers (RequestUndefined if one is not)."""
    return Request(
        cpus=_evaluate(job_ad, slot_ad, "RequestCpus", defaults.cpus),
        memory=_evaluate(job_ad, slot_ad, "RequestMemory", defaults.memory),
        disk=_evaluate(job_ad, slot_ad, "RequestDisk", defaults.disk),
        gpus=defaults.gpus,
    )


def memory_limit(request_mib: int) -> int:
    """The MiB the starter holds the job to (see the module docstring)."""
    return max(1, math.ceil(request_mib / MEMORY_QUANTUM)) * MEMORY_QUANTUM
