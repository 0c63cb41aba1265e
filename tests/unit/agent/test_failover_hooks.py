"""The private aio-pika hooks gridbus.agent.failover overrides still exist in the installed
aio-pika: an upgrade that renames or drops one fails here, not in a pool that stops failing over."""

from __future__ import annotations

import asyncio
import inspect

from aio_pika import RobustConnection
from aio_pika.abc import AbstractConnection

from gridbus.agent import failover


def test_the_reconnect_step_failover_overrides_exists():
    step = RobustConnection.__dict__.get("_RobustConnection__connect_transport")
    assert step is not None and inspect.iscoroutinefunction(step)
    assert "_RobustConnection__connect_transport" in failover.FailoverConnection.__dict__


def test_the_close_callback_and_flag_failover_reads_exist():
    assert inspect.iscoroutinefunction(RobustConnection._on_connection_close)
    asyncio.run(_made_without_connecting())


async def _made_without_connecting() -> None:  # a connection is made on a running loop
    conn = failover.FailoverConnection(["amqp://guest:guest@127.0.0.1:1/", "amqp://guest:guest@127.0.0.1:2/"])
    assert isinstance(conn, AbstractConnection)
    assert conn._close_called is False  # read by _on_connection_close to tell a loss from a close
    assert conn.broker == "127.0.0.1:1"
    conn._advance("test")
    assert conn.broker == "127.0.0.1:2"
