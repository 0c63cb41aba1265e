"""Job policy decisions, SetAttribute values and job ids, without a broker."""

from __future__ import annotations

import pytest

from gridbus.agents.schedd import policy
from gridbus.agents.schedd.actions import parse_value
from gridbus.agents.schedd.jobattrs import parse_job_id
from gridbus.agents.schedd.submission import check_required
from gridbus.classad import ExprTree
from gridbus.status import MethodError


def test_periodic_order_hold_then_release_then_remove():
    ad = {"JobStatus": 1, "PeriodicHold": ExprTree("true"), "PeriodicRemove": ExprTree("true")}
    d = policy.periodic(ad)
    assert d.action == policy.HOLD and d.code == 3 and "PeriodicHold expression 'true'" in d.reason
    held = {"JobStatus": 5, "PeriodicHold": ExprTree("true"), "PeriodicRelease": ExprTree("true")}
    assert policy.periodic(held).action == policy.RELEASE
    assert policy.periodic({"JobStatus": 1, "PeriodicRemove": ExprTree("JobStatus == 1")}).action == policy.REMOVE
    assert policy.periodic({"JobStatus": 1, "PeriodicHold": ExprTree("undefined")}) is None
    assert policy.periodic({"JobStatus": 4, "PeriodicRemove": True}) is None
    custom = {"JobStatus": 2, "PeriodicHold": True, "PeriodicHoldReason": "too long", "PeriodicHoldSubCode": 7}
    d = policy.periodic(custom)
    assert (d.reason, d.subcode) == ("too long", 7)


def test_exit_policy_hold_remove_and_retries():
    assert policy.at_exit({"ExitCode": 0}).action == policy.COMPLETE
    assert policy.at_exit({"ExitCode": 1, "OnExitHold": ExprTree("ExitCode != 0")}).action == policy.HOLD
    assert policy.at_exit({"ExitCode": 1, "OnExitRemove": ExprTree("ExitCode == 0")}).action == policy.REQUEUE
    retry = {"ExitCode": 1, "JobMaxRetries": 2, "NumJobCompletions": 2}
    assert policy.at_exit(retry).action == policy.REQUEUE
    assert policy.at_exit({**retry, "NumJobCompletions": 3}).action == policy.COMPLETE
    assert policy.at_exit({**retry, "ExitCode": 0}).action == policy.COMPLETE
    assert policy.at_exit({**retry, "ExitCode": 3, "SuccessExitCode": 3}).action == policy.COMPLETE
    assert policy.at_exit({"ExitBySignal": True, "ExitSignal": 9, "JobMaxRetries": 1,
                           "NumJobCompletions": 1}).action == policy.REQUEUE


def test_set_attribute_values_are_classad_text():
    assert parse_value('"hello"', "A") == "hello"
    assert parse_value("12", "A") == 12 and parse_value("1.5", "A") == 1.5 and parse_value("TRUE", "A") is True
    expr = parse_value("RequestMemory * 2", "A")
    assert isinstance(expr, ExprTree) and str(expr) == "RequestMemory * 2"
    assert parse_value(7, "A") == 7
    with pytest.raises(MethodError, match="not a valid ClassAd expression"):
        parse_value("1 +", "A")
    with pytest.raises(MethodError, match="quoted"):
        parse_value("  ", "A")


def test_job_ids():
    assert parse_job_id("12.3") == (12, 3) and parse_job_id("12") == (12, None)
    assert parse_job_id("s1#12.3#1700000000") == (12, 3) and parse_job_id(5) == (5, None)
    for bad in ("", "a.b", "1.2.3", None):
        with pytest.raises(ValueError):
            parse_job_id(bad)


def test_policy_attribute_names_are_case_insensitive(tmp_path):
    """`gridbus edit 12 periodicremove true` fires PeriodicRemove: ClassAd names have no case."""
    import asyncio

    from tests.unit.schedd.inproc import call, make_schedd, submit

    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        removed, held = submit(schedd), submit(schedd)
        for cid, name in ((removed, "periodicremove"), (held, "PERIODICHOLD")):
            await schedd.actions.SetAttribute(call("SetAttribute"), Ids=[f"{cid}.0"], Constraint="", Name=name, Value="true")
        assert await schedd.policy.evaluate_periodic() == 2
        assert schedd.queue.get(removed, 0) is None
        assert schedd.queue.get(held, 0)["JobStatus"] == 5
        await schedd.commits.close()

    asyncio.run(main())


def test_exit_policy_names_are_case_insensitive():
    from gridbus.agents.schedd import policy

    assert policy.at_exit({"onexithold": True, "ExitCode": 0}).action == policy.HOLD
    assert policy.at_exit({"jobmaxretries": 2, "exitcode": 1, "NumJobCompletions": 1}).action == policy.REQUEUE


def test_a_submitted_ad_may_have_an_empty_cmd_only_if_it_runs_in_a_container():
    base = {"Requirements": ExprTree("true"), "JobUniverse": 5, "Iwd": "/tmp", "Cmd": ""}
    check_required({**base, "WantDocker": True, "DockerImage": "busybox"})  # its image's command runs
    check_required({**base, "WantContainer": True, "ContainerImage": "docker://busybox"})
    with pytest.raises(MethodError, match="Cmd must be a non-empty string"):
        check_required(base)
