"""htcondor2.ping against a running agent (a collector in a thread stands for any daemon): the
condor_ping ad of who was authenticated, and a daemon that is not there."""

from __future__ import annotations

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.agents.collector import Collector
from gridbus.console import CallTimeout, HTCondorException, ping
from gridbus.console import daemons as daemons_api


@pytest.fixture
def agent(amqp_url: str, monkeypatch):
    monkeypatch.setenv("GRIDBUS_URL", amqp_url)
    with AgentThread(Collector("c1", amqp_url, update_interval=1.0, classad_lifetime=60)) as t:
        yield t


@pytest.mark.broker
def test_ping_answers_condor_pings_ad(agent, broker_url):
    for location in ("collector@c1", {"MyAddress": "collector@c1"}):
        ad = ping(location, "READ")
        assert ad["AuthorizationSucceeded"] is True and ad["Authentication"] == "YES"
        assert ad["MyRemoteUserName"] == broker_url.user and ad["MyAddress"] == "collector@c1"


@pytest.mark.broker
def test_ping_of_a_daemon_that_is_not_there_raises(agent, monkeypatch):
    monkeypatch.setattr(daemons_api, "PING_TIMEOUT", 1.0)
    with pytest.raises(CallTimeout, match="collector@nowhere did not answer") as failed:
        ping("collector@nowhere")
    assert isinstance(failed.value, HTCondorException)  # as htcondor2's ping raises one
