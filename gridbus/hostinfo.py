"""This machine's platform as HTCondor names it: what a startd advertises (Arch, OpSys,
OpSysAndVer, ...) and what condor_submit's $(ARCH), $(OPSYS), $(OPSYSANDVER), $(OPSYSMAJORVER)
and $(OPSYSVER) expand to on the submit machine, read in one place."""

from __future__ import annotations

import platform
from functools import lru_cache


@lru_cache(maxsize=1)
def arch() -> str:
    """HTCondor's names: X86_64, INTEL (32-bit x86), aarch64, ppc64le."""
    m = platform.machine()
    return {"x86_64": "X86_64", "amd64": "X86_64", "i686": "INTEL", "i386": "INTEL"}.get(m.lower(), m)


@lru_cache(maxsize=1)
def opsys() -> str:
    return "LINUX" if platform.system() == "Linux" else platform.system().upper()


@lru_cache(maxsize=1)
def os_release() -> tuple[str, int, int]:
    """(OpSysName, OpSysMajorVer, minor version) from /etc/os-release, e.g. ("Ubuntu", 22, 4)."""
    info: dict[str, str] = {}
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep:
                    info[key] = value.strip().strip('"')
    except OSError:
        return platform.system() or "Unknown", 0, 0
    name = info.get("NAME", "Linux").split()[0]
    parts = (info.get("VERSION_ID", "0").split(".") + ["0"])[:2]
    try:
        major, minor = int(parts[0]), int(parts[1])
    except ValueError:
        major, minor = 0, 0
    return name, major, minor


@lru_cache(maxsize=1)
def submit_macros() -> dict[str, str]:
    """condor_submit's platform macros of this machine (lower-case names): ARCH, OPSYS, IsLinux,
    IsWindows, OPSYSANDVER ("Debian12"), OPSYSMAJORVER (12) and OPSYSVER (major * 100 + minor).
    One dict for the process: read, never changed."""
    name, major, minor = os_release()
    linux = opsys() == "LINUX"
    return {"arch": arch(), "opsys": opsys(), "islinux": str(int(linux)), "iswindows": "0",
            "opsysandver": f"{name}{major}", "opsysmajorver": str(major), "opsysver": str(major * 100 + minor)}
