"""The requests are numbers when a claim is activated: evaluated against the job ad (the slot as
TARGET), a default request gets a memory limit a program fits in, and a request that is no number
holds the job with a reason naming it."""

from __future__ import annotations

import pytest

from gridbus.classad import ExprTree
from gridbus.console import Session
from tests.integration.startd.helpers import exit_report, startd_and_schedd

pytestmark = pytest.mark.broker

DEFAULT_MEMORY = ExprTree("ifthenelse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize + 1023) / 1024)")


def test_requests_are_evaluated_at_activation(amqp_url, tmp_path):
    base = {"ClusterId": 1, "Owner": "alice", "Iwd": str(tmp_path), "ImageSize": 30, "DiskUsage": 30,
            "RequestDisk": ExprTree("DiskUsage"), "RequestCpus": 1}
    # condor_submit's default RequestMemory evaluates to 1 MiB for a small executable: the job is
    # held to the 128 MiB a dynamic slot would give it, so a `sleep` (over 1 MiB resident) runs.
    sleeper = {**base, "ProcId": 0, "Cmd": "/bin/sleep", "Arguments": "1.5", "RequestMemory": DEFAULT_MEMORY}
    undefined = {**base, "ProcId": 1, "Cmd": "/bin/true", "RequestMemory": ExprTree("MemoryUsage * 2")}
    text = {**base, "ProcId": 2, "Cmd": "/bin/true", "RequestMemory": 1, "RequestCpus": "two"}
    with startd_and_schedd(amqp_url, tmp_path, num_slots=1, memory_check_interval=0.1) as (startd, _t, schedd), \
            Session(amqp_url, timeout=10) as s:
        slot = next(iter(startd.table.slots.values()))
        claim = s.call(startd.address, "RequestClaim", {"ClaimId": slot.claim_id, "JobAd": {"Owner": "alice"},
                                                        "Schedd": schedd.address, "LeaseDuration": 60}).ClaimId
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": sleeper}).status == 0
        ex = exit_report(schedd, claim)
        assert ex["MemoryExceeded"] is False and ex["ExitCode"] == 0, ex

        for n, job, attr in ((2, undefined, "RequestMemory"), (3, text, "RequestCpus")):
            assert s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job}).status == 0
            ex = exit_report(schedd, claim, n)
            assert ex["ProcId"] == job["ProcId"] and ex["HoldReasonCode"] == 21, ex
            assert ex["HoldReason"].startswith(attr) and "not a number" in ex["HoldReason"], ex["HoldReason"]
        assert "RequestMemory = MemoryUsage * 2 evaluates to undefined" in exit_report(schedd, claim, 2)["HoldReason"]
