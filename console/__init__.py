"""The console side of gridbus (synchronous, pika): the QMF-style Session, the HTCondor-style API
(Schedd, Collector, ...) and the `gridbus` command line.

Names mirror `qmf.console` and `htcondor2`, so scripts switch with a changed import. Every name is
imported here (none is loaded behind a module __getattr__), so editors and type checkers see them;
docs/compat.md says, for each of htcondor2's names, what gridbus does with it.
"""

from __future__ import annotations

from typing import Optional  # htcondor2 exports typing.Optional too

from gridbus import classad
from gridbus.console import dags, personal
from gridbus.console.collector import AdType, AdTypes, Collector, DaemonType, DaemonTypes
from gridbus.console.configuration import (
    disable_debug,
    enable_debug,
    enable_log,
    param,
    reload_config,
    set_subsystem,
)
from gridbus.console.daemons import DaemonCommand, DaemonCommands, RemoteParam, ping, send_command
from gridbus.console.dagman import DAGMan
from gridbus.console.dprintf import LogLevel, log
from gridbus.console.enums import (
    CommonFilesEventType,
    CredType,
    CredTypes,
    FileTransferEventType,
    HistorySrc,
    SubmitMethod,
    SubsystemType,
    TransactionFlag,
    TransactionFlags,
)
from gridbus.console.negotiator import Negotiator
from gridbus.console.schedd import JobAction, JobStatus, QueryOpt, QueryOpts, Schedd, SubmitResult
from gridbus.console.session import Agent, BrokerUnreachable, ObjectProxy, Session
from gridbus.console.startd import CompletionType, DrainType, DrainTypes, Startd, VacateType
from gridbus.console.unsupported import (
    CredCheck,
    Credd,
    Placementd,
    SecurityContext,
    load_a_config_usermap_file,
    reload_config_usermaps,
    send_alive,
    set_ready_state,
)
from gridbus.console.version import platform, version
from gridbus.errors import HTCondorException
from gridbus.eventlog import JobEvent, JobEventLog, JobEventType
from gridbus.rpc import CallFailed, CallTimeout, MethodResult
from gridbus.submit import Submit

__all__ = [
    # the QMF-style console
    "Agent", "BrokerUnreachable", "CallFailed", "CallTimeout", "MethodResult", "ObjectProxy", "Session",
    # htcondor2's names
    "AdType", "AdTypes", "Collector", "CommonFilesEventType", "CompletionType", "CredCheck", "CredType",
    "CredTypes", "Credd", "DAGMan", "DaemonCommand", "DaemonCommands", "DaemonType", "DaemonTypes", "DrainType",
    "DrainTypes", "FileTransferEventType", "HTCondorException", "HistorySrc", "JobAction", "JobEvent",
    "JobEventLog", "JobEventType", "JobStatus", "LogLevel", "Negotiator", "Optional", "Placementd", "QueryOpt",
    "QueryOpts", "RemoteParam", "Schedd", "SecurityContext", "Startd", "Submit", "SubmitMethod", "SubmitResult",
    "SubsystemType", "TransactionFlag", "TransactionFlags", "VacateType", "classad", "dags", "disable_debug",
    "enable_debug", "enable_log", "load_a_config_usermap_file", "log", "param", "personal", "ping", "platform",
    "reload_config", "reload_config_usermaps", "send_alive", "send_command", "set_ready_state", "set_subsystem",
    "version",
]
