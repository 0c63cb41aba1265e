"""The methods every agent serves (schema class ``daemon``): RemoteParam, SetParam, Advertise;
and DaemonCoreDutyCycle in its ads. A collector in a thread stands for any agent."""

from __future__ import annotations

import uuid

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.agents.collector import Collector
from gridbus.config import Config
from gridbus.console import HTCondorException, RemoteParam, Session
from gridbus.status import Status
from tests.helpers import wait_for


@pytest.fixture
def agent(amqp_url: str):
    collector = Collector("c1", amqp_url, update_interval=1.0, classad_lifetime=60)
    config = Config({"GRIDBUS_URL": amqp_url, "SEC_PASSWORD_FILE": "/etc/secret", "UPDATE_INTERVAL": 1}, env={})
    collector.config = config
    with AgentThread(collector) as t:
        yield t


@pytest.fixture
def session(amqp_url: str):
    with Session(amqp_url, timeout=10) as s:
        yield s


@pytest.fixture
def user_session(broker_url, mgmt, vhost):
    """A session of a broker user who is not an administrator (a name unique to this run)."""
    name = f"api-user-{uuid.uuid4().hex[:8]}"
    mgmt.put_user(name, "pw")
    try:
        mgmt.put_permissions(vhost, name, "^$", "^gridbus\\.rpc$", "^$")
        with Session(broker_url.with_vhost(vhost).with_credentials(name, "pw").url, timeout=10) as s:
            yield s
    finally:
        mgmt.delete_user(name)


def test_administrators_see_every_knob(agent, session, amqp_url):
    out = session.call("collector@c1", "RemoteParam", {}).check().outArgs
    assert out["Params"]["GRIDBUS_URL"] == amqp_url  # with its password
    assert out["Params"]["SEC_PASSWORD_FILE"] == "/etc/secret"
    assert out["Params"]["UPDATE_INTERVAL"] == "1"  # text, whole numbers without a fraction
    assert out["Hidden"] == []
    named = session.call("collector@c1", "RemoteParam", {"Names": ["update_interval", "NO_SUCH"]}).check()
    assert named.Params == {"UPDATE_INTERVAL": "1"}


def test_users_do_not_see_secrets(agent, user_session, amqp_url):
    out = user_session.call("collector@c1", "RemoteParam", {}).check().outArgs
    assert "SEC_PASSWORD_FILE" not in out["Params"] and "SEC_PASSWORD_FILE" in out["Hidden"]
    assert "guest" in out["Params"]["GRIDBUS_URL"] and ":guest@" not in out["Params"]["GRIDBUS_URL"]
    assert out["Params"]["UPDATE_INTERVAL"] == "1"
    bad = user_session.call("collector@c1", "RemoteParam", {"Names": "UPDATE_INTERVAL"})
    assert bad.status == Status.INVALID_PARAMETER and "Names" in bad.text


def test_set_param_needs_runtime_config_and_applies_at_reconfig(agent, session, amqp_url, monkeypatch):
    refused = session.call("collector@c1", "SetParam", {"Name": "UPDATE_INTERVAL", "Value": "7"})
    assert refused.status == Status.FORBIDDEN and "ENABLE_RUNTIME_CONFIG" in refused.text
    agent.agent.config.set("ENABLE_RUNTIME_CONFIG", True)
    bad = session.call("collector@c1", "SetParam", {"Name": "UPDATE_INTERVAL", "Value": "soon"})
    assert bad.status == Status.INVALID_PARAMETER and "UPDATE_INTERVAL" in bad.text
    session.call("collector@c1", "SetParam", {"Name": "UPDATE_INTERVAL", "Value": "7"}).check()
    assert session.call("collector@c1", "RemoteParam", {"Names": ["UPDATE_INTERVAL"]}).Params == {
        "UPDATE_INTERVAL": "1"}  # not applied before the reconfig
    changed = agent.call(agent.agent.reconfig())
    assert "UPDATE_INTERVAL" in changed
    assert session.call("collector@c1", "RemoteParam", {"Names": ["UPDATE_INTERVAL"]}).Params == {
        "UPDATE_INTERVAL": "7"}
    agent.call(agent.agent.reconfig())  # a later reconfig keeps the runtime setting
    assert agent.agent.config.get("UPDATE_INTERVAL") == 7.0


def test_remote_param_mapping(agent, amqp_url, monkeypatch):
    monkeypatch.setenv("GRIDBUS_URL", amqp_url)
    rp = RemoteParam({"MyAddress": "collector@c1"})
    assert rp["UPDATE_INTERVAL"] == "1" and rp.get("NO_SUCH") is None
    assert "UPDATE_INTERVAL" in rp and "UPDATE_INTERVAL" in list(rp)
    with pytest.raises(KeyError):
        rp["NO_SUCH"]
    with pytest.raises(HTCondorException):
        rp["UPDATE_INTERVAL"] = "5"  # runtime configuration is off
    rp.close()


def test_advertise_and_duty_cycle_in_the_ads(agent, session):
    session.call("collector@c1", "Advertise", {}).check()
    ad = wait_for(lambda: (r := session.call("collector@c1", "Query", {"AdTypes": ["Collector"]}).Ads)
                  and r[0].get("DaemonCoreDutyCycle") is not None and r[0], 10, "the Collector ad")
    assert 0.0 <= ad["DaemonCoreDutyCycle"] <= 1.0
