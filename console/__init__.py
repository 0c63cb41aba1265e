"""The console side of gridbus (synchronous, pika): the QMF-style Session, the HTCondor-style API
(Schedd, Collector, ...) and the `gridbus` command line.

Names mirror `qmf.console` and `htcondor2`, so scripts switch with a changed import.
"""

from __future__ import annotations

import importlib
from typing import Any

from gridbus.console.session import Agent, BrokerUnreachable, ObjectProxy, Session
from gridbus.errors import HTCondorException
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
    # htcondor2's other names
    "AdTypes": "gridbus.console.collector",
    "DaemonTypes": "gridbus.console.collector",
    "DaemonCommand": "gridbus.console.daemons",
    "DaemonCommands": "gridbus.console.daemons",
    "send_command": "gridbus.console.daemons",
    "RemoteParam": "gridbus.console.daemons",
    "param": "gridbus.console.configuration",
    "reload_config": "gridbus.console.configuration",
    "set_subsystem": "gridbus.console.configuration",
    "enable_debug": "gridbus.console.configuration",
    "disable_debug": "gridbus.console.configuration",
    "enable_log": "gridbus.console.configuration",
    "personal": "gridbus.console.personal",
    "classad": "gridbus.classad",
    "dags": "gridbus.console.dags",
}

_SUBMODULES = {"personal", "classad", "dags"}

__all__ = ["Agent", "BrokerUnreachable", "CallFailed", "CallTimeout", "HTCondorException", "MethodResult",
           "ObjectProxy", "Session", "platform", "version", *_LAZY]


def version() -> str:
    """htcondor2.version(): the version line, in HTCondor's `$CondorVersion: ... $` form."""
    import datetime

    from gridbus import __version__

    day = datetime.date.today().strftime("%b %d %Y")
    return f"$CondorVersion: {__version__} {day} gridbus $"


def platform() -> str:
    """htcondor2.platform(): the `$CondorPlatform: ... $` line (architecture and operating system)."""
    import platform as host

    return f"$CondorPlatform: {host.machine()}_{host.system()} $"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gridbus.console' has no attribute {name!r}")
    if name in _SUBMODULES:  # htcondor2.personal, htcondor2.classad, htcondor2.dags
        return importlib.import_module(module)
    return getattr(importlib.import_module(module), name)
