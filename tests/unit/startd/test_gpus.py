"""GPU discovery (simulated and nvidia-smi's), the slot ads' GPU attributes, and devices handed out by id."""

from __future__ import annotations

import subprocess

import classad2
import pytest

from gridbus import classad
from gridbus.agents.startd import gpus
from gridbus.agents.startd.slots import NotEnoughGPUs, Request, SlotTable


def test_simulate_names_devices_as_condor_gpu_discovery_does():
    # condor_gpu_discovery -simulate:0,4 reports GPU-a0223334, GPU-b1223334, GPU-c2223334, GPU-d3223334
    found = gpus.discover("-simulate:0,4")
    assert [d.id for d in found] == ["GPU-a0223334", "GPU-b1223334", "GPU-c2223334", "GPU-d3223334"]
    assert found[0].props["DeviceName"] == "GeForce GT 330" and found[0].props["Capability"] == 1.2
    assert found[0].props["GlobalMemoryMb"] == 1024 and found[0].props["DriverVersion"] == 6.0


def test_simulate_pairs_kinds_with_counts_and_reads_the_table():
    found = gpus.discover("-extra -simulate:1,1,2,1,3,1")
    assert [d.props["DeviceName"] for d in found] == ["GeForce GTX 480", "Tesla V100-PCIE-16GB", "TITAN RTX"]
    assert [d.props["Capability"] for d in found] == [2.0, 7.0, 7.5]
    assert [d.props["GlobalMemoryMb"] for d in found] == [1536, 24220, 24220]
    assert {d.props["DriverVersion"] for d in found} == {4.2}  # the first device's driver, for all
    assert len(gpus.discover("-simulate")) == 1 and len(gpus.discover("-simulate:7")) == 7  # one of each
    assert gpus.parse_simulate("2") == [2]


@pytest.mark.parametrize("spec, why", [("9,1", "not one of 0..6"), ("a,1", "whole numbers"), ("2,-1", "negative")])
def test_a_bad_simulate_says_what_is_wrong(spec, why):
    with pytest.raises(gpus.DiscoveryError, match=why):
        gpus.discover(f"-simulate:{spec}")


def test_no_nvidia_smi_is_no_gpu_and_no_call():
    def run(argv):
        raise AssertionError("nothing is run where nvidia-smi is absent")

    assert gpus.discover("", run=run, which=lambda name: None) == []


def test_nvidia_smi_devices_and_its_failure():
    csv = ("GPU-6a96bd13-70bc-6494-6d62-1b77a9a7f29f, TITAN RTX, 7.5, 24220, Disabled, 00000000:AF:00.0, 535.104.05\n"
           "GPU-c4a646d7-aa14-1dd1-f1b0-57288cda864d, Tesla V100-PCIE-16GB, 7.0, 16160, Enabled, 00000000:3B:00.0, 535.104.05\n")
    answers = {"--query-gpu": (0, csv), "-q": (0, "Driver Version : 535.104.05\nCUDA Version : 12.2\n")}

    def run(argv):
        code, out = next(v for k, v in answers.items() if argv[1].startswith(k))
        return subprocess.CompletedProcess(argv, code, out, "")

    found = gpus.discover("", run=run, which=lambda name: "/usr/bin/nvidia-smi")
    assert [d.id for d in found] == ["GPU-6a96bd13", "GPU-c4a646d7"]
    assert found[1].props == {"DeviceName": "Tesla V100-PCIE-16GB", "DeviceUuid": "c4a646d7-aa14-1dd1-f1b0-57288cda864d",
                              "DevicePciBusId": "00000000:3B:00.0", "NvidiaDriver": "535.104.05", "Capability": 7.0,
                              "GlobalMemoryMb": 16160, "ECCEnabled": True, "DriverVersion": 12.2,
                              "MaxSupportedVersion": 12020}
    answers["--query-gpu"] = (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert gpus.discover("", run=run, which=lambda name: "/usr/bin/nvidia-smi") == []


def _to_classad2(ad):
    out = classad2.ClassAd()
    for k, v in ad.items():
        if isinstance(v, dict):
            out[k] = _to_classad2(v)
        elif isinstance(v, classad.ExprTree):
            out[k] = classad2.ExprTree(str(v))
        else:
            out[k] = v
    return out


def test_slot_attributes_count_matches_as_classad2_does():
    devices = gpus.simulated([2, 3, 0])  # V100 7.0, TITAN RTX 7.5, GT 330 1.2
    ad = gpus.slot_attributes(devices, [d.id for d in devices][1:])  # the V100 is handed out
    assert ad["AssignedGPUs"] == "GPU-a0223334,GPU-b1223334,GPU-c2223334"
    assert "".join(str(ad["AvailableGPUs"]).split()) == "{GPUs_GPU_b1223334,GPUs_GPU_c2223334}"
    assert ad["GPUs_GPU_a0223334"]["Id"] == "GPU-a0223334" and ad["GPUs_GPU_b1223334"]["DeviceName"] == "TITAN RTX"
    assert ad["GPUs_DriverVersion"] == 11.2 and "GPUs_Capability" not in ad  # only what all share
    job = {"RequestGPUs": 1, "RequireGPUs": classad.ExprTree("Capability >= 7.0")}
    count = "countMatches(MY.RequireGPUs, TARGET.AvailableGPUs)"
    assert classad.compile(count).eval(job, ad) == classad2.ExprTree(count).eval(_to_classad2(job), _to_classad2(ad)) == 1
    one = gpus.slot_attributes(devices[:1], [devices[0].id])
    assert one["GPUs_Capability"] == 7.0 and one["GPUs_DeviceName"] == "Tesla V100-PCIE-16GB"


def test_pick_takes_qualifying_devices_in_order():
    devices = gpus.simulated([0, 2, 3])  # GT 330 1.2, V100 7.0, TITAN RTX 7.5
    ids = [d.id for d in devices]
    ad = gpus.slot_attributes(devices, ids)
    assert gpus.pick(ad, ids, 2, {}, None) == tuple(ids[:2])
    assert gpus.pick(ad, ids, 1, {}, classad.ExprTree("Capability >= 7.0")) == (ids[1],)
    assert gpus.pick(ad, ids, 2, {}, classad.ExprTree("Capability >= 7.0")) == tuple(ids[1:])
    assert gpus.pick(ad, ids, 3, {}, classad.ExprTree("Capability >= 7.0")) is None
    # A name the device lacks is the job's: gpus_minimum_capability's form.
    job = {"GPUsMinCapability": 7.5}
    assert gpus.pick(ad, ids, 1, job, classad.ExprTree("Capability >= GPUsMinCapability")) == (ids[2],)


def test_a_partitionable_slot_hands_out_devices_and_takes_them_back():
    devices = gpus.simulated([0, 2])
    ids = tuple(d.id for d in devices)
    t = SlotTable("n1", 4, 4096, 10000, ids, 0, True)
    (p,) = t.slots.values()
    assert p.gpus == 2 and p.free_gpu_ids() == ids
    ad = gpus.slot_attributes(devices, ids) | {"Name": p.name}
    defaults = Request(1, 128, 1024)
    want = t.request_of({"RequestGPUs": 1, "RequireGPUs": classad.ExprTree("Capability >= 7.0")}, ad, defaults, p)
    assert want.gpu_ids == (ids[1],)
    d1 = t.carve(p, want)
    assert d1.gpu_ids == (ids[1],) and p.free_gpu_ids() == (ids[0],) and p.gpus == 1
    with pytest.raises(NotEnoughGPUs, match="fewer that satisfy RequireGPUs"):
        t.request_of({"RequestGPUs": 1, "RequireGPUs": classad.ExprTree("Capability >= 7.0")}, ad, defaults, p)
    d2 = t.carve(p, t.request_of({"RequestGPUs": 1}, ad, defaults, p))
    assert d2.gpu_ids == (ids[0],) and p.gpus == 0
    with pytest.raises(NotEnoughGPUs, match="only 0 free GPU"):
        t.request_of({"RequestGPUs": 1}, ad, defaults, p)
    t.free(d1)
    assert p.free_gpu_ids() == (ids[1],) and p.gpus == 1
    assert gpus.job_environment(d2.gpu_ids, True) == {"_CONDOR_AssignedGPUs": ids[0], "CUDA_VISIBLE_DEVICES": ids[0],
                                                      "GPU_DEVICE_ORDINAL": ids[0]}
    assert gpus.job_environment((), True)["CUDA_VISIBLE_DEVICES"] == "10000"
    assert gpus.job_environment((), False) == {}


def test_static_slots_share_the_devices_out():
    ids = tuple(d.id for d in gpus.simulated([2, 2]))
    t = SlotTable("n1", 4, 4096, 10000, ids, 4, False)
    assert [s.gpu_ids for s in t.slots.values()] == [(ids[0],), (ids[1],), (), ()]
    # A slot without a GPU on a machine with some: its job sees none (HTCondor's 10000).
    assert all(s.machine_has_gpus() for s in t.slots.values())
    assert not any(s.machine_has_gpus() for s in SlotTable("n1", 2, 4096, 10000, (), 2, False).slots.values())


def test_a_bad_gpu_discovery_extra_is_a_bad_configuration():
    from gridbus.agents.startd.settings import StartdSettings

    with pytest.raises(ValueError, match="device kind 8"):
        StartdSettings(gpu_discovery_extra="-simulate:8").validate()
    StartdSettings(gpu_discovery_extra="-extra -simulate:2,2").validate()
