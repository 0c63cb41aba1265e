"""`gridbus status -gpus`: condor_status -gpus's table over slot ads with GPUs."""

from __future__ import annotations

from gridbus.agents.startd import gpus
from gridbus.console.cli import gpus_view


def _slot(name, state, activity, devices, free, **extra):
    return {"Name": name, "State": state, "Activity": activity, "GPUs": len(free), "Arch": "X86_64", "OpSys": "LINUX",
            **gpus.slot_attributes(devices, free), **extra}


def test_the_table_lists_the_slots_with_gpus_as_condor_status_does():
    devices = gpus.simulated([0, 2])  # GT 330 (1 GiB) and V100 (24220 MB)
    pslot = _slot("slot1@g", "Unclaimed", "Idle", devices, [devices[0].id], PartitionableSlot=True)
    dslot = _slot("slot1_1@g", "Claimed", "Busy", devices[1:], [devices[1].id], RemoteUser="alice@pool")
    plain = {"Name": "slot2@h", "State": "Unclaimed", "Activity": "Idle", "PartitionableSlot": False}
    assert [gpus_view.shown(a) for a in (pslot, dslot, plain)] == [True, True, False]
    lines = gpus_view.gpus_table([dslot, pslot]).splitlines()
    assert lines[0].split() == ["Name", "ST", "User", "GPUs", "GPU-Memory", "GPU-Name"]
    # the devices differ: no common memory; the name is the free devices' names
    assert lines[2].split() == ["slot1@g", "Ui", "_", "1", "_", "GeForce", "GT", "330"]
    assert lines[3].split() == ["slot1_1@g", "Cb", "alice@pool", "1", "23.7", "GB", "Tesla", "V100-PCIE-16GB"]
    assert "Total" in lines[-1]


def test_readable_mb_is_htcondors():
    assert gpus_view.readable_mb(1024) == "1024.0 MB"
    assert gpus_view.readable_mb(40536) == "39.6 GB"
    assert gpus_view.readable_mb(None) == "_"
