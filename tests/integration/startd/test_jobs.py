"""Jobs through the real broker: activation, reports to the schedd, claim reuse, stopping jobs."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from gridbus.agents.startd import CLAIM_BUSY, proctree
from gridbus.console import Session
from gridbus.status import Status
from tests.integration.startd.helpers import exit_report, reports_for, startd_and_schedd, wait_until

pytestmark = pytest.mark.broker


def claim_slot(s: Session, startd, schedd, lease: int = 60, job: dict | None = None) -> str:
    slot = next(iter(startd.table.slots.values()))
    r = s.call(startd.address, "RequestClaim", {"ClaimId": slot.claim_id, "JobAd": job or {"Owner": "alice"},
                                                "Schedd": schedd.address, "LeaseDuration": lease})
    assert r.status == 0, r.text
    return r.ClaimId


def test_job_runs_with_argv_env_iwd_files_exit_code_and_claim_is_reused_at_once(amqp_url, tmp_path):
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    script = "import os,sys; print(sys.argv[1:], os.getcwd(), os.environ['X'], os.environ['Y']); print('e', file=sys.stderr); sys.exit(5)"
    job = {
        "ClusterId": 7, "ProcId": 0, "GlobalJobId": "fake#7.0#1", "Owner": "alice",
        "Cmd": sys.executable, "Arguments": f"-c '{script.replace(chr(39), chr(39) * 2)}' 'a b' c", "Iwd": str(iwd),
        "Environment": "X='x 1' Y=2", "Out": "out", "Err": "err", "RequestMemory": 100,
    }
    with startd_and_schedd(amqp_url, tmp_path, num_slots=1) as (startd, _t, schedd), Session(amqp_url, timeout=10) as s:
        claim = claim_slot(s, startd, schedd)
        r = s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": job})
        assert r.status == 0 and r.Slot == f"slot1@{startd.name}", r.text
        ex = exit_report(schedd, claim)
        assert ex["ExitCode"] == 5 and ex["ExitBySignal"] is False and ex["MemoryExceeded"] is False
        assert (ex["ClusterId"], ex["ProcId"], ex["GlobalJobId"]) == (7, 0, "fake#7.0#1")
        assert {"RemoteUserCpu", "RemoteSysCpu", "ImageSize", "ResidentSetSize", "MemoryUsage", "Time"} <= set(ex)
        assert reports_for(schedd, claim, "execute"), "an execute report comes first"
        assert (iwd / "out").read_text() == f"['a b', 'c'] {iwd} x 1 2\n"
        assert (iwd / "err").read_text() == "e\n"

        # The claim is free the moment the exit is reported: the next job starts at once, and a
        # second activation while it runs is refused as busy.
        t0 = time.monotonic()
        r = s.call(startd.address, "ActivateClaims", {"Activations": [
            {"ClaimId": claim, "JobAd": {**job, "ProcId": 1, "Cmd": "/bin/sh", "Arguments": "-c 'sleep 0.5; kill -TERM $$'"}},
            {"ClaimId": claim, "JobAd": {**job, "ProcId": 2}},
            {"ClaimId": "forged", "JobAd": job},
            {"JobAd": job},
        ]})
        statuses = [x["Status"] for x in r.Results]
        assert statuses == [0, Status.USER + CLAIM_BUSY, Status.FORBIDDEN, Status.INVALID_PARAMETER], r.Results
        ex = exit_report(schedd, claim, 2)
        assert ex["ProcId"] == 1 and ex["ExitBySignal"] is True and ex["ExitSignal"] == signal.SIGTERM
        assert "ExitCode" not in ex
        assert time.monotonic() - t0 < 5
        slot_ad = s.call(startd.address, "GetSlots").Slots[0]
        assert (slot_ad["State"], slot_ad["Activity"]) == ("Claimed", "Idle")

        # a job the starter cannot run comes back as an exit report with a hold reason
        r = s.call(startd.address, "ActivateClaim", {"ClaimId": claim, "JobAd": {**job, "ProcId": 3, "Cmd": "/no/such"}})
        assert r.status == 0
        ex = exit_report(schedd, claim, 3)
        assert ex["ProcId"] == 3 and ex["HoldReasonCode"] == 6 and "/no/such" in ex["HoldReason"]
        stats = dict(s.getObjects(_class="startd")[0].getStatistics())
        assert stats["JobsStarted"] == 2 and stats["JobsExited"] == 2 and stats["ClaimsActive"] == 1


@pytest.mark.parametrize("cgroups", ["cgroup", "scan"])
def test_memory_limit_and_removed_job_tree(amqp_url, tmp_path, cgroups):
    # Both starter backends: job cgroups (the default as root), and BASE_CGROUP = "" (the scan).
    scan = {"base_cgroup": ""} if cgroups == "scan" else {}
    hog = {"ClusterId": 1, "ProcId": 0, "Owner": "alice", "Cmd": sys.executable, "RequestMemory": 40,
           "Arguments": "-c 'import time; x = b\"x\" * (150 << 20); time.sleep(60)'"}
    tree = {"ClusterId": 1, "ProcId": 1, "Owner": "alice", "Cmd": "/bin/sh",
            "Arguments": "-c 'trap \"\" TERM; sleep 300 & sleep 300 & sleep 300; wait'"}
    with startd_and_schedd(amqp_url, tmp_path, num_slots=2, **scan) as (startd, _t, schedd), \
            Session(amqp_url, timeout=10) as s:
        assert (startd.cgroups is None) == (cgroups == "scan" or os.geteuid() != 0)
        slots = list(startd.table.slots.values())
        claims = []
        for slot in slots:
            r = s.call(startd.address, "RequestClaim", {"ClaimId": slot.claim_id, "JobAd": {"Owner": "alice"},
                                                        "Schedd": schedd.address})
            claims.append(r.ClaimId)
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claims[0], "JobAd": hog}).status == 0
        assert s.call(startd.address, "ActivateClaim", {"ClaimId": claims[1], "JobAd": tree}).status == 0
        ex = exit_report(schedd, claims[0])
        assert ex["MemoryExceeded"] is True and ex["HoldReasonCode"] == 34 and ex["ExitSignal"] == signal.SIGKILL
        assert ex["MemoryUsage"] >= 36  # the peak: at the limit (kernel), or past it (sampled)

        job = wait_until(lambda: startd.starter.running.get(claims[1]), what="the tree job running")
        wait_until(lambda: len(proctree.scan({job.pid}).get(job.pid, [])) >= 4, what="the whole tree started")
        t0 = time.monotonic()
        r = s.call(startd.address, "DeactivateClaim", {"ClaimId": claims[1]})  # graceful: TERM is ignored
        elapsed = time.monotonic() - t0
        assert r.status == 0 and elapsed < 1.0 + 2.0  # the kill timeout is 1 s
        assert proctree.scan({job.pid}).get(job.pid, []) == []
        ex = exit_report(schedd, claims[1])
        assert ex["ExitSignal"] == signal.SIGKILL and ex["Evicted"] is True and ex["EvictReason"] == "deactivate"
        assert claims[1] in startd.claims.by_id  # deactivation keeps the claim
        assert s.call(startd.address, "ReleaseClaim", {"ClaimId": claims[1]}).status == 0
        assert claims[1] not in startd.claims.by_id and slots[1].state == "Unclaimed" and slots[1].claim_id != claims[1]
        r = s.call(startd.address, "RequestClaim", {"ClaimId": claims[1], "JobAd": {}, "Schedd": schedd.address})
        assert r.status == Status.FORBIDDEN  # stale
