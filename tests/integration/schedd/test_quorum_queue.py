"""SCHEDD_REQUEST_QUEUE_TYPE = quorum: the schedd's request queue is a replicated quorum queue (for a
pool whose broker is a RabbitMQ cluster), and the schedd serves from it as from a classic one."""

from __future__ import annotations

import pytest

from gridbus import bus
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.config import Config
from tests.integration.schedd.conftest import job_ad, wait_for

pytestmark = pytest.mark.broker


def test_a_quorum_request_queue_serves_and_keeps_a_request_sent_while_the_schedd_is_away(
        make_schedd, session, mgmt, vhost, tmp_path):
    t = make_schedd("q1", request_queue_type="quorum")
    queue = mgmt.queue(vhost, bus.rpc_queue(t.agent.address))
    assert queue["type"] == "quorum" and queue["durable"] is True
    assert queue["arguments"]["x-dead-letter-exchange"] == bus.DEAD
    first = session.call(t.agent.address, "Submit", {"Ad": job_ad(tmp_path), "Count": 2}, timeout=10)
    assert first.ok, first.text

    # A Submit sent while the schedd is stopped waits in the quorum queue and is served on restart.
    t.stop()
    session._publish(t.agent.address, bus.T_METHOD_REQUEST,
                               {"object": t.agent.address, "method": "Submit",
                                "args": {"Ad": job_ad(tmp_path), "Count": 1}}, 30)
    wait_for(lambda: mgmt.queue(vhost, bus.rpc_queue(t.agent.address)).get("messages", 0) >= 1, 15,
             "the request to wait in the queue")
    make_schedd("q1", request_queue_type="quorum")
    wait_for(lambda: len(session.call("schedd@q1", "Query", {"Constraint": "true"}, timeout=10).Jobs) == 3,
             20, "the request sent while the schedd was away to be served")


def test_the_knob_chooses_the_queue_type_and_refuses_others(tmp_path):
    cfg = Config(env={"GRIDBUS_SCHEDD_REQUEST_QUEUE_TYPE": "Quorum", "GRIDBUS_SPOOL": str(tmp_path / "a")})
    assert ScheddSettings.from_config(cfg).request_queue_type == "quorum"
    from gridbus.agents.schedd.agent import Schedd

    schedd = Schedd("q2", "amqp://guest:guest@127.0.0.1:5672/", spool=tmp_path / "b")
    schedd.request_queue_type = "stream"
    with pytest.raises(ValueError, match="classic or quorum, not 'stream'"):
        schedd.request_queue_arguments()
