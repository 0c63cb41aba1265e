"""The agent framework and the QMF-style console on the real broker."""

from __future__ import annotations

import time

import pika
import pytest

from gridbus import bus, wire
from gridbus.agent.threaded import AgentThread
from gridbus.console import CallTimeout, Session
from gridbus.mgmt import Management
from gridbus.status import Status
from tests.integration.framework.echoer import Echoer


@pytest.fixture
def echoer(amqp_url: str):
    with AgentThread(Echoer("e1", amqp_url, update_interval=1)) as t:
        yield t


@pytest.fixture
def session(amqp_url: str):
    with Session(amqp_url, timeout=10) as s:
        yield s


def test_get_objects_finds_the_agent_and_calls_return_out_args(echoer, session):
    objs = session.getObjects(_class="echoer")
    assert [o.Name for o in objs] == ["e1"]
    obj = objs[0]
    assert obj.Color == "blue" and obj.MyAddress == "echoer@e1"
    assert ("Color", "blue") in obj.getProperties()
    result = obj.Add(2, B=40)
    assert (result.status, result.text, result.Sum, result.outArgs) == (0, "OK", 42, {"Sum": 42})
    assert session.getObjects(_class="echoer", Color="red") == []
    assert [a.address for a in session.getAgents()] == ["echoer@e1"]


def test_typed_classad_values_round_trip(echoer, session):
    from gridbus.classad import ExprTree, Value

    value = {"Requirements": ExprTree("TARGET.Memory >= 1024"), "U": Value.Undefined, "E": Value.Error, "n": [1, 2.5, "x"]}
    out = session.getObjects(_class="echoer")[0].Echo(value).Value
    assert str(out["Requirements"]) == str(value["Requirements"])
    assert out["U"] is Value.Undefined and out["E"] is Value.Error and out["n"] == [1, 2.5, "x"]


def test_errors_unknown_method_bad_argument_handler_raises(echoer, session):
    obj = session.getObjects(_class="echoer")[0]
    r = session.call("echoer@e1", "NoSuchMethod", {})
    assert r.status == Status.UNKNOWN_METHOD and "NoSuchMethod" in r.text
    r = obj.Add("two")
    assert r.status == Status.INVALID_PARAMETER and "'A'" in r.text
    r = session.call("echoer@e1", "Add", {"A": 1, "C": 3})
    assert r.status == Status.INVALID_PARAMETER and "'C'" in r.text
    r = session.call("echoer@e1", "Add", {"B": 1})
    assert r.status == Status.INVALID_PARAMETER and "'A'" in r.text
    r = obj.Explode()
    assert r.status == Status.EXCEPTION and "boom" in r.text
    r = obj.Unimplemented()
    assert r.status == Status.NOT_IMPLEMENTED
    r = session.call("echoer@e1", "Add", {"A": 1}, obj="no-such-object")
    assert r.status == Status.UNKNOWN_OBJECT
    assert obj.Add(1, 1).Sum == 2  # still serving
    stats = dict(session.getObjects(_class="echoer")[0].getStatistics())
    assert stats["RequestsFailed"] >= 5 and stats["RequestsServed"] >= 2


def test_streamed_answer_arrives_whole(echoer, session):
    r = session.getObjects(_class="echoer")[0].Count(1050)
    assert r.status == 0 and r.Items == list(range(1050))


def test_timeout_names_agent_and_method(session):
    with pytest.raises(CallTimeout, match=r"echoer@nobody did not answer Add within 0.3 s"):
        session.call("echoer@nobody", "Add", {"A": 1}, timeout=0.3)


def _plain_channel(amqp_url: str):
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    ch = conn.channel()
    replies: list = []
    ch.basic_consume(bus.REPLY_TO, lambda c, m, p, b: replies.append((p, b)), auto_ack=True)
    return conn, ch, replies


def _wait(conn, replies, n=1, timeout=10.0):
    deadline = time.monotonic() + timeout
    while len(replies) < n and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    return replies


def test_plain_pika_json_request_gets_json_reply(echoer, amqp_url):
    import json

    conn, ch, replies = _plain_channel(amqp_url)
    try:
        body = json.dumps({"object": "echoer@e1", "method": "Echo", "args": {"Value": {"$expr": "a+1"}}})
        props = pika.BasicProperties(content_type="application/json", reply_to=bus.REPLY_TO, correlation_id="c1", user_id="guest")
        ch.basic_publish("gridbus.rpc", "echoer@e1", body.encode(), props)
        (p, b), = _wait(conn, replies)
        assert p.content_type == "application/json" and p.correlation_id == "c1" and p.type == "method_response"
        reply = json.loads(b)
        assert reply["status"] == 0 and reply["out"]["Value"] == {"$expr": "a + 1"}
    finally:
        conn.close()


def test_random_bytes_are_dead_lettered_and_the_agent_lives(echoer, session, amqp_url):
    conn, ch, replies = _plain_channel(amqp_url)
    try:
        props = pika.BasicProperties(content_type="application/msgpack", reply_to=bus.REPLY_TO, correlation_id="x")
        ch.basic_publish("gridbus.rpc", "echoer@e1", b"\xc1\xff\x00garbage", props)
        (p, b), = _wait(conn, replies)
        assert json_or_msgpack(p, b)["status"] == Status.INVALID_PARAMETER
    finally:
        conn.close()
    # Read the dead-letter queue directly: the management API's counters lag by seconds.
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        deadline = time.monotonic() + 10
        got = None
        while got is None and time.monotonic() < deadline:
            _m, _p, got = conn.channel().basic_get(bus.DEAD, auto_ack=True)
            if got is None:
                conn.process_data_events(time_limit=0.05)
        assert got == b"\xc1\xff\x00garbage"
    finally:
        conn.close()
    assert session.getObjects(_class="echoer")[0].Add(1, 2).Sum == 3


def json_or_msgpack(props, body):
    return wire.decode(body, props.content_type)


def test_spoofed_user_id_is_refused_by_the_broker(echoer, amqp_url):
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    ch = conn.channel()
    ch.confirm_delivery()  # so the publish waits for the broker's verdict
    props = pika.BasicProperties(user_id="mallory")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
        ch.basic_publish("gridbus.rpc", "echoer@e1", wire.encode({"object": "echoer@e1", "method": "WhoAmI"}), props)
    assert err.value.reply_code == 406 and "user_id" in err.value.reply_text
    conn.close()


def test_handler_sees_the_real_caller(echoer, broker_url, mgmt, vhost):
    mgmt.put_user("alice-test", "pw-alice")
    try:
        mgmt.put_permissions(vhost, "alice-test", "^$", "^gridbus\\.rpc$", "^$")
        url = broker_url.with_vhost(vhost).with_credentials("alice-test", "pw-alice").url
        with Session(url, timeout=10) as s:
            assert s.call("echoer@e1", "WhoAmI").User == "alice-test"
    finally:
        mgmt.delete_user("alice-test")


def test_agent_reconnects_after_broker_closes_its_connection(echoer, session, mgmt: Management, vhost):
    def agent_connections():
        return [c for c in mgmt.connections(vhost) if c.get("client_properties", {}).get("connection_name") == "gridbus echoer@e1"]

    deadline = time.monotonic() + 10
    while not agent_connections() and time.monotonic() < deadline:
        time.sleep(0.2)  # the management API's connection list lags the broker by design
    (conn,) = agent_connections()
    mgmt.close_connection(conn["name"])
    start = time.monotonic()
    while True:
        try:
            if session.call("echoer@e1", "Add", {"A": 20, "B": 22}, timeout=1).Sum == 42:
                break
        except CallTimeout:
            pass
        assert time.monotonic() - start < 15, "agent did not serve again within 15 s"
    assert time.monotonic() - start < 15


def test_a_streamed_answer_stops_once_its_caller_has_timed_out(echoer, session):
    agent = echoer.agent
    with pytest.raises(CallTimeout, match="did not answer Drip within 0.5 s"):
        session.call("echoer@e1", "Drip", {"N": 100, "Pause": 0.05}, timeout=0.5)
    # The agent drops the rest of the answer once the caller's timeout, counted from when the
    # request reached it, has passed: it makes nothing more for nobody.
    deadline = time.monotonic() + 10
    while agent.stats["AnswersAbandoned"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agent.stats["AnswersAbandoned"] == 1
    made = agent.dripped
    time.sleep(0.3)
    assert agent.dripped == made < 20, made
    # A caller that waits long enough still gets the whole answer.
    assert session.call("echoer@e1", "Drip", {"N": 5, "Pause": 0.01}, timeout=10).Items == [0, 1, 2, 3, 4]
