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


def _steps(text: str) -> list[tuple[int, int | str, str]]:
    """The table's rows: condor_q's layout, `[N]` in 5 columns, the count right-aligned in 9."""
    rows = re.findall(r"^(\[\d+\]\s*) ([ \w]{9})  (.*)$", text, re.M)
    assert all(len(step) == 5 for step, _, _ in rows), rows
    return [(int(step.strip()[1:-1]), int(m) if m.strip().isdigit() else m.strip(), c) for step, m, c in rows]


def test_the_steps_that_decide_the_match_are_left() -> None:
    text = analyze_job(_job(), [_slot("slot1@a", 2048), _slot("slot2@a", 2048), _slot("slot1@b", 8192)])
    # [0] matches more slots than [0] && [1] does, so [1] decides; [3] || [4] is [3] (every slot
    # passes it); the &&s reduce to their deciding operands and leave no row.
    assert _steps(text) == [
        (1, 1, "TARGET.Memory >= RequestMemory"),
        (3, 3, "TARGET.Disk >= RequestDisk"),
    ]
    assert ("The Requirements expression for job 12.003 is\n\n    TARGET.OpSys == \"LINUX\" && "
            "(TARGET.Memory >= RequestMemory) &&\n    (TARGET.Disk >= RequestDisk || TARGET.HasFileTransfer)\n\n"
            "    [0]    : TARGET.OpSys == \"LINUX\"\n    [1]    : TARGET.Memory >= RequestMemory\n"
            "    [2]    : [0] && [1]\n    [3]    : TARGET.Disk >= RequestDisk\n    [4]    : TARGET.HasFileTransfer\n"
            "    [5]    : [3] || [4]\n    [6]    : [2] && [5]\n\n") in text
    # the attributes the Requirements read, through RequestDisk = DiskUsage too, with condor_q's units
    assert ("Job 12.003 defines the following attributes:\n\n    DiskUsage = 10\n    RequestDisk = DiskUsage (kb)\n"
            "    RequestMemory = 4096 (mb)\n\n") in text
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


# The condition table's layout, as condor_q prints it (HTCondor's expression analyzer): the
# heading over the match column, the step numbers of a left-nested && chain (each && is a step),
# and the table after the sentence.
CONDOR_Q_TABLE = """The Requirements expression for job 781.000 reduces to these conditions:

        Slots
Step   Matched  Condition
----- --------- ---------
[0]           1  TARGET.Arch == "X86_64"
[1]           1  TARGET.OpSys == "LINUX"
[3]           1  TARGET.Disk >= RequestDisk
[5]           0  TARGET.Memory >= RequestMemory

781.000:  Run analysis summary ignoring user priority.  Of 1 slots on 1 machines,
"""


def test_a_job_matching_no_slot_lists_each_condition_with_its_count() -> None:
    job = ClassAd({"ClusterId": 781, "ProcId": 0, "RequestDisk": 10, "RequestMemory": 10**6})
    job["Requirements"] = ExprTree('TARGET.Arch == "X86_64" && TARGET.OpSys == "LINUX" && '
                                   "TARGET.Disk >= RequestDisk && TARGET.Memory >= RequestMemory")
    slot = _slot("slot1@a", 2048, Arch="X86_64")
    assert CONDOR_Q_TABLE in analyze_job(job, [slot])


def test_conditions_that_read_no_slot_attribute_are_always_or_never() -> None:
    job = _job(Project="x")
    job["Requirements"] = ExprTree('Project == "y" && TARGET.Memory >= RequestMemory')
    rows = _steps(analyze_job(job, [_slot("slot1@a", 8192)]))
    assert rows == [(0, "never", 'Project == "y"')]  # false && x is never, whatever the slots
    job["Requirements"] = ExprTree('Project == "x" && TARGET.Memory >= RequestMemory')
    assert _steps(analyze_job(job, [_slot("slot1@a", 8192), _slot("slot2@a", 2048)])) == [
        (1, 1, "TARGET.Memory >= RequestMemory")]  # true && x is x


def test_every_slot_counted_when_none_fails() -> None:
    job = _job()
    job["Requirements"] = ExprTree("TARGET.Memory >= RequestMemory || TARGET.Disk > 1000000000")
    assert _steps(analyze_job(job, [_slot("slot1@a", 8192), _slot("slot2@a", 8192)])) == [
        (0, 2, "TARGET.Memory >= RequestMemory")]


def test_an_expression_of_thousands_of_conditions_shows_its_top_level_clauses() -> None:
    job = _job()
    names = " || ".join(f'TARGET.Name == "n{i}"' for i in range(3000))
    job["Requirements"] = ExprTree(f"TARGET.Memory >= RequestMemory && ({names})")
    text = analyze_job(job, [_slot("slot1@a", 8192), _slot("n5", 8192)])
    steps = _steps(text)
    assert [(s, m) for s, m, _ in steps] == [(0, 2), (1, 1)] and steps[1][2].startswith('(TARGET.Name == "n0"')
