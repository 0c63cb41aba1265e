"""The web daemon on a real broker, in this process: it serves on a free port when WEB_ADDRESS's is
taken (and says where), its /metrics and its Web ad carry what it took from the bus, and a stream
binds a job owner's events only while it lasts."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from gridbus import bus
from gridbus.agent.threaded import AgentThread
from gridbus.console.web.agent import WebDaemon
from gridbus.mgmt import Management
from tests.helpers import wait_for

pytestmark = pytest.mark.broker


def bindings(mgmt: Management, vhost: str, queue: str) -> set[str]:
    path = f"/queues/{mgmt.q(vhost)}/{mgmt.q(queue)}/bindings"
    return {b["routing_key"] for b in mgmt.request("GET", path) if b["source"] == bus.EVENTS}


def test_a_taken_port_a_free_one_and_owner_bindings(amqp_url: str, mgmt: Management, vhost: str, tmp_path: Path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    address_file = tmp_path / "log" / ".web_address"
    daemon = WebDaemon("w", amqp_url, address=f"127.0.0.1:{port}", address_file=address_file, update_interval=1)
    try:
        with AgentThread(daemon) as thread:
            url = address_file.read_text().strip()
            assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{port}")
            assert daemon.daemon_ad()["WebURL"] == url
            # Its own Web ad comes back to it over the bus (it binds its MyType too): /metrics has it.
            def own_ad_seen() -> bool:
                with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
                    return 'gridbus_daemon_duty_cycle_ratio{daemon="web@w"}' in r.read().decode()

            wait_for(own_ad_seen, 20, "the web daemon's own ad in /metrics")
            queue = f"gridbus.web.{daemon.name}"
            assert bindings(mgmt, vhost, queue) == set()  # no job events while no page shows a job
            thread.call(daemon.watch_owner("alice"))
            thread.call(daemon.watch_owner("alice"))
            assert bindings(mgmt, vhost, queue) == {"job.*.alice"}
            thread.call(daemon.unwatch_owner("alice"))
            assert bindings(mgmt, vhost, queue) == {"job.*.alice"}  # one page still shows one
            thread.call(daemon.unwatch_owner("alice"))
            assert bindings(mgmt, vhost, queue) == set()
        assert not address_file.exists()
    finally:
        taken.close()
