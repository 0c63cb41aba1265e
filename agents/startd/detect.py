"""What the machine has: HTCondor's machine attributes, detected here and overridable in config.

Cpus and memory come from the kernel, disk from the file system of the execute directory (KiB,
as HTCondor counts it), the platform from ``uname`` and ``/etc/os-release``, GPUs as
condor_gpu_discovery finds them (``gpus.py``: nvidia-smi, or GPU_DISCOVERY_EXTRA's ``-simulate``).
Every value can be overridden (the knobs ``NUM_CPUS``, ``MEMORY``, ``DISK``,
``ARCH``, ``OPSYS``, ``OPSYSANDVER``, ``UID_DOMAIN``, ``FILESYSTEM_DOMAIN``, ``NUM_GPUS``, ...):
a test can pretend a 2-core box has 4 cores, as HTCondor's NUM_CPUS lets an admin do.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Any

from gridbus import hostinfo
from gridbus.agents.startd import gpus as gpu


@dataclass(frozen=True)
class Machine:
    """The machine as the startd advertises it (before slots divide it)."""

    machine: str  # fully qualified host name
    arch: str
    opsys: str
    opsys_and_ver: str
    opsys_name: str
    opsys_major_ver: int
    detected_cpus: int
    detected_memory: int  # MiB
    cpus: int
    memory: int  # MiB
    disk: int  # KiB free on the execute directory's file system
    uid_domain: str
    filesystem_domain: str
    gpu_devices: tuple[gpu.Gpu, ...] = field(default_factory=tuple)

    @property
    def gpus(self) -> int:
        return len(self.gpu_devices)

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(d.id for d in self.gpu_devices)

    def attributes(self) -> dict[str, Any]:
        ad: dict[str, Any] = {
            "Machine": self.machine,
            "Arch": self.arch,
            "OpSys": self.opsys,
            "OpSysAndVer": self.opsys_and_ver,
            "OpSysName": self.opsys_name,
            "OpSysMajorVer": self.opsys_major_ver,
            "DetectedCpus": self.detected_cpus,
            "DetectedMemory": self.detected_memory,
            "TotalCpus": self.cpus,
            "TotalMemory": self.memory,
            "TotalDisk": self.disk,
            "UidDomain": self.uid_domain,
            "FileSystemDomain": self.filesystem_domain,
            # The starter takes a job's sandbox over the bus (agents/startd/sandbox.py).
            "HasFileTransfer": True,
            # It sends a self-checkpointing job's checkpoints to the schedd's spool (sandbox.py),
            # and says which HTCondor its starter behaves as: condor_submit's Requirements test
            # both (TransferCheckpoint and ON_SUCCESS jobs need a starter of 8.9.7 or later).
            "HasSelfCheckpointTransfers": True,
            "CondorVersion": CONDOR_VERSION,
        }
        if self.gpus:  # the slot's own devices are the slot ad's (gpus.slot_attributes)
            ad["DetectedGPUs"] = self.gpus
            ad["TotalGPUs"] = self.gpus
        return ad


# The HTCondor whose job attributes and submit semantics gridbus follows (its submit parity oracle
# is HTCondor 24's own submit code), in HTCondor's $CondorVersion$ form.
CONDOR_VERSION = "$CondorVersion: 24.0.0 2024-01-01 BuildID: gridbus $"


def _memory_mib() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what this process may use, as in a container
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def disk_kib(path: str) -> int:
    """Free KiB on the file system holding ``path`` (the nearest existing parent)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and probe != "/":
        probe = os.path.dirname(probe)
    return shutil.disk_usage(probe).free // 1024


def detect(execute_dir: str, overrides: dict[str, Any] | None = None, gpu_discovery_extra: str = "") -> Machine:
    """Detect the machine; ``overrides`` maps knob names (NUM_CPUS, MEMORY, ...) to values,
    ``gpu_discovery_extra`` is GPU_DISCOVERY_EXTRA (condor_gpu_discovery's options)."""
    o = {k.upper(): v for k, v in (overrides or {}).items() if v is not None}
    name, major, _ = hostinfo.os_release()
    fqdn = socket.getfqdn()
    cpus, memory = _cpus(), _memory_mib()
    devices = tuple(gpu.discover(gpu_discovery_extra))
    found = Machine(
        machine=fqdn,
        arch=hostinfo.arch(),
        opsys=hostinfo.opsys(),
        opsys_and_ver=f"{name}{major}",
        opsys_name=name,
        opsys_major_ver=major,
        detected_cpus=cpus,
        detected_memory=memory,
        cpus=cpus,
        memory=memory,
        disk=disk_kib(execute_dir),
        uid_domain=fqdn,
        filesystem_domain=fqdn,
        gpu_devices=devices,
    )
    changes: dict[str, Any] = {}
    for knob_name, attr, kind in (
        ("NUM_CPUS", "cpus", int),
        ("MEMORY", "memory", int),
        ("DISK", "disk", int),
        ("ARCH", "arch", str),
        ("OPSYS", "opsys", str),
        ("OPSYSANDVER", "opsys_and_ver", str),
        ("MACHINE", "machine", str),
        ("UID_DOMAIN", "uid_domain", str),
        ("FILESYSTEM_DOMAIN", "filesystem_domain", str),
    ):
        if knob_name in o:
            changes[attr] = kind(o[knob_name])
    if "NUM_GPUS" in o:
        # The first NUM_GPUS devices found; past them, devices of that name and no properties.
        n = int(o["NUM_GPUS"])
        changes["gpu_devices"] = devices[:n] + tuple(gpu.Gpu(f"GPU-{i}") for i in range(len(devices), n))
    return replace(found, **changes)


LOAD_READ_INTERVAL = 1.0  # seconds
_load_read = (-math.inf, 0.0)  # (monotonic time, load average) of the last read


def load_average() -> float:
    """The one-minute load average, read from the kernel at most every LOAD_READ_INTERVAL: the
    kernel recomputes it only every five seconds, and every activation builds its slot's ad."""
    global _load_read
    now = time.monotonic()
    if now - _load_read[0] >= LOAD_READ_INTERVAL:
        try:
            _load_read = (now, round(os.getloadavg()[0], 2))
        except OSError:
            _load_read = (now, 0.0)
    return _load_read[1]
