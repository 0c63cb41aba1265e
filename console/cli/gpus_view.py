"""`gridbus status -gpus`: condor_status -gpus's slot table (its SlotGPUs print format).

The slots shown are condor_status's: a partitionable slot that has GPUs, and any other slot with
GPUs. Columns: Name, ST (the state and activity letters), User (RemoteUser, ``_`` when none),
GPUs (free ones), GPU-Memory (``GPUs_GlobalMemoryMb`` as a readable size) and GPU-Name
(``GPUs_DeviceName``, else the names of the free devices, joined by commas; ``*`` when neither).
The standard totals table follows, as condor_status prints it.
"""

from __future__ import annotations

from typing import Any

from gridbus import classad
from gridbus.classad.values import Value, is_number
from gridbus.console.cli import formats

# condor_status's constraint for the -gpus slot table, ``(PartitionableSlot && AssignedGPUs isnt
# undefined) ?: GPUs``, written for slot ads that say PartitionableSlot = false (HTCondor's leave
# it out, and its ``?:`` then falls through to GPUs).
CONSTRAINT = "(PartitionableSlot =?= true && AssignedGPUs isnt undefined) || (GPUs ?: 0) > 0"
_NAME_EXPR = 'GPUs_DeviceName ?: join(",", evalInEachContext(DeviceName, AvailableGPUs)) ?: CUDADeviceName'

# condor_status's letters: the state's, then the activity's.
_STATE_LETTER = {"Owner": "O", "Unclaimed": "U", "Matched": "M", "Claimed": "C", "Preempting": "P",
                 "Shutdown": "S", "Delete": "X", "Backfill": "F", "Drained": "D"}
_ACTIVITY_LETTER = {"Idle": "i", "Busy": "b", "Retiring": "r", "Vacating": "v", "Suspended": "s",
                    "Benchmarking": "e", "Killing": "k"}


def readable_mb(value: Any) -> str:
    """HTCondor's READABLE_MB: a size in MB as ``23.7 GB`` (powers of 1024, one decimal)."""
    if not is_number(value):
        return "_"
    size, power = float(value) * 1024 * 1024, 0
    while size > 1024.0 and power < 4:
        size, power = size / 1024.0, power + 1
    return f"{size:.1f} {['B ', 'KB', 'MB', 'GB', 'TB'][power]}"


def activity_code(ad: Any) -> str:
    return (_STATE_LETTER.get(str(formats.get(ad, "State", "")), " ")
            + _ACTIVITY_LETTER.get(str(formats.get(ad, "Activity", "")), " "))


def _device_names(ad: Any) -> str:
    value = classad.compile(_NAME_EXPR).eval(dict(ad.items()) if not isinstance(ad, dict) else ad)
    return value if isinstance(value, str) and value else "*"


def gpus_table(ads: list[Any]) -> str:
    rows = []
    for ad in sorted(ads, key=lambda a: str(formats.get(a, "Name", ""))):
        gpus = formats.get(ad, "GPUs")
        user = formats.get(ad, "RemoteUser")
        rows.append([str(formats.get(ad, "Name", "?")), activity_code(ad),
                     user if isinstance(user, str) and user else "_",
                     f"{int(gpus):4d}" if is_number(gpus) else "   _",
                     readable_mb(formats.get(ad, "GPUs_GlobalMemoryMb")), _device_names(ad)])
    header = ["Name", "ST", "User", "GPUs", "GPU-Memory", "GPU-Name"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [" ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip(), ""]
    lines += [" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n\n" + formats.status_totals(ads)


def shown(ad: Any) -> bool:
    """Whether condor_status -gpus lists the slot (``CONSTRAINT``)."""
    value = classad.compile(CONSTRAINT).eval(dict(ad.items()) if not isinstance(ad, dict) else ad)
    return value is True or (is_number(value) and not isinstance(value, Value) and value > 0)
