"""The startd on the real broker: its ads, forged claim ids, partitionable slots."""

from __future__ import annotations

import time

import pika
import pytest

from gridbus import bus, wire
from gridbus.agent.threaded import AgentThread
from gridbus.agents.startd import CLAIM_REFUSED, Startd
from gridbus.classad import ExprTree
from gridbus.console import Session
from gridbus.status import Status
from tests.integration.startd.helpers import settings, startd_and_schedd

pytestmark = pytest.mark.broker


def collect_ads(amqp_url: str, start, want: int, timeout: float = 15.0) -> tuple[dict, dict]:
    """Bind a queue to the ad exchange, run ``start()``, gather public and private Machine ads."""
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    ch = conn.channel()
    ch.exchange_declare(bus.ADS, "topic", durable=True)
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(q, bus.ADS, "machine.#")
    ch.queue_bind(q, bus.ADS, "private.machine.#")
    public: dict[str, dict] = {}
    private: dict[str, dict] = {}
    try:
        start()
        deadline = time.monotonic() + timeout
        while (len(public) < want or len(private) < want) and time.monotonic() < deadline:
            method, props, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                conn.process_data_events(time_limit=0.05)
                continue
            if props.type != bus.T_AD:
                continue
            target = private if method.routing_key.startswith("private.") else public
            for ad in wire.decode(body, props.content_type)["ads"]:
                target[ad["Name"]] = ad
    finally:
        conn.close()
    return public, private


def test_four_static_slots_advertise_correct_ads_and_forged_ids_get_status_6(amqp_url, tmp_path):
    startd = Startd("s4", amqp_url, settings=settings(tmp_path, num_slots=4, overrides={"NUM_CPUS": 4, "MEMORY": 8000}),
                    update_interval=1)
    thread = AgentThread(startd)
    try:
        public, private = collect_ads(amqp_url, thread.start, 4)
        assert sorted(public) == ["slot1@s4", "slot2@s4", "slot3@s4", "slot4@s4"]
        for i, name in enumerate(sorted(public), start=1):
            ad = public[name]
            assert ad["MyType"] == "Machine" and ad["MyAddress"] == "startd@s4" and ad["SlotID"] == i
            assert (ad["SlotType"], ad["PartitionableSlot"], ad["Cpus"], ad["Memory"]) == ("Static", False, 1, 2000)
            assert ad["TotalCpus"] == 4 and ad["TotalMemory"] == 8000 and ad["DetectedCpus"] >= 1
            assert ad["Disk"] > 0 and ad["TotalDisk"] >= ad["Disk"]
            assert (ad["State"], ad["Activity"]) == ("Unclaimed", "Idle")
            assert ad["EnteredCurrentState"] <= time.time() and ad["EnteredCurrentActivity"] <= time.time()
            assert ad["OpSys"] == "LINUX" and ad["Arch"] and ad["OpSysAndVer"] and ad["Machine"]
            assert ad["UidDomain"] and ad["FileSystemDomain"] and isinstance(ad["LoadAvg"], float)
            assert isinstance(ad["Requirements"], ExprTree) and "WithinResourceLimits" in str(ad["Requirements"])
            assert isinstance(ad["Start"], ExprTree) and isinstance(ad["Rank"], ExprTree)
            assert "ClaimId" not in ad and ad["UpdateSequenceNumber"] >= 1
            assert set(private[name]) >= {"MyType", "Name", "ClaimId"} and private[name]["ClaimId"]
            assert private[name]["ClaimId"] == startd.table.slots[name].claim_id
        with Session(amqp_url, timeout=10) as s:
            forged = "x" * 32
            r = s.call("startd@s4", "RequestClaim", {"ClaimId": forged, "JobAd": {}, "Schedd": "schedd@x"})
            assert r.status == Status.FORBIDDEN and "forged or stale" in r.text
            for method, args in (("ActivateClaim", {"ClaimId": forged, "JobAd": {"Cmd": "/bin/true"}}),
                                 ("DeactivateClaim", {"ClaimId": forged}), ("ReleaseClaim", {"ClaimId": forged})):
                r = s.call("startd@s4", method, args)
                assert r.status == Status.FORBIDDEN, (method, r.text)
            # an unclaimed slot's real id does not activate anything before RequestClaim
            r = s.call("startd@s4", "ActivateClaim", {"ClaimId": private["slot1@s4"]["ClaimId"], "JobAd": {"Cmd": "/bin/true"}})
            assert r.status == Status.FORBIDDEN and "RequestClaim first" in r.text
            assert s.call("startd@s4", "Alive", {"ClaimIds": [forged]}).Unknown == [forged]
            r = s.call("startd@s4", "Alive", {"ClaimIds": [3]})
            assert r.status == Status.INVALID_PARAMETER
    finally:
        thread.stop()


def test_partitionable_slot_advertises_and_fills_only_as_far_as_cpus_allow(amqp_url, tmp_path):
    with startd_and_schedd(amqp_url, tmp_path, "p1", partitionable=True,
                           overrides={"NUM_CPUS": 4, "MEMORY": 4096}) as (startd, _thread, schedd):
        (pslot,) = startd.table.slots.values()
        pid = pslot.claim_id
        with Session(amqp_url, timeout=10) as s:
            slots = s.call("startd@p1", "GetSlots").Slots
            assert [(a["Name"], a["SlotType"], a["PartitionableSlot"], a["Cpus"], a["Memory"]) for a in slots] == [
                ("slot1@p1", "Partitionable", True, 4, 4096)
            ]

            def claim(cpus: int):
                job = {"Owner": "alice", "RequestCpus": cpus, "RequestMemory": 512, "RequestDisk": 1000,
                       "Requirements": ExprTree("TARGET.OpSys == \"LINUX\"")}
                return s.call("startd@p1", "RequestClaim", {"ClaimId": pid, "JobAd": job, "Schedd": schedd.address,
                                                           "LeaseDuration": 60})

            one, two = claim(1), claim(2)
            assert one.status == 0 and two.status == 0, (one.text, two.text)
            assert (one.Slot, two.Slot) == ("slot1_1@p1", "slot1_2@p1")
            assert one.ClaimId != pid and two.ClaimId != pid and one.ClaimId != two.ClaimId
            assert (two.SlotAd["SlotType"], two.SlotAd["Cpus"], two.SlotAd["Memory"], two.SlotAd["DynamicSlot"]) == (
                "Dynamic", 2, 512, True)
            assert two.SlotAd["State"] == "Claimed" and two.SlotAd["RemoteOwner"] == "alice"
            refused = claim(2)  # one cpu left
            assert refused.status == Status.USER + CLAIM_REFUSED and "WithinResourceLimits" in refused.text
            three = claim(1)
            assert three.status == 0 and three.Slot == "slot1_3@p1"
            assert claim(1).status == Status.USER + CLAIM_REFUSED  # full
            by_name = {a["Name"]: a for a in s.call("startd@p1", "GetSlots").Slots}
            assert by_name["slot1@p1"]["Cpus"] == 0 and by_name["slot1@p1"]["NumDynamicSlots"] == 3
            assert by_name["slot1@p1"]["Memory"] == 4096 - 3 * 512
            # the 2-cpu dynamic slot goes away and its resources return
            assert s.call("startd@p1", "ReleaseClaim", {"ClaimId": two.ClaimId}).status == 0
            by_name = {a["Name"]: a for a in s.call("startd@p1", "GetSlots").Slots}
            assert "slot1_2@p1" not in by_name and by_name["slot1@p1"]["Cpus"] == 2
            assert by_name["slot1@p1"]["Memory"] == 4096 - 2 * 512
            assert s.call("startd@p1", "ActivateClaim", {"ClaimId": two.ClaimId, "JobAd": {"Cmd": "/bin/true"}}).status == Status.FORBIDDEN
            # a job whose own Requirements reject the slot is refused at claim time
            r = s.call("startd@p1", "RequestClaim", {"ClaimId": pid, "Schedd": schedd.address,
                                                     "JobAd": {"Requirements": ExprTree("TARGET.Memory > 1000000")}})
            assert r.status == Status.USER + CLAIM_REFUSED and "the job's Requirements" in r.text
            again = claim(2)
            assert again.status == 0 and again.SlotAd["Cpus"] == 2


def test_a_retried_partitionable_claim_carves_no_second_dynamic_slot(amqp_url, tmp_path):
    # A RequestClaim whose answer was lost is sent again with the same job: the startd answers with
    # the dynamic slot it carved the first time instead of carving another one.
    with startd_and_schedd(amqp_url, tmp_path, "p2", partitionable=True,
                           overrides={"NUM_CPUS": 4, "MEMORY": 4096}) as (startd, _thread, schedd):
        (pslot,) = startd.table.slots.values()
        with Session(amqp_url, timeout=10) as s:
            def claim(gid: str):
                job = {"Owner": "alice", "GlobalJobId": gid, "RequestCpus": 1, "RequestMemory": 512}
                return s.call("startd@p2", "RequestClaim", {"ClaimId": pslot.claim_id, "JobAd": job,
                                                           "Schedd": schedd.address, "LeaseDuration": 60})

            first, retry, other = claim("s#1.0#1"), claim("s#1.0#1"), claim("s#1.1#1")
            assert first.status == retry.status == other.status == 0
            assert (retry.ClaimId, retry.Slot) == (first.ClaimId, first.Slot)
            assert other.Slot != first.Slot
            by_name = {a["Name"]: a for a in s.call("startd@p2", "GetSlots").Slots}
            assert by_name["slot1@p2"]["NumDynamicSlots"] == 2 and by_name["slot1@p2"]["Cpus"] == 2
