"""The console side of gridbus (synchronous, pika): the QMF-style Session, the HTCondor-style API
(Schedd, Collector, ...) and the `gridbus` command line.

Names mirror `qmf.console` and `htcondor2`, so scripts switch with a changed import.
"""

from __future__ import annotations

import importlib
from typing import Any

from gridbus.console.session import Agent, BrokerUnreachable, ObjectProxy, Session
from gridbus.rpc import CallFailed, CallTimeout, MethodResult

# Loaded on first use so `from gridbus.console import Session` stays light.
_LAZY = {
    "Schedd": "gridbus.console.schedd",
    "SubmitResult": "gridbus.console.schedd",
    "JobAction": "gridbus.console.schedd",
    "JobStatus": "gridbus.console.schedd",
    "QueryOpt": "gridbus.console.schedd",
    "Collector": "gridbus.console.collector",
    "AdType": "gridbus.console.collector",
    "DaemonType": "gridbus.console.collector",
    "Negotiator": "gridbus.console.negotiator",
    "Startd": "gridbus.console.startd",
    "Submit": "gridbus.submit",
    "JobEventLog": "gridbus.eventlog",
    "JobEvent": "gridbus.eventlog",
    "JobEventType": "gridbus.eventlog",
    "dags": None,  # the module gridbus.console.dags (htcondor2.dags)
}

__all__ = ["Agent", "BrokerUnreachable", "CallFailed", "CallTimeout", "MethodResult", "ObjectProxy", "Session", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'gridbus.console' has no attribute {name!r}")
    module = _LAZY[name]
    if module is None:
        return importlib.import_module(f"gridbus.console.{name}")
    return getattr(importlib.import_module(module), name)
