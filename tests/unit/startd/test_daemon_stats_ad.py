"""The startd's own counters (requests, their runtime, reconnects, transfers) travel on its first
slot's ad only, in whole rounds and in rounds of the slots that changed."""

from __future__ import annotations

from gridbus.agents.startd import Startd
from gridbus.agents.startd.settings import StartdSettings


def test_the_first_slot_carries_the_startds_counters(tmp_path):
    settings = StartdSettings(execute=str(tmp_path / "ex"), base_cgroup="", num_slots=3,
                              overrides={"NUM_CPUS": 3})
    startd = Startd("r1", "amqp://guest:guest@127.0.0.1:5672/", settings=settings)
    startd.stats["RequestsServed"] = 7
    ads = startd.ads()
    assert len(ads) == 3
    with_counters = [ad["Name"] for ad in ads if "RequestsServed" in ad]
    assert with_counters == [ads[0]["Name"]]
    first = ads[0]
    assert first["RequestsServed"] == 7 and first["TransfersInFlight"] == 0
    assert {"RequestsRuntime", "BrokerReconnects", "TransferInputBytes", "TransferOutputBytes"} <= set(first)
    public, _ = startd.ads_named({ads[1]["Name"], ads[0]["Name"]})
    assert [ad["Name"] for ad in public if "RequestsServed" in ad] == [ads[0]["Name"]]
    public, _ = startd.ads_named({ads[2]["Name"]})
    assert not any("RequestsServed" in ad for ad in public)


def test_a_claimed_slot_names_its_accounting_group_before_its_job_starts(tmp_path):
    # A negotiator cycle between the claim and the job's start must charge the slot to the group.
    settings = StartdSettings(execute=str(tmp_path / "ex"), base_cgroup="", num_slots=2,
                              overrides={"NUM_CPUS": 2})
    startd = Startd("r2", "amqp://guest:guest@127.0.0.1:5672/", settings=settings)
    slots = list(startd.table.slots.values()) if isinstance(startd.table.slots, dict) else list(startd.table.slots)
    startd.table.claim(slots[0], "schedd@s", 60.0, {"Owner": "alice", "AcctGroup": "group_a"})
    startd.table.claim(slots[1], "schedd@s", 60.0, {"Owner": "bob"})
    by_name = {ad["Name"]: ad for ad in startd.ads()}
    assert by_name[slots[0].name]["State"] == "Claimed" and by_name[slots[0].name]["AccountingGroup"] == "group_a.alice"
    assert "AccountingGroup" not in by_name[slots[1].name]
