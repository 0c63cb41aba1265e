"""gridbus's version lines, in HTCondor's form: htcondor2.version() and platform(), and what
every `gridbus` command prints for -version (as condor_version and each condor tool do).

The version itself is written once, as ``gridbus.__version__`` (pyproject reads it from there).
"""

from __future__ import annotations

import datetime
import platform as host

from gridbus import __version__


def version() -> str:
    """htcondor2.version(): ``$CondorVersion: <version> <date> BuildID: gridbus $``."""
    day = datetime.date.today().isoformat()  # as htcondor2 writes the date: 2026-09-24
    return f"$CondorVersion: {__version__} {day} BuildID: gridbus $"


def platform() -> str:
    """htcondor2.platform(): ``$CondorPlatform: <architecture>_<operating system> $``."""
    return f"$CondorPlatform: {host.machine()}_{host.system()} $"


def version_lines() -> str:
    """What -version prints: the two lines, as condor_version prints them."""
    return f"{version()}\n{platform()}\n"
