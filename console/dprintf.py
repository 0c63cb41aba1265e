"""htcondor2's ``log`` and ``LogLevel``: a message into this process's HTCondor-style log.

The message goes to the console's logger (``gridbus.console``), which writes nowhere until
``enable_debug()`` (stderr) or ``enable_log()`` (the file <SUBSYS>_LOG names) is called, as
htcondor2's dprintf writes nowhere until then. As in HTCondor, a message of D_ALWAYS or D_ERROR
is always written, one with D_FULLDEBUG only at the verbose level (<SUBSYS>_DEBUG = D_FULLDEBUG),
and one of another category only where <SUBSYS>_DEBUG names that category (D_JOB, D_SECURITY...).
The header flags (SubSecond, Timestamp, PID, NoHeader) are accepted; the console's header is its own.
"""

from __future__ import annotations

import enum
import logging

from gridbus.console.configuration import log as console_log
from gridbus.console.configuration import param
from gridbus.errors import HTCondorTypeError


class LogLevel(enum.IntEnum):
    """HTCondor's debug categories and header flags (values are htcondor2's; combine with |)."""

    Always = 0
    Error = 1
    Status = 2
    Job = 4
    Machine = 5
    Config = 6
    Protocol = 7
    Priv = 8
    DaemonCore = 9
    Verbose = 10
    Security = 11
    Network = 14
    Hostname = 22
    Audit = 24
    FullDebug = 1024
    SubSecond = 1 << 26
    Timestamp = 1 << 27
    PID = 1 << 28
    NoHeader = 1 << 31


_CATEGORY_MASK = 0xFF  # the category is the low bits; FullDebug and the header flags are above
_HTCONDOR_NAMES: dict[int, str] = {LogLevel.Status: "STATUS", LogLevel.Job: "JOB", LogLevel.Machine: "MACHINE",
                   LogLevel.Config: "CONFIG", LogLevel.Protocol: "PROTOCOL", LogLevel.Priv: "PRIV",
                   LogLevel.DaemonCore: "DAEMONCORE", LogLevel.Verbose: "VERBOSE", LogLevel.Security: "SECURITY",
                   LogLevel.Network: "NETWORK", LogLevel.Hostname: "HOSTNAME", LogLevel.Audit: "AUDIT"}


def python_level(level: int) -> int:
    """The logging level a message of HTCondor ``level`` is written at."""
    if level & LogLevel.FullDebug:
        return logging.DEBUG
    category = level & _CATEGORY_MASK
    if category == LogLevel.Always:
        return logging.INFO
    if category == LogLevel.Error:
        return logging.ERROR
    named = str(param.get(f"{param.subsystem}_DEBUG", "") or "").upper()
    name = _HTCONDOR_NAMES.get(category)
    enabled = "D_ALL" in named or (name is not None and f"D_{name}" in named)
    return logging.INFO if enabled else logging.DEBUG


def log(level: LogLevel | int, message: str) -> None:
    """htcondor2.log: write ``message`` at ``level`` (LogLevel values, bitwise-or'ed)."""
    if isinstance(level, bool) or not isinstance(level, int):
        raise HTCondorTypeError("level must a LogLevel or a bitwise-or of such")
    if not isinstance(message, str):
        raise HTCondorTypeError(f"message must be a string, not {type(message).__name__}")
    console_log.log(python_level(int(level)), "%s", message)
