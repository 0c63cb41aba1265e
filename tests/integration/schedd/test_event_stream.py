"""The replay path of job events: the schedd declares a stream queue bound to gridbus.events, so a
consumer that was away reads the events it missed from the start of the stream (or any offset);
the events are persistent messages, each with its EventId."""

from __future__ import annotations

import pika
import pytest

from gridbus import bus, wire
from tests.integration.schedd.conftest import job_ad, wait_for

pytestmark = pytest.mark.broker


def read_stream(amqp_url: str, want: int) -> list[tuple[str, dict, int]]:
    """The stream's events from its first offset: (routing key, event, delivery mode), at least ``want``."""
    got: list[tuple[str, dict, int]] = []
    with pika.BlockingConnection(pika.URLParameters(amqp_url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)  # a stream is consumed with a prefetch and acks

        def on_message(ch, method, props, body) -> None:
            message = wire.decode(body, props.content_type)
            for event in message.get("Events", [message]):
                got.append((method.routing_key, event, props.delivery_mode))
            ch.basic_ack(method.delivery_tag)

        ch.basic_consume(bus.EVENT_STREAM, on_message, arguments={"x-stream-offset": "first"})
        wait_for(lambda: conn.process_data_events(time_limit=0.2) or len(got) >= want, 10,
                 f"{want} events from the stream")
    return got


def test_a_consumer_that_was_away_reads_the_events_from_the_stream(make_schedd, session, amqp_url, tmp_path):
    make_schedd()
    clusters = []
    for _ in range(3):  # submitted while no consumer listens
        r = session.call("schedd@s1", "Submit", {"Ad": job_ad(Iwd=str(tmp_path)), "Count": 2})
        assert r.status == 0, r.text
        clusters.append(r.ClusterId)
    first = read_stream(amqp_url, 3)
    submits = [e for key, e, _mode in first if key.startswith("job.submit.")]
    assert [e["ClusterId"] for e in submits] == clusters
    assert all(e["ProcIds"] == [0, 1] for e in submits)
    assert {mode for _k, _e, mode in first} == {2}  # persistent
    # Another consumer, later, reads the same events again: the stream keeps them.
    again = read_stream(amqp_url, 3)
    assert [e["EventId"] for _k, e, _m in again][:3] == [e["EventId"] for _k, e, _m in first][:3]
    assert len({e["EventId"] for _k, e, _m in first}) == len(first)


def test_no_stream_when_its_age_is_empty(make_schedd, session, mgmt, vhost):
    make_schedd(event_stream_max_age="")
    assert session.call("schedd@s1", "Query", {"Constraint": "false"}).status == 0
    assert bus.EVENT_STREAM not in {q["name"] for q in mgmt.queues(vhost)}
