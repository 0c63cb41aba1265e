"""`gridbus broker check [--fix]` on a clean vhost, on a drifted one (a dry run changes nothing),
and with --fix (every message kept)."""

from __future__ import annotations

import pika
import pytest

from gridbus import accounts, bus
from gridbus.console.cli import main as gridbus
from gridbus.mgmt import Management

SCHEDD_QUEUE = bus.rpc_queue("schedd@check")


def test_a_clean_vhost_has_nothing_to_fix(amqp_url: str, vhost: str, mgmt: Management,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    accounts.declare_topology(mgmt, vhost)
    assert gridbus(["--pool", amqp_url, "broker", "check"]) == 0
    out = capsys.readouterr().out
    assert f"queue {bus.DEAD}: durable classic {{x-max-length=10000, x-overflow=drop-head}}" in out
    assert "differs" not in out and "as this version declares it" in out


def _drift(url: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for exchange, kind in bus.EXCHANGES:
            ch.exchange_declare(exchange, "fanout" if exchange == bus.ADS else kind, durable=True)
        ch.queue_declare(bus.DEAD, durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_bind(bus.DEAD, bus.DEAD, "")
        ch.queue_declare(SCHEDD_QUEUE, durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_bind(SCHEDD_QUEUE, bus.RPC, "schedd@check")
        for i in range(4):
            ch.basic_publish(bus.DEAD, "", f"dead {i}".encode(), pika.BasicProperties(delivery_mode=2))
            ch.basic_publish(bus.RPC, "schedd@check", f"request {i}".encode(), pika.BasicProperties(delivery_mode=2))


def _bodies(url: str, queue: str) -> set[bytes]:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        got = set()
        while (message := ch.basic_get(queue))[0] is not None:
            got.add(message[2])
        return got


def test_a_drifted_vhost_is_listed_then_fixed_with_every_message_kept(amqp_url: str, vhost: str, mgmt: Management,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _drift(amqp_url)
    assert gridbus(["--pool", amqp_url, "broker", "check"]) == 1
    out = capsys.readouterr().out
    assert "exchange gridbus.ads: durable fanout\n  this version: durable topic" in out
    assert "x-max-length: 10000 wanted, none found" in out  # gridbus.dead, quorum without limits
    assert "type: classic wanted, stream found" in out
    assert "--fix would: declare it anew, moving its" in out
    assert {x["name"]: x["type"] for x in mgmt.exchanges(vhost)}[bus.ADS] == "fanout"  # a dry run
    assert mgmt.queue(vhost, SCHEDD_QUEUE)["type"] == "stream"

    assert gridbus(["--pool", amqp_url, "broker", "check", "--fix"]) == 0
    assert "queue gridbus.rpc.schedd@check: fixed" in capsys.readouterr().out
    assert gridbus(["--pool", amqp_url, "broker", "check"]) == 0
    assert mgmt.queue(vhost, SCHEDD_QUEUE)["type"] == "classic"
    assert mgmt.queue(vhost, bus.DEAD)["arguments"] == dict(bus.DEAD_QUEUE_ARGS)
    assert _bodies(amqp_url, bus.DEAD) == {f"dead {i}".encode() for i in range(4)}
    assert _bodies(amqp_url, SCHEDD_QUEUE) == {f"request {i}".encode() for i in range(4)}
