"""The harness itself: the namespace reaches the broker only through the forwarder, and a cut cuts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.faults.netns import CUT_DOWN, CUT_NETEM, NetnsLink

pytestmark = pytest.mark.broker

# Opens a TCP connection, sends the AMQP 0-9-1 protocol header and prints the first frame type
# the broker answers with (1: a method frame, Connection.Start); exits 3 when nothing answers.
PROBE = """
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    s.sendall(b"AMQP\\x00\\x00\\x09\\x01")
    print(s.recv(1)[0])
except OSError as exc:
    print(type(exc).__name__)
    sys.exit(3)
"""


def probe(link: NetnsLink, host: str, port: int, timeout: float = 1.5) -> subprocess.CompletedProcess:
    return subprocess.run(link.command([sys.executable, "-c", PROBE, host, str(port), str(timeout)]),
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("method", [CUT_DOWN, CUT_NETEM])
def test_the_namespace_reaches_the_broker_through_the_forwarder_until_the_cut(link: NetnsLink, method: str):
    assert link.forwarder is not None
    port = link.forwarder.port
    if method == CUT_NETEM and (why := link.netem_missing()):
        pytest.skip(why)
    # The broker itself is not reachable from the namespace: 127.0.0.1 there is the namespace's own.
    assert probe(link, "127.0.0.1", 5672).returncode == 3
    ok = probe(link, link.host_addr, port)
    assert ok.returncode == 0 and ok.stdout.strip() == "1", ok
    link.cut(method)
    try:
        cut = probe(link, link.host_addr, port)
        assert cut.returncode == 3, cut
    finally:
        assert link.restore() > 0
    again = probe(link, link.host_addr, port)
    assert again.returncode == 0 and again.stdout.strip() == "1", again
    assert link.forwarder.connections == 2  # the probe during the cut never reached the host


def test_close_removes_the_namespace_and_both_veth_ends(link: NetnsLink):
    other = NetnsLink().open()
    other.close()
    assert other.netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert subprocess.run(["ip", "link", "show", other.host_if], capture_output=True).returncode != 0
    other.close()  # twice is harmless
    assert link.netns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
