"""The startd's knobs, slot layouts and machine detection."""

from __future__ import annotations

import os

import pytest

from gridbus.agents.startd.detect import detect
from gridbus.agents.startd.settings import SlotShare, StartdSettings
from gridbus.agents.startd.slots import DYNAMIC, PARTITIONABLE, STATIC, Request, SlotTable
from gridbus.config import Config


def test_detect_reads_the_machine_and_overrides_win(tmp_path):
    m = detect(str(tmp_path))
    assert m.cpus >= 1 and m.memory > 0 and m.disk > 0
    assert m.opsys == "LINUX" and m.arch
    assert m.detected_cpus == m.cpus and m.uid_domain == m.machine
    o = detect(str(tmp_path), {"NUM_CPUS": 4, "MEMORY": 8192, "DISK": 1000, "ARCH": "aarch64", "NUM_GPUS": 2})
    assert (o.cpus, o.memory, o.disk, o.arch, o.gpus) == (4, 8192, 1000, "aarch64", 2)
    assert o.detected_cpus == m.detected_cpus  # Detected* stays what the kernel says
    attrs = o.attributes()
    assert attrs["TotalCpus"] == 4 and attrs["DetectedGPUs"] == 2 and o.gpu_ids == ("GPU-0", "GPU-1")
    assert "DetectedGPUs" not in detect(str(tmp_path), {"NUM_GPUS": 0}).attributes()


def test_settings_from_config_static_and_partitionable(tmp_path):
    cfg = Config({"EXECUTE": str(tmp_path), "NUM_SLOTS": 4, "NUM_CPUS": 4, "START": "TARGET.Owner == \"alice\""}, env={})
    s = StartdSettings.from_config(cfg)
    assert (s.num_slots, s.partitionable, s.overrides["NUM_CPUS"]) == (4, False, 4)
    assert s.start == 'TARGET.Owner == "alice"'
    cfg = Config({"EXECUTE": str(tmp_path), "NUM_SLOTS_TYPE_1": 1, "SLOT_TYPE_1_PARTITIONABLE": True,
                  "SLOT_TYPE_1": "cpus=100%, memory=50%"}, env={})
    s = StartdSettings.from_config(cfg)
    assert s.partitionable and s.slot_share == SlotShare(1.0, 0.5, 1.0)
    cfg = Config({"EXECUTE": str(tmp_path)}, env={"GRIDBUS_STARTER_UNPRIVILEGED_USER": "nobody"})
    s = StartdSettings.from_config(cfg)
    assert s.unprivileged_user == "nobody" and s.num_slots == 0 and not s.allow_root_jobs


def test_slot_share_syntax():
    assert SlotShare.parse("25%") == SlotShare(0.25, 0.25, 0.25)
    assert SlotShare.parse("cpus=2, mem=1024") == SlotShare(2, 1024, 1.0)
    with pytest.raises(ValueError, match="gpus"):
        SlotShare.parse("gpus=1")


def test_settings_validation():
    with pytest.raises(ValueError, match="absolute"):
        StartdSettings(execute="relative").validate()
    with pytest.raises(ValueError, match="report_timeout"):
        StartdSettings(report_timeout=0).validate()


def test_static_slots_share_the_machine_and_rekey_on_free():
    t = SlotTable("n1", 4, 8000, 4000, (), 4, False)
    assert list(t.slots) == ["slot1@n1", "slot2@n1", "slot3@n1", "slot4@n1"]
    s1 = t.slots["slot1@n1"]
    assert (s1.kind, s1.cpus, s1.memory, s1.disk) == (STATIC, 1, 2000, 1000)
    old = s1.claim_id
    assert t.by_claim_id(old) is s1
    claim = t.claim(s1, "schedd@x", 60, {"Owner": "alice"})
    assert claim.id == old and claim.owner == "alice" and s1.state == "Claimed"
    t.free(s1)
    assert t.by_claim_id(old) is None and t.by_claim_id(s1.claim_id) is s1 and s1.state == "Unclaimed"


def test_partitionable_carve_and_return():
    t = SlotTable("n1", 4, 4096, 10000, (), 0, True)
    (p,) = t.slots.values()
    assert (p.name, p.kind, p.cpus) == ("slot1@n1", PARTITIONABLE, 4)
    d1 = t.carve(p, Request(1, 1024, 100))
    d2 = t.carve(p, Request(2, 1024, 100))
    assert (d1.name, d2.name, d1.kind) == ("slot1_1@n1", "slot1_2@n1", DYNAMIC)
    assert (p.cpus, p.memory, p.disk) == (1, 2048, 9800)
    t.free(d2)
    assert (p.cpus, p.memory, p.disk) == (3, 3072, 9900)
    assert "slot1_2@n1" not in t.slots and t.by_claim_id(d2.claim_id) is None
    assert t.carve(p, Request(1, 1, 1)).name == "slot1_3@n1"  # names are never reused


def test_request_defaults_and_literals():
    t = SlotTable("n1", 4, 4096, 10000, (), 0, True)
    d = Request(1, 128, 1024)
    assert t.request_of({}, {}, d) == Request(1, 128, 1024, 0)
    assert t.request_of({"RequestCpus": 2, "requestmemory": 2000.5}, {}, d) == Request(2, 2001, 1024, 0)
    with pytest.raises(ValueError, match="string"):
        t.request_of({"RequestCpus": "2"}, {}, d)
    with pytest.raises(ValueError, match="negative"):
        t.request_of({"RequestCpus": -1}, {}, d)


def test_execute_default_is_absolute():
    assert os.path.isabs(StartdSettings().execute)


def test_reconfig_applies_start_and_the_run_as_policy(tmp_path, monkeypatch):
    import asyncio

    from gridbus.agents.startd import Startd

    conf = tmp_path / "gridbus.toml"
    conf.write_text(f'EXECUTE = "{tmp_path}/ex"\nNUM_SLOTS = 1\n')
    monkeypatch.setenv("GRIDBUS_CONFIG", str(conf))
    startd = Startd("r1", "amqp://guest:guest@127.0.0.1:5672/", settings=StartdSettings(execute=str(tmp_path / "ex"), base_cgroup=""))
    startd.config = Config.load(daemon="startd")
    conf.write_text(f'EXECUTE = "{tmp_path}/ex"\nNUM_SLOTS = 1\nSTART = "FALSE"\nSTARTER_UNPRIVILEGED_USER = "nobody"\n')
    changed = asyncio.run(startd.reconfig())
    assert {"START", "STARTER_UNPRIVILEGED_USER"} <= set(changed)
    assert str(startd.slot_ads.slot_ad(next(iter(startd.table.slots.values())))["Start"]).upper() == "FALSE"
    assert startd.starter.policy.unprivileged_user == "nobody"


def test_machine_ad_says_whether_jobs_run_in_cgroups(tmp_path):
    import uuid

    from gridbus.agents.startd import Startd

    url = "amqp://guest:guest@127.0.0.1:5672/"
    scan = Startd("c0", url, settings=StartdSettings(execute=str(tmp_path / "ex"), base_cgroup=""))
    assert scan.cgroups is None and scan.ads()[0]["HasCgroup"] is False
    with pytest.raises(ValueError, match="CGROUP_MEMORY_LIMIT_POLICY"):
        StartdSettings(memory_policy="strict").validate()
    with pytest.raises(ValueError, match="CGROUP_VERSION"):
        StartdSettings(cgroup_version="3").validate()
    if os.geteuid() != 0:
        return
    base = f"gridbus-test/{uuid.uuid4().hex[:12]}"
    for version, expected in (("auto", None), ("1", 1), ("2", 2)):
        startd = Startd("c1", url, settings=StartdSettings(execute=str(tmp_path / "ex"), base_cgroup=base,
                                                            cgroup_version=version))
        try:
            ad = startd.ads()[0]
            assert ad["HasCgroup"] is True and ad["CgroupVersion"] == (expected or startd.cgroups.version)
            assert startd.cgroups.base == f"{base}/c1"
        finally:
            startd.cgroups.remove_base()
