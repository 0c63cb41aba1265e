"""`gridbus pool up --detach` whose schedd stops for good (HTCondor's DAEMON_NO_RESTART, status 4):
its request queue must become a quorum queue but a schedd of another version still consumes the
classic one. `pool up` prints the schedd's own sentence (the queue, both declarations, the command
that fixes it) and exits with status 4 at once, rather than waiting for its timeout and naming a
state; the master's ad carries the sentence as the daemon's LastExitReason, and `pool status`
shows it under its table."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pika
import pytest

from gridbus import bus
from gridbus.topology import DAEMON_NO_RESTART, FIX_COMMAND
from tests.integration.master.helpers import env_for, gridbus, processes_mentioning

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def test_pool_up_prints_the_sentence_of_a_daemon_that_stops_for_good(tmp_path: Path, amqp_url: str) -> None:
    local = tmp_path / "local"
    env = env_for(local, amqp_url, DAEMON_LIST="MASTER, COLLECTOR, SCHEDD", SCHEDD_NAME="refused",
                  SCHEDD_REQUEST_QUEUE_TYPE="quorum")
    queue = bus.rpc_queue("schedd@refused")
    # heartbeat=0: the connection is not served while pool up runs, and must hold its consumer.
    with pika.BlockingConnection(pika.URLParameters(f"{amqp_url}?heartbeat=0")) as conn:
        ch = conn.channel()
        for exchange, kind in bus.EXCHANGES:
            ch.exchange_declare(exchange, kind, durable=True)
        ch.queue_declare(queue, durable=True, arguments={"x-dead-letter-exchange": bus.DEAD})
        ch.basic_consume(queue, lambda *a: None)  # a schedd of the other version, still running
        try:
            up = gridbus(env, tmp_path, "pool", "up", "--detach", "--timeout", "120", timeout=180)
            status = gridbus(env, tmp_path, "pool", "status")
        finally:
            gridbus(env, tmp_path, "pool", "down")
            for pid in processes_mentioning(str(local)):  # never leave a pool behind a failed test
                os.kill(pid, signal.SIGKILL)
    assert up.returncode == DAEMON_NO_RESTART, up.stdout + up.stderr
    said = up.stderr.splitlines()
    refusal = [line for line in said if line.startswith("gridbus pool: SCHEDD exited with status 4")]
    assert len(refusal) == 1, up.stderr
    assert queue in refusal[0] and "durable quorum" in refusal[0] and FIX_COMMAND in refusal[0], refusal[0]
    assert "1 consumer(s)" in refusal[0], refusal[0]
    assert "`gridbus pool down` stops them" in said[-1]
    assert "not up after" not in up.stderr  # said at once, not at the timeout
    assert "SCHEDD" in status.stdout and "Stopped" in status.stdout, status.stdout
    assert refusal[0].removeprefix("gridbus pool: ") in status.stdout.splitlines(), status.stdout  # status says it too
