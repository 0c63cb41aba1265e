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
