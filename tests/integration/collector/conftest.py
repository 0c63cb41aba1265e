"""Fixtures for the collector tests: a collector in a thread, a console client, raw publishing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest

from gridbus import bus, wire
from gridbus.agent.threaded import AgentThread
from gridbus.agents.collector import Collector
from gridbus.console.collector import Collector as CollectorClient
from gridbus.console.session import Session
from tests.helpers import wait_for as shared_wait_for


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something true; fail naming ``what`` after ``timeout``."""
    return shared_wait_for(predicate, timeout, what, interval=every)


@pytest.fixture
def collector(amqp_url: str) -> Iterator[AgentThread]:
    with AgentThread(Collector("c1", amqp_url, update_interval=1.0, classad_lifetime=60)) as t:
        yield t


@pytest.fixture
def session(amqp_url: str) -> Iterator[Session]:
    with Session(amqp_url, timeout=20) as s:
        yield s


@pytest.fixture
def client(amqp_url: str) -> Iterator[CollectorClient]:
    with CollectorClient(amqp_url, name="c1", timeout=20) as c:
        yield c


class RawPublisher:
    """Publishes straight to gridbus.ads, as any daemon (or a broken one) could."""

    def __init__(self, url: str):
        self.conn = pika.BlockingConnection(pika.URLParameters(url))
        self.ch = self.conn.channel()

    def ads(self, ads: list[dict], key: str = "machine.test", mtype: str = bus.T_AD, batch: int = 500) -> None:
        for i in range(0, len(ads), batch):
            self.raw(wire.encode({"ads": ads[i : i + batch]}), key, mtype)

    def raw(self, body: bytes, key: str = "machine.test", mtype: str | None = bus.T_AD,
            content_type: str = wire.MSGPACK) -> None:
        props = pika.BasicProperties(content_type=content_type, type=mtype)
        self.ch.basic_publish(bus.ADS, key, body, props)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def publisher(amqp_url: str, collector: AgentThread) -> Iterator[RawPublisher]:
    p = RawPublisher(amqp_url)  # after the collector: it declares the exchanges
    yield p
    p.close()


def stats(session: Session) -> dict[str, Any]:
    (obj,) = session.getObjects(_class="collector", _timeout=3.0)
    return dict(obj.getStatistics())
