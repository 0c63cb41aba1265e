"""GPUs: found at the startd's start as HTCondor's condor_gpu_discovery finds them, and how a
slot advertises and hands out the ones it holds.

Discovery. ``nvidia-smi``, where it is on the PATH, names the devices and their properties; where
it is absent there are no GPUs and nothing is logged. ``GPU_DISCOVERY_EXTRA`` takes
condor_gpu_discovery's ``-simulate[:D[,N[,D2,N2...]]]``: N devices of kind D from its table of
simulated devices (no discovery is run), so a machine without a GPU runs the whole path. A device
is named as condor_gpu_discovery names it by default, ``GPU-`` and the first 8 hex digits of its
uuid (the simulated ones ``GPU-a0223334``, ``GPU-b1223334``, ...).

Slot ads, as HTCondor's startd publishes a non-fungible resource with properties:
``AssignedGPUs = "GPU-a0223334,GPU-b1223334"`` (the slot's devices), ``GPUs`` (how many are
free), ``AvailableGPUs = { GPUs_GPU_a0223334, ... }`` (references to the free ones),
``GPUs_<property>`` for each property all the slot's devices share, and one nested ad per device,
``GPUs_GPU_a0223334 = [ Id = "GPU-a0223334"; Capability = 7.0; ... ]``. A job's
``countMatches(MY.RequireGPUs, TARGET.AvailableGPUs) >= RequestGPUs`` (what condor_submit writes
for ``require_gpus``) counts the free devices whose properties satisfy it.

Handing out. A dynamic slot carved for ``RequestGPUs = n`` takes n free devices of its
partitionable slot, those whose properties satisfy the job's ``RequireGPUs`` when it has one, in
device order.
"""

from __future__ import annotations

import logging
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gridbus import classad

log = logging.getLogger("gridbus.startd")

NVIDIA_SMI = "nvidia-smi"
DISCOVERY_TIMEOUT = 30.0  # seconds nvidia-smi may take (a driver waking its devices is slow)
# The properties a device is queried for: nvidia-smi's names, in the order its csv answers.
_QUERY = ("uuid", "name", "compute_cap", "memory.total", "ecc.mode.current", "pci.bus_id", "driver_version")


@dataclass(frozen=True)
class Gpu:
    """One device: its id (``GPU-xxxxxxxx``) and its properties (DeviceName, Capability, ...)."""

    id: str
    props: Mapping[str, Any] = field(default_factory=dict)

    @property
    def attr(self) -> str:
        """The name of its nested ad in a slot ad (``GPUs_GPU_a0223334``)."""
        return attr_name(self.id)


def attr_name(device_id: str) -> str:
    # HTCondor's cleanStringForUseAsAttr: what a ClassAd name cannot hold becomes "_".
    return "GPUs_" + re.sub(r"[^A-Za-z0-9_]", "_", device_id)


# ---------------------------------------------------------------------- simulation
@dataclass(frozen=True)
class _SimKind:
    name: str
    capability: float
    memory_mb: int
    ecc: bool
    driver: int  # CUDA driver version, as CUDA encodes it (11020 is 11.2)


# condor_gpu_discovery's simulated devices (its manual's table), by D.
SIMULATED = (
    _SimKind("GeForce GT 330", 1.2, 1024, False, 6000),
    _SimKind("GeForce GTX 480", 2.0, 1536, False, 4020),
    _SimKind("Tesla V100-PCIE-16GB", 7.0, 24220, True, 11020),
    _SimKind("TITAN RTX", 7.5, 24220, False, 11020),
    _SimKind("A100-SXM4-40GB", 8.0, 40536, True, 11020),
    _SimKind("NVIDIA A100-SXM4-40GB MIG 3g.20gb", 8.0, 20096, True, 11020),
    _SimKind("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 8.0, 4864, True, 11040),
)


class DiscoveryError(ValueError):
    """GPU_DISCOVERY_EXTRA that cannot be acted on; the message says what is wrong."""


def parse_simulate(spec: str) -> list[int]:
    """The kinds (D) of the devices ``-simulate[:D[,N[,D2,N2...]]]`` asks for, one entry a device.

    No list is one device of kind 0; a single D equal to the size of the table is one of each,
    as condor_gpu_discovery reads it."""
    if not spec:
        return [0]
    parts = [p.strip() for p in spec.split(",")]
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise DiscoveryError(f"-simulate:{spec}: D and N must be whole numbers (D,N[,D2,N2...])") from None
    if numbers == [len(SIMULATED)]:
        return list(range(len(SIMULATED)))
    kinds: list[int] = []
    for i in range(0, len(numbers), 2):
        kind = numbers[i]
        count = numbers[i + 1] if i + 1 < len(numbers) else 1
        if not 0 <= kind < len(SIMULATED):
            raise DiscoveryError(f"-simulate:{spec}: device kind {kind} is not one of 0..{len(SIMULATED) - 1}")
        if count < 0:
            raise DiscoveryError(f"-simulate:{spec}: the count of kind {kind} is negative ({count})")
        kinds += [kind] * count
    return kinds


def simulated(kinds: Sequence[int]) -> list[Gpu]:
    """The devices condor_gpu_discovery -simulate reports: uuids ``a0223334-4445-...`` whose first
    byte counts up by 0x11, on PCI buses from 0x40; the driver of the first device for all."""
    driver = SIMULATED[kinds[0]].driver if kinds else 0
    out = []
    for index, kind in enumerate(kinds):
        sim = SIMULATED[kind]
        first = (index * 0x11 + 0xA0) & 0xFF
        uuid = f"{first:02x}223334-4445-5667-899a-abbccddeeff0"
        out.append(Gpu(f"GPU-{uuid[:8]}", {
            "DeviceName": sim.name,
            "Capability": sim.capability,
            "GlobalMemoryMb": sim.memory_mb,
            "ECCEnabled": sim.ecc,
            "DriverVersion": _driver_version(driver),
            "MaxSupportedVersion": driver,
            "DeviceUuid": uuid,
            "DevicePciBusId": f"0000:{index + 0x40:02x}:00.0",
        }))
    return out


def _driver_version(encoded: int) -> float:
    # condor_gpu_discovery prints "%d.%d" of (v / 1000, v % 100): 11020 is 11.20, a real 11.2.
    return float(f"{encoded // 1000}.{encoded % 100}")


# ---------------------------------------------------------------------- nvidia-smi
Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=DISCOVERY_TIMEOUT, check=False)


def from_nvidia_smi(run: Runner = _run, which: Callable[[str], str | None] = shutil.which) -> list[Gpu]:
    """The devices nvidia-smi lists; none (and nothing logged) where it is not installed, none
    (with a warning) where it fails, as when no driver is loaded."""
    path = which(NVIDIA_SMI)
    if path is None:
        return []
    try:
        listed = run([path, f"--query-gpu={','.join(_QUERY)}", "--format=csv,noheader,nounits"])
        banner = run([path, "-q"]) if listed.returncode == 0 else listed
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("GPU discovery: %s could not be run (%s); no GPUs advertised", path, exc)
        return []
    if listed.returncode != 0:
        why = (listed.stderr or listed.stdout).strip().splitlines()
        log.warning("GPU discovery: %s exited with %d (%s); no GPUs advertised", path, listed.returncode,
                    why[0] if why else "no message")
        return []
    cuda = re.search(r"CUDA Version\s*:\s*(\d+)\.(\d+)", banner.stdout or "")
    return parse_nvidia_smi(listed.stdout, (int(cuda.group(1)), int(cuda.group(2))) if cuda else None)


def parse_nvidia_smi(csv: str, cuda: tuple[int, int] | None) -> list[Gpu]:
    """Devices from nvidia-smi's ``--query-gpu`` csv (``_QUERY``'s columns); ``cuda``: the CUDA
    driver version its ``-q`` reports, as (major, minor)."""
    out = []
    for line in csv.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(_QUERY) or not cells[0]:
            continue
        uuid, name, cap, memory, ecc, bus, nvidia_driver = cells
        short = uuid.removeprefix("GPU-")
        props: dict[str, Any] = {"DeviceName": name, "DeviceUuid": short, "DevicePciBusId": bus,
                                 "NvidiaDriver": nvidia_driver}
        if re.fullmatch(r"\d+\.\d+", cap):
            props["Capability"] = float(cap)
        if memory.isdigit():
            props["GlobalMemoryMb"] = int(memory)
        if ecc in ("Enabled", "Disabled"):
            props["ECCEnabled"] = ecc == "Enabled"
        if cuda is not None:
            props["DriverVersion"] = float(f"{cuda[0]}.{cuda[1]}")
            props["MaxSupportedVersion"] = cuda[0] * 1000 + cuda[1] * 10
        out.append(Gpu(f"GPU-{short[:8]}", props))
    return out


def simulate_option(extra: str) -> list[int] | None:
    """The simulated devices' kinds GPU_DISCOVERY_EXTRA asks for, or None when it does not
    simulate (DiscoveryError for options that cannot be read)."""
    try:
        words = shlex.split(extra or "")
    except ValueError as exc:
        raise DiscoveryError(f"GPU_DISCOVERY_EXTRA {extra!r}: {exc}") from None
    for word in words:
        option, _, spec = word.partition(":")
        if option.lower() in ("-simulate", "--simulate"):
            return parse_simulate(spec)
    return None


def discover(extra: str = "", run: Runner = _run, which: Callable[[str], str | None] = shutil.which) -> list[Gpu]:
    """The machine's GPUs: simulated where ``extra`` (GPU_DISCOVERY_EXTRA) says ``-simulate``,
    else nvidia-smi's. Other condor_gpu_discovery options are accepted and not acted on."""
    kinds = simulate_option(extra)
    if kinds is not None:
        return simulated(kinds)
    words = shlex.split(extra or "")
    ignored = [w for w in words if w.startswith("-")]
    if ignored:
        log.info("GPU_DISCOVERY_EXTRA: %s not acted on (gridbus acts on -simulate only)", " ".join(ignored))
    return from_nvidia_smi(run, which)


# ---------------------------------------------------------------------- slot ads
def slot_attributes(devices: Sequence[Gpu], free: Iterable[str]) -> dict[str, Any]:
    """What a slot holding ``devices`` (``free`` of them by id not handed to a dynamic slot)
    advertises about them (see the module docstring)."""
    free_set = set(free)
    ad: dict[str, Any] = {
        "AssignedGPUs": ",".join(d.id for d in devices),
        "AvailableGPUs": classad.ExprTree("{" + ", ".join(d.attr for d in devices if d.id in free_set) + "}"),
    }
    if devices:
        common = dict(devices[0].props)
        for d in devices[1:]:
            common = {k: v for k, v in common.items() if k in d.props and _same(d.props[k], v)}
        for prop, value in common.items():
            ad[f"GPUs_{prop}"] = value
    for d in devices:
        ad[d.attr] = {"Id": d.id, **d.props}
    return ad


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def pick(slot_ad: Mapping[str, Any], free: Sequence[str], count: int, job_ad: Mapping[str, Any],
         require: Any) -> tuple[str, ...] | None:
    """``count`` of the ``free`` devices (by id, in order) whose properties in ``slot_ad`` satisfy
    ``require`` (the job's RequireGPUs, or None for any), or None when fewer qualify. A device's
    properties are MY; a name they lack is the job's (TARGET), as ``gpus_minimum_capability``'s
    ``Capability >= GPUsMinCapability`` needs."""
    if count <= 0:
        return ()
    if require is None:
        return tuple(free[:count]) if len(free) >= count else None
    test = classad.compile(str(require))
    chosen = []
    for device_id in free:
        props = _lookup(slot_ad, attr_name(device_id))
        if isinstance(props, Mapping) and test.test(dict(props), job_ad):
            chosen.append(device_id)
            if len(chosen) == count:
                return tuple(chosen)
    return None


def _lookup(ad: Mapping[str, Any], name: str) -> Any:
    if name in ad:
        return ad[name]
    low = name.lower()
    return next((v for k, v in ad.items() if k.lower() == low), None)


# HTCondor's ENVIRONMENT_VALUE_FOR_UnAssignedGPUs default: a job on a machine with GPUs but given
# none sees no device.
UNASSIGNED = "10000"


def job_environment(device_ids: Sequence[str], machine_has_gpus: bool) -> dict[str, str]:
    """What a job holding ``device_ids`` finds in its environment, as HTCondor's default
    ENVIRONMENT_FOR_AssignedGPUs sets it: ``_CONDOR_AssignedGPUs``, ``CUDA_VISIBLE_DEVICES`` and
    ``GPU_DEVICE_ORDINAL`` (the ids, comma separated; the CUDA runtime takes ``GPU-xxxxxxxx``).
    Nothing on a machine without GPUs."""
    if device_ids:
        ids = ",".join(device_ids)
        return {"_CONDOR_AssignedGPUs": ids, "CUDA_VISIBLE_DEVICES": ids, "GPU_DEVICE_ORDINAL": ids}
    if machine_has_gpus:
        return {"CUDA_VISIBLE_DEVICES": UNASSIGNED, "GPU_DEVICE_ORDINAL": UNASSIGNED}
    return {}
