"""Submit, Query, job objects, authorization and idempotence on the real broker."""

from __future__ import annotations

import pytest

from gridbus.classad import ExprTree
from gridbus.console import Schedd, Session
from gridbus.status import Status
from tests.integration.schedd.conftest import job_ad

STRING_TYPE, INTEGER_TYPE, EXPR_TYPE = "STRING_TYPE", "INTEGER_TYPE", "EXPR_TYPE"


def test_the_qmf_submission_program_submits_and_finds_the_job_with_get_objects(schedd, amqp_url):
    # The program of the QMF submission interface of Condor in Red Hat MRG in Python 3, with gridbus's import (and the type names defined).
    UNIVERSE = {"VANILLA": 5, "SCHEDULER": 7, "GRID": 9, "JAVA": 10, "PARALLEL": 11, "LOCAL": 12, "VM": 13}
    JOB_STATUS = ("", "Idle", "Running", "Removed", "Completed", "Held", "")
    ad = {"Cmd": {"TYPE": STRING_TYPE, "VALUE": "/bin/sleep"},
          "Args": {"TYPE": STRING_TYPE, "VALUE": "120"},
          "Requirements": {"TYPE": EXPR_TYPE, "VALUE": "TRUE"},
          "JobUniverse": {"TYPE": INTEGER_TYPE, "VALUE": "%s" % (UNIVERSE["VANILLA"],)},  # noqa: UP031 (as the seed has it)
          "Iwd": {"TYPE": STRING_TYPE, "VALUE": "/tmp"},
          "Owner": {"TYPE": STRING_TYPE, "VALUE": "guest"}}
    session = Session()
    session.addBroker(amqp_url)
    try:
        schedulers = session.getObjects(_class="scheduler", _package="mrg.grid")
        result = schedulers[0].Submit(ad)
        assert result.status == 0, result.text
        jobs = session.getObjects(_class="job", _package="mrg.grid")
        job = next((y for y in jobs if y.CustomId == result.Id), None)
        assert job, "Did not find job"
        assert JOB_STATUS[job.JobStatus] == "Idle"
        props = dict(job.getProperties())
        assert props["Cmd"] == "/bin/sleep" and props["Args"] == "120" and props["Owner"] == "guest"
        assert props["GlobalJobId"] == f"s1#{result.ClusterId}.0#{props['QDate']}"
        # The job object's methods work on it, named by its GlobalJobId.
        assert job.GetAd().JobAd["ClusterId"] == result.ClusterId
        assert job.Hold("seed test").Totals["TotalSuccess"] == 1
    finally:
        session.close()


def test_submit_sets_the_schedd_attributes_and_defaults(schedd, session):
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobPrio=3, ClusterId=999, Owner="guest"), "Count": 2})
    assert r.status == 0, r.text
    assert (r.FirstProc, r.NumProcs) == (0, 2) and r.Id == f"s1#{r.ClusterId}.0"
    ad = session.call("schedd@s1", "GetAd", {"Id": f"{r.ClusterId}.1"}).JobAd
    assert ad["ClusterId"] == r.ClusterId != 999 and ad["ProcId"] == 1
    assert ad["JobStatus"] == 1 and ad["QDate"] == ad["EnteredCurrentStatus"] and ad["JobPrio"] == 3
    assert ad["Owner"] == "guest" and ad["User"].startswith("guest@")
    assert ad["MyType"] == "Job" and ad["TargetType"] == "Machine"
    assert ad["ImageSize"] == 0 and ad["RemoteUserCpu"] == 0.0 and ad["NumJobStarts"] == 0
    assert ad["GlobalJobId"] == f"s1#{r.ClusterId}.1#{ad['QDate']}"


def test_submit_on_hold_and_missing_attributes(schedd, session):
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobStatus=5)})
    ad = session.call("schedd@s1", "GetAd", {"Id": f"{r.ClusterId}.0"}).JobAd
    assert (ad["JobStatus"], ad["HoldReasonCode"]) == (5, 15)
    bad = {k: v for k, v in job_ad().items() if k not in ("Iwd", "Cmd")}
    r = session.call("schedd@s1", "Submit", {"Ad": bad})
    assert r.status == Status.INVALID_PARAMETER and "Cmd, Iwd" in r.text
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(Requirements="TARGET.Memory > 1")})
    assert r.status == Status.INVALID_PARAMETER and "expression" in r.text


def test_submission_id_makes_submit_idempotent(schedd, session):
    args = {"Ad": job_ad(), "Count": 3, "SubmissionId": "sub-1"}
    first = session.call("schedd@s1", "Submit", args)
    again = session.call("schedd@s1", "Submit", args)
    assert first.status == again.status == 0 and first.outArgs == again.outArgs
    assert len(session.call("schedd@s1", "Query", {}).Jobs) == 3
    other = session.call("schedd@s1", "Submit", {**args, "Count": 4})
    assert other.status == Status.USER + 2 and "sub-1" in other.text and str(first.ClusterId) in other.text
    assert len(session.call("schedd@s1", "Query", {}).Jobs) == 3


def test_another_user_cannot_hold_my_job_and_is_told_why(schedd, session, user_url):
    alice_url, bob_url = user_url("alice-s"), user_url("bob-s")
    with Session(alice_url, timeout=15) as alice, Session(bob_url, timeout=15) as bob:
        r = alice.call("schedd@s1", "Submit", {"Ad": job_ad()})
        assert r.status == 0, r.text
        job = f"{r.ClusterId}.0"
        assert alice.call("schedd@s1", "GetAd", {"Id": job}).JobAd["Owner"] == "alice-s"
        denied = bob.call("schedd@s1", "Hold", {"Ids": [job]})
        assert denied.status == Status.FORBIDDEN
        assert "bob-s may not hold" in denied.text and job in denied.text and "owner alice-s" in denied.text
        assert denied.Totals["TotalPermissionDenied"] == 1
        with pytest.raises(PermissionError, match="bob-s may not hold"):
            Schedd("schedd@s1", url=bob_url).act(1, job)
        # Submitting as someone else is refused too, with the reason.
        r = bob.call("schedd@s1", "Submit", {"Ad": job_ad(Owner="alice-s")})
        assert r.status == Status.FORBIDDEN and "QUEUE_SUPER_USERS" in r.text
        assert alice.call("schedd@s1", "Hold", {"Ids": [job]}).Totals["TotalSuccess"] == 1
        # The daemon account (a queue super user) may act on anyone's job.
        assert session.call("schedd@s1", "Release", {"Ids": [job]}).Totals["TotalSuccess"] == 1


def test_query_constraint_projection_limit_and_streaming(schedd, session):
    a = session.call("schedd@s1", "Submit", {"Ad": job_ad(), "Count": 1500}).ClusterId
    b = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobPrio=7), "Procs": [{"Args": "x"}, {"Args": "y"}]}).ClusterId
    jobs = session.call("schedd@s1", "Query", {"Projection": ["ClusterId", "ProcId"]}).Jobs
    assert len(jobs) == 1502 and jobs[0] == {"ClusterId": a, "ProcId": 0} and jobs[-1]["ClusterId"] == b
    got = session.call("schedd@s1", "Query", {"Constraint": 'Args == "y"', "Projection": ["procid", "Args"]}).Jobs
    assert got == [{"ProcId": 1, "Args": "y"}]
    assert len(session.call("schedd@s1", "Query", {"Limit": 10}).Jobs) == 10
    r = session.call("schedd@s1", "Query", {"Constraint": "JobPrio >"})
    assert r.status == Status.INVALID_PARAMETER and "constraint" in r.text


def test_console_schedd_submit_query_act_edit_history(schedd, amqp_url):
    from gridbus.console import JobAction, QueryOpt
    from gridbus.submit import Submit

    with Schedd(url=amqp_url) as s:
        sub = Submit({"executable": "/bin/echo", "arguments": "$(Item)", "universe": "vanilla"})
        result = s.submit(sub, itemdata=[{"Item": "a"}, {"Item": "b"}])
        c = result.cluster()
        assert (result.first_proc(), result.num_procs()) == (0, 2)
        ads = s.query(f"ClusterId == {c}", ["ProcId", "Args"])
        assert sorted((a["ProcId"], a["Args"]) for a in ads) == [(0, "a"), (1, "b")]
        assert s.edit(f"{c}.0", "Foo", '"bar"') == 1 and s.query(f"ClusterId == {c} && Foo == \"bar\"")[0]["ProcId"] == 0
        with pytest.raises(PermissionError, match="JobStatus"):
            s.edit(str(c), "JobStatus", "4")
        totals = s.act(JobAction.Hold, [f"{c}.0", f"{c}.7"])
        assert (totals["TotalSuccess"], totals["TotalNotFound"]) == (1, 1)
        assert s.act(JobAction.Hold, f"{c}.0")["TotalAlreadyDone"] == 1
        assert s.act(JobAction.Release, f"ClusterId == {c}")["TotalBadStatus"] == 1
        summary = s.query(opts=QueryOpt.SummaryOnly)
        assert summary[-1]["Jobs"] == 2 and summary[-1]["Held"] == 0 and summary[-1]["Idle"] == 2
        assert s.act(JobAction.Remove, c)["TotalSuccess"] == 2
        assert s.query(f"ClusterId == {c}") == []
        hist = s.history(f"ClusterId == {c}", ["ProcId", "JobStatus", "RemoveReason"])
        assert sorted(h["ProcId"] for h in hist) == [0, 1] and all(h["JobStatus"] == 3 for h in hist)
        assert hist[0]["RemoveReason"].endswith("(by user guest)")
        assert [h["ProcId"] for h in s.history(f"ClusterId == {c}", since=f"{c}.1")] in ([], [0])


def test_submit_requirements_refuse_with_their_reason(make_schedd, session):
    from gridbus.agents.schedd.settings import SubmitRequirement

    make_schedd(submit_requirements=(
        SubmitRequirement("NotStdUniv", "JobUniverse != 1", '"This pool doesn\'t do standard universe."'),
        SubmitRequirement("MinimalRequestMemory", "RequestMemory > 512"),
    ))
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobUniverse=1, RequestMemory=1024)})
    assert r.status == Status.USER + 1 and r.text == "This pool doesn't do standard universe."
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(RequestMemory=100)})
    assert r.status == Status.USER + 1 and "MinimalRequestMemory" in r.text
    assert session.call("schedd@s1", "Submit", {"Ad": job_ad(RequestMemory=1024)}).status == 0


def test_late_materialization_accepts_a_million_procs_at_once(schedd, session):
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobMaterializeMaxIdle=4), "Count": 1_000_000}, timeout=10)
    assert r.status == 0 and r.NumProcs == 1_000_000
    jobs = session.call("schedd@s1", "Query", {"Projection": ["ProcId"]}).Jobs
    assert [j["ProcId"] for j in jobs] == [0, 1, 2, 3]
    session.call("schedd@s1", "Hold", {"Ids": [f"{r.ClusterId}.0", f"{r.ClusterId}.1"]})
    jobs = session.call("schedd@s1", "Query", {"Constraint": "JobStatus == 1", "Projection": ["ProcId"]}).Jobs
    assert [j["ProcId"] for j in jobs] == [2, 3, 4, 5]
    # Removing the cluster stops the factory: nothing more is materialized.
    totals = session.call("schedd@s1", "Remove", {"Ids": [str(r.ClusterId)]}).Totals
    assert totals["TotalSuccess"] == 6
    assert session.call("schedd@s1", "Query", {}).Jobs == []


def test_fetch_reads_a_byte_range_of_the_output(schedd, session, tmp_path):
    (tmp_path / "out.txt").write_bytes(b"0123456789abcdef")
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(tmp_path, Out="out.txt")})
    job = f"{r.ClusterId}.0"
    assert session.call("schedd@s1", "Fetch", {"Id": job, "Start": 2, "End": 6}).Data == "2345"
    assert session.call("schedd@s1", "Fetch", {"Id": job, "Start": -4, "End": 0}).Data == "cdef"
    assert session.call("schedd@s1", "Fetch", {"Id": job}).Data == "0123456789abcdef"
    bad = session.call("schedd@s1", "Fetch", {"Id": job, "Start": 6, "End": 2})
    assert bad.status == Status.INVALID_PARAMETER and "start and end" in bad.text
    assert session.call("schedd@s1", "Fetch", {"Id": job, "File": "Err"}).status == Status.INVALID_PARAMETER


def test_query_autoclusters_are_the_negotiators(schedd, session):
    # Two kinds of jobs by memory, and a third whose Requirements refers to an attribute of its
    # own (Project): the significant attributes follow Requirements, so Project splits it.
    small = session.call("schedd@s1", "Submit", {"Ad": job_ad(RequestMemory=10), "Count": 3}).ClusterId
    big = session.call("schedd@s1", "Submit", {"Ad": job_ad(RequestMemory=20), "Count": 1}).ClusterId
    picky = [session.call("schedd@s1", "Submit", {"Ad": job_ad(Project=name, Requirements=ExprTree('MY.Project != "x"')),
                                                  "Count": 1}).ClusterId for name in ("a", "b")]
    ours = f"ClusterId >= {small}"
    rows = session.call("schedd@s1", "Query", {"Constraint": ours, "Opts": 1}).Jobs
    assert sorted((r["JobCount"], r.get("RequestMemory"), r.get("Project")) for r in rows) == [
        (1, 20, None), (1, 128, "a"), (1, 128, "b"), (3, 10, None)]
    by_id = {r["AutoClusterId"]: sorted(r["JobIds"]) for r in rows}
    assert by_id[next(r["AutoClusterId"] for r in rows if r.get("RequestMemory") == 10)] == [
        f"{small}.{p}" for p in range(3)]
    assert sorted(j for ids in by_id.values() for j in ids) == sorted(
        [f"{small}.{p}" for p in range(3)] + [f"{big}.0"] + [f"{c}.0" for c in picky])
    requests = session.call("schedd@s1", "GetResourceRequests", {"Owner": rows[0]["Owner"], "Limit": 50, "After": -1}).Requests
    offered = {r["AutoClusterId"]: r["Count"] for r in requests}
    assert {acid: len(ids) for acid, ids in by_id.items()}.items() <= offered.items()
