"""The negotiator agent on the broker: its methods through the htcondor2-style console."""

from __future__ import annotations

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.agents.negotiator import Negotiator as NegotiatorAgent
from gridbus.console import CallFailed, Negotiator, Session
from gridbus.status import Status


@pytest.fixture
def negotiator(amqp_url, tmp_path):
    agent = NegotiatorAgent("n1", amqp_url, spool=tmp_path, interval=3600, update_interval=1)
    with AgentThread(agent) as t:
        yield t


def test_priorities_factors_usage_limits_persist(negotiator, amqp_url, tmp_path):
    with Negotiator(amqp_url, name="n1") as neg:
        neg.setFactor("alice@example", 2.5)
        neg.setPriority("alice", 4.0)
        neg.setUsage("alice", 120.0)
        neg.setLimit("licenses", 3)
        (alice,) = neg.getResourceUsage("alice")
        assert (alice["PriorityFactor"], alice["Priority"], alice["AccumulatedUsage"]) == (2.5, 4.0, 120.0)
        assert alice["EffectivePriority"] == 10.0
        assert neg.getLimits()["Limits"] == {"licenses": 3}
        with pytest.raises(CallFailed, match="at least 1") as err:
            neg.setFactor("alice", 0.5)
        assert err.value.result.status == Status.INVALID_PARAMETER
        neg.reschedule()
    saved = NegotiatorAgent("again", amqp_url, spool=tmp_path)
    assert saved.accountant.user("alice").PriorityFactor == 2.5


def test_setting_priorities_is_for_administrators(negotiator, broker_url, mgmt, vhost):
    mgmt.put_user("mallory-neg", "pw-m")
    try:
        mgmt.put_permissions(vhost, "mallory-neg", "^$", "^gridbus\\.rpc$", "^$")
        url = broker_url.with_vhost(vhost).with_credentials("mallory-neg", "pw-m").url
        with Session(url, timeout=10) as s:
            r = s.call("negotiator@n1", "SetPriorityFactor", {"Name": "mallory", "PriorityFactor": 1.0})
            assert r.status == Status.FORBIDDEN and "administrators" in r.text
            assert s.call("negotiator@n1", "GetPriorities").status == 0
    finally:
        mgmt.delete_user("mallory-neg")


def test_analyze_without_requirements_is_refused(negotiator, amqp_url):
    with Session(amqp_url, timeout=10) as s:
        r = s.call("negotiator@n1", "Analyze", {"Job": {"Owner": "alice"}})
        assert r.status == Status.INVALID_PARAMETER and "Requirements" in r.text
