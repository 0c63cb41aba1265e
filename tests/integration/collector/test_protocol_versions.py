"""The collector holds ads of the previous protocol version (gridbus 0.1.0's, without the
header) and drops those of a version it does not take, counting them in UpdatesRejected."""

from __future__ import annotations

import pika

from gridbus import bus, protocol, wire
from gridbus.console.collector import AdType
from gridbus.console.collector import Collector as CollectorClient
from gridbus.console.session import Session
from tests.integration.collector.conftest import RawPublisher, stats, wait_for


def _ad(name: str) -> dict:
    return {"MyType": "Machine", "Name": name, "MyAddress": f"startd@{name}", "DaemonStartTime": 1,
            "UpdateSequenceNumber": 1}


def test_ads_of_a_protocol_version_not_taken_are_dropped_and_counted(publisher: RawPublisher, client: CollectorClient,
                                                                     session: Session) -> None:
    major, _minor = protocol.VERSION
    refused = pika.BasicProperties(content_type=wire.MSGPACK, type=bus.T_AD, app_id="startd@future",
                                   headers={protocol.HEADER: f"{major + 1}.0"})
    publisher.ch.basic_publish(bus.ADS, "machine.future", wire.encode({"ads": [_ad("future")]}), refused)
    publisher.ads([_ad("old")], key="machine.old")  # no header: gridbus 0.1.0
    wait_for(lambda: client.query(AdType.Startd, 'Name == "old"'), 10, "the 0.1.0 ad held")
    assert client.query(AdType.Startd, 'Name == "future"') == []
    assert wait_for(lambda: stats(session)["UpdatesRejected"] >= 1, 10, "the refused ad counted")
