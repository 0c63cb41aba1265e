"""A schedd whose request queue must change type while another consumer holds it stops with one
sentence and HTCondor's DAEMON_NO_RESTART status, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pika

from gridbus import bus
from gridbus.mgmt import Management
from gridbus.topology import DAEMON_NO_RESTART, FIX_COMMAND
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[3]


def test_the_schedd_stops_with_one_sentence(amqp_url: str, vhost: str, mgmt: Management, tmp_path: Path) -> None:
    name = bus.rpc_queue("schedd@refusing")
    params = pika.URLParameters(amqp_url)
    params.client_properties = {"connection_name": "gridbus schedd@refusing"}  # as a daemon names its connection
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.queue_declare(name, durable=True, arguments={"x-dead-letter-exchange": bus.DEAD})
        ch.basic_consume(name, lambda *a: None)  # a schedd of another version, still running
        # The sentence names the consumers the management API lists; its statistics come every few
        # seconds, so the schedd starts once they list this one (else the sentence depends on when).
        wait_for(lambda: mgmt.queue_consumers(vhost, name).named, 30, "the management API listing the consumer")
        config = tmp_path / "gridbus.toml"
        config.write_text("# configured through GRIDBUS_* variables\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_")}
        env.update(GRIDBUS_URL=amqp_url, GRIDBUS_LOCAL_DIR=str(tmp_path), GRIDBUS_CONFIG=str(config),
                   GRIDBUS_SCHEDD_REQUEST_QUEUE_TYPE="quorum", PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-m", "gridbus.agents.schedd", "--name", "refusing", "--log-dir",
                               str(tmp_path / "log")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == DAEMON_NO_RESTART
    assert done.stderr.strip() == (
        f"gridbus schedd: queue {name} exists as durable classic {{x-dead-letter-exchange=gridbus.dead}} but this "
        f"version needs durable quorum {{x-dead-letter-exchange=gridbus.dead}}, and 1 consumer(s) still use it "
        f"(connection 'gridbus schedd@refusing' of user {params.credentials.username}): stop them and run "
        f"`{FIX_COMMAND}`")
