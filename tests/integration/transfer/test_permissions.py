"""Only the two ends of a transfer can touch its queues (broker permissions from `gridbus broker
setup`, and exclusive queues): a plain user can neither read a transfer's queue nor put anything
into it, while two daemon connections move files through it."""

from __future__ import annotations

import asyncio
import uuid

import aio_pika

from gridbus.transfer import stream
from gridbus.transfer.stream import DirectorySink, Endpoint, Entry
from tests.integration.security.test_authorization_matrix import _setup_accounts


def test_a_plain_user_can_neither_read_nor_feed_a_transfer_queue(broker_url, vhost, mgmt, tmp_path):
    tag = uuid.uuid4().hex[:8]
    names = {"daemon": f"gbt-{tag}-daemon", "alice": f"gbt-{tag}-alice", "bob": f"gbt-{tag}-bob"}
    try:
        passwords = _setup_accounts(broker_url, vhost, names, tmp_path)
        urls = {k: broker_url.with_vhost(vhost).with_credentials(names[k], passwords[k]).url for k in names}
        (tmp_path / "f").write_bytes(b"daemon to daemon\n")
        (tmp_path / "out").mkdir()

        async def go() -> list[str]:
            a, b = await aio_pika.connect(urls["daemon"]), await aio_pika.connect(urls["daemon"])
            sender, receiver = Endpoint(a, "tok", stall=3), Endpoint(b, "tok", stall=3)
            await sender.open()
            await receiver.open()
            sender.peer = receiver.queue_name
            refusals = []
            alice = await aio_pika.connect(urls["alice"])
            try:
                for attempt in ("consume", "publish"):
                    channel = await alice.channel(publisher_confirms=True)
                    try:
                        if attempt == "consume":
                            queue = await channel.declare_queue(receiver.queue_name, passive=True)
                            await queue.consume(lambda m: None, no_ack=True)
                        else:
                            await channel.default_exchange.publish(
                                aio_pika.Message(b"x", headers={"t": "file", "tok": "tok", "seq": 1, "name": "evil", "size": 1}),
                                routing_key=receiver.queue_name)
                    except aio_pika.exceptions.AMQPError as exc:
                        refusals.append(f"{attempt}: {exc!r}")
                sent, got = await asyncio.gather(stream.send_files(sender, [Entry("f", str(tmp_path / "f"))]),
                                                 stream.receive_files(receiver, DirectorySink(lambda n: str(tmp_path / "out" / n))))
                assert sent.files == got.files == 1
            finally:
                await alice.close()
                await a.close()
                await b.close()
            return refusals

        refusals = asyncio.run(go())
        assert len(refusals) == 2, refusals
        assert "RESOURCE_LOCKED" in refusals[0] or "ACCESS_REFUSED" in refusals[0], refusals
        assert "ACCESS_REFUSED" in refusals[1], refusals
        assert (tmp_path / "out" / "f").read_bytes() == b"daemon to daemon\n"
        assert not (tmp_path / "out" / "evil").exists()
    finally:
        for name in names.values():
            try:
                mgmt.delete_user(name)
            except Exception:
                pass


