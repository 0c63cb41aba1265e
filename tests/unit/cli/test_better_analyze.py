"""`gridbus q -better-analyze`: the negotiator's analysis laid out as condor_q's conditions table
and run analysis summary."""

from __future__ import annotations

import re

from gridbus.agents.negotiator.analyze import analyze
from gridbus.classad import ClassAd, ExprTree
from gridbus.console.cli.analyze import better_analyze


def analyze_job(job: ClassAd, slots: list[ClassAd]) -> str:
    return better_analyze(job, analyze(dict(job), [dict(s) for s in slots]))


def _job(**extra: object) -> ClassAd:
    ad = ClassAd({"ClusterId": 12, "ProcId": 3, "Owner": "alice", "DiskUsage": 10, "RequestMemory": 4096})
    ad["RequestDisk"] = ExprTree("DiskUsage")
    ad["Requirements"] = ExprTree('TARGET.OpSys == "LINUX" && (TARGET.Memory >= RequestMemory) && '
                                  '(TARGET.Disk >= RequestDisk || TARGET.HasFileTransfer)')
    ad.update(extra)
    return ad


def _slot(name: str, memory: int, state: str = "Unclaimed", start: str = "true", **extra: object) -> ClassAd:
    ad = ClassAd({"Name": name, "Machine": name.split("@")[-1], "OpSys": "LINUX", "Memory": memory,
                  "Disk": 1000, "State": state})
    ad["Requirements"] = ExprTree(start)
    ad.update(extra)
    return ad


def _steps(text: str) -> list[tuple[int, int, str]]:
    return [(int(a), int(b), c) for a, b, c in re.findall(r"^\[(\d+)\]\s+(\d+)  (.*)$", text, re.M)]


def test_the_condition_no_slot_meets_shows_zero() -> None:
    text = analyze_job(_job(), [_slot("slot1@a", 2048), _slot("slot2@a", 2048), _slot("slot1@b", 8192)])
    assert _steps(text) == [
        (0, 3, 'TARGET.OpSys == "LINUX"'),
        (1, 1, "TARGET.Memory >= RequestMemory"),
        (2, 3, "TARGET.Disk >= RequestDisk || TARGET.HasFileTransfer"),
    ]
    assert ("The Requirements expression for job 12.003 is\n\n    TARGET.OpSys == \"LINUX\" && "
            "TARGET.Memory >= RequestMemory &&\n    (TARGET.Disk >= RequestDisk || TARGET.HasFileTransfer)\n") in text
    # the attributes the Requirements read, through RequestDisk = DiskUsage too
    assert "    DiskUsage = 10\n" in text and "    RequestDisk = DiskUsage\n" in text
    assert "012.003:  Run analysis summary ignoring user priority.  Of 3 slots on 2 machines," in text
    assert "      2 slots are rejected by your job's requirements" in text
    assert "      1 slots match and are willing to run your job" in text
    assert "WARNING" not in text


def test_slots_that_refuse_the_job_and_busy_slots_are_counted_apart() -> None:
    slots = [
        _slot("slot1@a", 8192, start="TARGET.Owner != \"alice\""),
        _slot("slot2@a", 8192, state="Claimed", RemoteOwner="alice@pool"),
        _slot("slot3@a", 8192, state="Claimed", RemoteOwner="bob@pool"),
    ]
    text = analyze_job(_job(), slots)
    assert "      0 slots are rejected by your job's requirements" in text
    assert "      1 slots reject your job because of their own requirements" in text
    assert "      1 slots match and are already running your jobs" in text
    assert "      1 slots match but are serving other users" in text
    assert "      0 slots match and are willing to run your job" in text


def test_a_job_no_slot_can_take_is_flagged() -> None:
    text = analyze_job(_job(RequestMemory=10**6), [_slot("slot1@a", 2048)])
    assert "WARNING:  Be advised:\n   No machines matched the job's constraints" in text
