"""A resource request (the schedd's projection of a job ad) matches exactly as the full job ad.

The schedd sends the negotiator one request per autocluster, holding only the job attributes a
match may read; `analyze` tests the full job ad. The two must agree for every job and every slot:
both Requirements, both Ranks, and the requests a partitionable slot is carved by. The property
test draws job ads whose attributes are expressions over each other and slots whose START,
Requirements, Rank and other expressions read job attributes (scoped and unscoped), and compares
the projection with the full ad slot by slot and through the matchmaker and `analyze`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridbus.adrefs import slot_job_refs
from gridbus.agents.negotiator import matchmaker as mk
from gridbus.agents.negotiator.analyze import analyze
from gridbus.agents.negotiator.matchmaker import Matchmaker, eval_number, get, requested
from gridbus.autocluster import AutoClusters
from gridbus.classad import ExprTree
from tests.hypothesis_profiles import examples

DEFAULT_MEMORY = "ifthenelse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize + 1023) / 1024)"
REQUIREMENTS = '(TARGET.Arch == "X86_64") && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory)'


def slot(name: str, **attrs: Any) -> dict[str, Any]:
    ad = {"MyType": "Machine", "Name": name, "MyAddress": "startd@" + name.split("@")[-1], "SlotType": "Static",
          "Arch": "X86_64", "Cpus": 1, "Memory": 2048, "Disk": 100000, "State": "Unclaimed", "ClaimId": f"c-{name}",
          "Start": True, "Requirements": ExprTree("START && WithinResourceLimits"),
          "WithinResourceLimits": ExprTree("TARGET.RequestCpus <= MY.Cpus && TARGET.RequestMemory <= MY.Memory "
                                           "&& TARGET.RequestDisk <= MY.Disk")}
    ad.update(attrs)
    return ad


def job(cluster: int, **attrs: Any) -> dict[str, Any]:
    ad = {"ClusterId": cluster, "ProcId": 0, "Owner": "alice", "JobStatus": 1, "Cmd": "/bin/true",
          "GlobalJobId": f"s#{cluster}.0#1", "QDate": 1000 + cluster, "Iwd": "/tmp", "JobUniverse": 5,
          "ImageSize": 30, "DiskUsage": 30, "RequestCpus": 1, "RequestDisk": 10, "Requirements": ExprTree(REQUIREMENTS)}
    ad.update(attrs)
    return ad


def requests(jobs: list[dict[str, Any]], slots: list[dict[str, Any]], ac: AutoClusters | None = None) -> list[dict]:
    """What the schedd answers the negotiator (GetResourceRequests) for these slots."""
    ac = ac or AutoClusters()
    ac.set_pool_attrs(slot_job_refs({k.lower(): v for k, v in s.items()} for s in slots))
    return [ad for _acid, ad, _ids in ac.group(jobs, owner="alice")]


def matched(request: dict[str, Any], slots: list[dict[str, Any]]) -> list[str]:
    found, _ = Matchmaker(slots).match(request, len(slots))
    return [m.slot.name for m in found]


# ---------------------------------------------------------------------- the faults of the issue
def test_default_requests_after_a_literal_one_with_the_same_requirements_still_match():
    # The attribute list was cached per Requirements text: the second job got the first one's,
    # without ImageSize, MemoryUsage and DiskUsage, so its requests were undefined.
    slots = [slot("slot1@a"), slot("slot2@a")]
    literal = job(1, RequestMemory=64, RequestDisk=1024)
    default = job(2, RequestMemory=ExprTree(DEFAULT_MEMORY), RequestDisk=ExprTree("DiskUsage"))
    ac = AutoClusters()
    first, = requests([literal], slots, ac)
    assert matched(first, slots) == ["slot1@a", "slot2@a"]
    second, = requests([default], slots, ac)
    assert {"ImageSize", "DiskUsage"} <= set(second)
    assert matched(second, slots) == ["slot1@a", "slot2@a"] == matched(default, slots)


def test_job_attributes_a_slot_start_reads_are_in_the_request():
    slots = [slot("slot1@a", Start=ExprTree('TARGET.Department == "physics"')),
             slot("slot2@a", Start=ExprTree('Group =?= "cms"'))]  # unscoped, the slot has no Group
    physics, cms = job(1, Department="physics", RequestMemory=1), job(2, Group="cms", RequestMemory=1)
    got = requests([physics, cms], slots)
    assert got[0]["Department"] == "physics" and got[1]["Group"] == "cms"
    assert matched(got[0], slots) == ["slot1@a"] and matched(got[1], slots) == ["slot2@a"]


def test_references_are_followed_from_the_significant_attributes():
    # Requirements do not mention RequestMemory, but the slot's WithinResourceLimits does.
    slots = [slot("slot1@a", Memory=100), slot("slot2@a", Memory=4096)]
    big = job(1, Requirements=ExprTree("true"), RequestMemory=ExprTree("MemoryUsage * 2"), MemoryUsage=1000,
              RequestDisk=ExprTree("Scratch + 1"), Scratch=ExprTree("DiskUsage * 2"))
    got, = requests([big], slots)
    assert {"MemoryUsage", "Scratch", "DiskUsage"} <= set(got)
    assert matched(got, slots) == ["slot2@a"] == matched(big, slots)


def test_jobs_differing_only_in_what_a_slot_reads_are_different_autoclusters():
    slots = [slot("slot1@a", Start=ExprTree('TARGET.Department == "physics"'))]
    jobs = [job(1, Department="physics", RequestMemory=1), job(2, Department="chemistry", RequestMemory=1)]
    got = requests(jobs, slots)
    assert len(got) == 2 and [matched(r, slots) for r in got] == [["slot1@a"], []]


def test_an_expression_that_reads_what_cannot_be_named_sends_the_whole_ad():
    slots = [slot("slot1@a")]
    opaque = job(1, Requirements=ExprTree('eval(strcat("Tar", "get.Memory")) > 0 && MY.Wanted'), Wanted=True,
                 RequestMemory=1)
    got, = requests([opaque], slots)
    assert {k: v for k, v in got.items() if k != "AutoClusterId"} == opaque
    # A slot that reads what cannot be named: every request is a whole job ad.
    slots = [slot("slot1@a", Start=ExprTree('eval("TARGET.Wanted")'))]
    plain = job(2, RequestMemory=1, Wanted=True)
    assert slot_job_refs([{k.lower(): v for k, v in s.items()} for s in slots]) is None
    got, = requests([plain], slots)
    assert {k: v for k, v in got.items() if k != "AutoClusterId"} == plain
    assert matched(got, slots) == ["slot1@a"]
    # A whole TARGET handed to a function cannot be told either.
    assert slot_job_refs([{"start": ExprTree("size(TARGET) > 3")}]) is None


def test_autoclusters_with_no_idle_job_are_dropped():
    ac = AutoClusters()
    a, b = job(1, RequestMemory=1), job(2, RequestMemory=2)
    first = {acid for acid, *_ in ac.group([a, b], owner="alice")}
    assert len(ac) == 2
    ac.group([b], owner="alice")  # job 1 ran: its autocluster has no idle job left
    assert len(ac) == 1
    (acid, *_), = ac.group([a], owner="alice")
    assert acid not in first  # a new id: ids are never reused, and the old one is gone
    ac.group([], owner="bob")  # another owner's grouping leaves alice's alone
    assert len(ac) == 1


def test_the_cache_is_keyed_by_what_decides_it():
    ac = AutoClusters()
    ac.set_pool_attrs(["department"])
    assert "department" in ac.attributes(job(1, RequestMemory=1))
    ac.set_pool_attrs(["group"])  # another pool: the same job's list changes with it
    names = ac.attributes(job(1, RequestMemory=1))
    assert "group" in names and "department" not in names
    assert "memoryusage" in ac.attributes(job(2, RequestMemory=ExprTree(DEFAULT_MEMORY)))


# ---------------------------------------------------------------------- the property
JOB_NAMES = ["A", "B", "C", "Department", "ImageSize", "MemoryUsage"]
SLOT_NAMES = ["Memory", "Cpus", "KFlops", "Helper"]


def _ref(draw: Any) -> str:
    name = draw(st.sampled_from(JOB_NAMES + SLOT_NAMES))
    return draw(st.sampled_from(["", "TARGET.", "MY."])) + name


@st.composite
def expr(draw: Any, depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return _ref(draw)
        return draw(st.one_of(st.integers(-3, 200).map(str), st.sampled_from(['"physics"', '"cms"', "true", "undefined"])))
    a, b = draw(expr(depth - 1)), draw(expr(depth - 1))
    form = draw(st.sampled_from(["({a} + {b})", "({a} > {b})", "({a} == {b})", "({a} && {b})", "({a} || {b})",
                                 "ifthenelse({a} isnt undefined, {a}, {b})", "({a} =?= {b})", "({a} * 2)",
                                 'eval("{n}")']))
    return form.format(a=a, b=b, n=draw(st.sampled_from(JOB_NAMES)))


@st.composite
def job_and_slots(draw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    j = job(1)
    for name in JOB_NAMES:
        kind = draw(st.sampled_from(["absent", "int", "str", "expr"]))
        if kind == "int":
            j[name] = draw(st.integers(0, 5000))
        elif kind == "str":
            j[name] = draw(st.sampled_from(["physics", "cms"]))
        elif kind == "expr":
            j[name] = ExprTree(draw(expr()))
    j["Requirements"] = ExprTree(draw(st.sampled_from([REQUIREMENTS, "true", draw(expr())])))
    if draw(st.booleans()):
        j["Rank"] = ExprTree(draw(expr()))
    j["RequestMemory"] = ExprTree(draw(st.sampled_from([DEFAULT_MEMORY, "MemoryUsage * 2", "A", "1"])))
    j["RequestDisk"] = draw(st.sampled_from([ExprTree("DiskUsage"), 10, ExprTree("B + 1")]))
    slots = []
    for i in range(draw(st.integers(1, 4))):
        ad = slot(f"slot{i}@a", Memory=draw(st.sampled_from([1, 100, 4096])), KFlops=draw(st.integers(0, 9)),
                  Start=ExprTree(draw(expr())), Rank=ExprTree(draw(expr())), Helper=ExprTree(draw(expr())))
        if draw(st.booleans()):
            ad["Requirements"] = ExprTree(f"START && WithinResourceLimits && {draw(expr())}")
        if draw(st.integers(0, 3)) == 0:  # a partitionable slot: the requests carve it
            ad.update(SlotType="Partitionable", PartitionableSlot=True, Cpus=4)
        slots.append(ad)
    return j, slots


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_and_slots())
def test_matching_the_request_is_matching_the_full_ad(case):
    full, slots = case
    request, = requests([full], slots)
    for s in slots:
        assert mk.test_expr(get(request, "Requirements"), request, s) == mk.test_expr(get(full, "Requirements"), full, s)
        assert mk.test_expr(get(s, "Requirements"), s, request) == mk.test_expr(get(s, "Requirements"), s, full)
        assert eval_number(get(request, "Rank"), request, s) == eval_number(get(full, "Rank"), full, s)
        assert eval_number(get(s, "Rank"), s, request) == eval_number(get(s, "Rank"), s, full)
        assert requested(request, s) == requested(full, s)
    # The negotiator's answer for the request is the one for the full ad, and analyze (which
    # reads the full ad) counts as many matching slots as the negotiator finds.
    by_request, by_full = Matchmaker(slots).candidates(request), Matchmaker(slots).candidates(full)
    assert [x.name for x in by_request] == [x.name for x in by_full]
    assert analyze(full, slots)["Matching"] == len(by_request)
    n = len(slots) + 2
    (got, why), (want, why_full) = Matchmaker(slots).match(request, n), Matchmaker(slots).match(full, n)
    assert [(m.slot.name, m.weight) for m in got] == [(m.slot.name, m.weight) for m in want] and why == why_full
