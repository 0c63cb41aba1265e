"""A file transfer cut half-way by the loss of the broker node both its ends are connected to:
each end's connection fails over through the broker URL list to another node, the job's next
attempt resumes from the part the receiver kept (it does not start again from zero), and the file
arrives whole. The ends are the real ones of an output transfer: the owner's shadow's code
(shadow_child: connect, expect, serve) receives, a startd-like sender on a failover connection
(gridbus.agent.failover, as every daemon's) sends."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

import pytest

from gridbus.agent import failover
from gridbus.agents.schedd import shadow_child
from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from gridbus.transfer import spec, stream
from tests.rabbit_cluster import RabbitCluster

pytestmark = pytest.mark.e2e

MIB = 1 << 20
SIZE = 48 * MIB
CUT_AFTER = 16  # data messages sent before the node goes
STALL = 2.0


async def _open(startd, shadow_queue: str, token: str, iwd: Path) -> stream.Endpoint:
    """What the startd does for an output transfer: the shadow expects it (the schedd's
    OpenTransfer), the startd sends ``open`` and learns the shadow's end from ``ready``."""
    answer = await shadow_child._handle({"op": "expect", "token": token, "direction": "out",
                                         "spec": {"Iwd": str(iwd), spec.RESUME_KEY: "9.0", "stall": STALL}})
    assert answer["ok"], answer
    ep = stream.Endpoint(startd, token, stall=STALL)
    await ep.open()
    ep.peer = shadow_queue
    await ep.send("open", direction="out")
    ready = await ep.next()
    assert (ready.headers or {}).get("t") == "ready", ready.headers
    ep.peer = ready.reply_to
    ep.heard(ready.headers)
    return ep


def test_a_transfer_cut_by_its_broker_node_s_loss_fails_over_and_resumes(rabbit_cluster: RabbitCluster,
                                                                          tmp_path: Path) -> None:
    mgmt_node = rabbit_cluster.nodes[1]  # (node 0 is the one that goes)
    mgmt = Management(mgmt_node.mgmt_url)
    vhost = f"gridbus-cluster-transfer-{int(time.time())}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, "guest", ".*", ".*", ".*")
    url = BrokerURL(rabbit_cluster.url).with_vhost(vhost)
    urls = [a.url for a in url.alternatives]
    src = tmp_path / "big.bin"
    data = os.urandom(SIZE)
    src.write_bytes(data)
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    entries = [stream.Entry("big.bin", str(src))]
    doomed = rabbit_cluster.nodes[0]

    async def main() -> tuple[stream.Stats, int]:
        answer = await shadow_child._handle({"op": "connect", "url": urls[0], "urls": urls, "name": "shadow of test"})
        assert answer["ok"] and shadow_child._bus["index"] == 0, answer
        startd = await failover.connect(url, name="gridbus startd@test")
        assert startd.broker.endswith(f":{doomed.amqp_port}")  # both ends on the node that goes
        try:
            ep = await _open(startd, answer["queue"], "first", iwd)
            cut, go_on = asyncio.Event(), asyncio.Event()
            real_send, count = ep.send, 0

            async def held_at_the_cut(kind, body=b"", **h):
                nonlocal count
                count += kind == "data"
                if count == CUT_AFTER + 1:
                    cut.set()
                    await go_on.wait()
                await real_send(kind, body, **h)

            ep.send = held_at_the_cut  # type: ignore[method-assign]
            sending = asyncio.ensure_future(stream.send_files(ep, entries))
            await cut.wait()
            loop = asyncio.get_running_loop()
            # The receiver has written what was sent (the sender waits at the cut meanwhile).
            deadline = loop.time() + 20
            while not [p for p in iwd.iterdir() if p.stat().st_size >= CUT_AFTER * MIB]:
                assert loop.time() < deadline, list(iwd.iterdir())
                await asyncio.sleep(0.05)
            await loop.run_in_executor(None, doomed.kill)
            go_on.set()
            with pytest.raises(stream.TransferError) as err:
                await sending
            assert err.value.link, err.value
            await ep.close()
            # The shadow's end gives up at its stall timeout and keeps the part it wrote.
            deadline = loop.time() + 10 + STALL
            while shadow_child._tasks:
                assert loop.time() < deadline, "the shadow's end of the cut transfer did not end"
                await asyncio.sleep(0.05)
            (part,) = [p for p in iwd.iterdir()]
            assert part.name.endswith(stream.PARTIAL_SUFFIX) and not (iwd / "big.bin").exists()
            kept = part.stat().st_size
            assert CUT_AFTER * MIB <= kept < SIZE

            # Both ends fail over: the shadow connects again (from the broker after the lost one),
            # the startd's connection has moved by itself.
            answer = await shadow_child._handle({"op": "connect", "url": urls[0], "urls": urls, "name": "shadow of test"})
            assert answer["ok"] and shadow_child._bus["index"] == 1, answer
            deadline = loop.time() + 30
            while not (startd.connected.is_set() and not startd.broker.endswith(f":{doomed.amqp_port}")):
                assert loop.time() < deadline, f"the startd's connection did not fail over ({startd.broker})"
                await asyncio.sleep(0.1)
            ep = await _open(startd, answer["queue"], "second", iwd)
            try:
                sent = await stream.send_files(ep, entries)
            finally:
                await ep.close()
            return sent, kept
        finally:
            await startd.close()
            if shadow_child._bus.get("connection") is not None:
                await shadow_child._bus["connection"].close()
            shadow_child._bus.clear()

    try:
        sent, kept = asyncio.run(main())
    finally:
        if not doomed.running():
            doomed.start()
        Management(mgmt_node.mgmt_url).delete_vhost(vhost)
    assert sent.skipped == kept and sent.sent == SIZE - kept < SIZE  # resumed, not sent again from zero
    assert hashlib.sha256((iwd / "big.bin").read_bytes()).digest() == hashlib.sha256(data).digest()
    assert [p.name for p in iwd.iterdir()] == ["big.bin"]
