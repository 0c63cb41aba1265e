"""Job policy decisions, SetAttribute values and job ids, without a broker."""

from __future__ import annotations

import pytest

from gridbus.agents.schedd import policy
from gridbus.agents.schedd.actions import parse_value
from gridbus.agents.schedd.jobattrs import parse_job_id
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
