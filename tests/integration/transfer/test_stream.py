"""The chunk stream (gridbus/transfer/stream.py) on the real broker: files and directories arrive
whole and verified, the window bounds what is in flight, a sender that goes silent or an end that
refuses a file fails the transfer, and nothing half-received is left looking whole."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import aio_pika
import pytest

from gridbus.transfer import digests, stream
from gridbus.transfer.stream import DirectorySink, Endpoint, Entry, TransferError


async def _pair(url: str, token: str = "tok", stall: float = 5.0, hashes: str | None = digests.OFFER):
    """Two ends; the sender knows the receiver's queue and digests (``hashes``, None: a receiver
    that named none, gridbus 0.1.0) as the opening message would tell it."""
    a = await aio_pika.connect(url)
    b = await aio_pika.connect(url)
    sender, receiver = Endpoint(a, token, stall=stall), Endpoint(b, token, stall=stall)
    await sender.open()
    await receiver.open()
    sender.peer = receiver.queue_name
    sender.peer_hashes = digests.offered(hashes)
    return a, b, sender, receiver


def _sink(root: Path) -> DirectorySink:
    return DirectorySink(lambda name: str(root / name))


def test_files_and_directories_arrive_whole_with_their_modes(amqp_url, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "d" / "e").mkdir(parents=True)
    dst.mkdir()
    (src / "a.txt").write_bytes(b"alpha\n")
    (src / "empty").write_bytes(b"")
    big = os.urandom(3 * 1024 * 1024 + 17)  # several chunks, the last a short one
    (src / "d" / "e" / "big.bin").write_bytes(big)
    os.chmod(src / "a.txt", 0o755)
    entries = [Entry("a.txt", str(src / "a.txt"), 0o755), Entry("empty", str(src / "empty")),
               Entry("d", None, 0o755), Entry("d/e", None, 0o750), Entry("d/e/big.bin", str(src / "d/e/big.bin"))]

    async def go():
        a, b, sender, receiver = await _pair(amqp_url)
        try:
            sent, got = await asyncio.gather(stream.send_files(sender, entries, chunk_size=256 * 1024, window=4),
                                             stream.receive_files(receiver, _sink(dst), window=4))
        finally:
            await a.close()
            await b.close()
        return sent, got

    sent, got = asyncio.run(go())
    assert (sent.files, sent.bytes) == (got.files, got.bytes) == (3, len(big) + 6)
    assert (dst / "a.txt").read_bytes() == b"alpha\n" and os.stat(dst / "a.txt").st_mode & 0o777 == 0o755
    assert (dst / "empty").read_bytes() == b""
    assert hashlib.sha256((dst / "d/e/big.bin").read_bytes()).digest() == hashlib.sha256(big).digest()
    assert not [p for p in dst.rglob("*") if "partial" in p.name]


def test_the_sender_never_has_more_than_the_window_unacknowledged(amqp_url, tmp_path):
    (tmp_path / "f").write_bytes(os.urandom(64 * 1024))
    window = 3

    async def go():
        a, b, sender, receiver = await _pair(amqp_url)
        most = 0
        sent_seq = 0
        acked = 0
        real_send, real_recv_send = sender.send, receiver.send

        async def counting_send(kind, body=b"", **h):
            nonlocal sent_seq, most
            sent_seq = max(sent_seq, int(h.get("seq") or 0))
            most = max(most, sent_seq - acked)
            await real_send(kind, body, **h)

        async def counting_ack(kind, body=b"", **h):
            nonlocal acked
            if kind == "ack":
                acked = max(acked, int(h["seq"]))
            await real_recv_send(kind, body, **h)

        sender.send, receiver.send = counting_send, counting_ack
        try:
            await asyncio.gather(stream.send_files(sender, [Entry("f", str(tmp_path / "f"))], chunk_size=1024, window=window),
                                 stream.receive_files(receiver, _sink(tmp_path / "out"), window=window))
        finally:
            await a.close()
            await b.close()
        return most

    (tmp_path / "out").mkdir()
    most = asyncio.run(go())
    # 64 messages of data: without flow control the sender would be 60 ahead.
    assert 1 <= most <= window


def test_a_missing_source_file_fails_both_ends_naming_it(amqp_url, tmp_path):
    (tmp_path / "out").mkdir()

    async def go():
        a, b, sender, receiver = await _pair(amqp_url)
        try:
            return await asyncio.gather(stream.send_files(sender, [Entry("x", str(tmp_path / "nope"))]),
                                        stream.receive_files(receiver, _sink(tmp_path / "out")), return_exceptions=True)
        finally:
            await a.close()
            await b.close()

    sent, got = asyncio.run(go())
    for err in (sent, got):
        assert isinstance(err, TransferError) and not err.link
        assert str(tmp_path / "nope") in err.reason and "No such file" in err.reason


@pytest.mark.parametrize("size", [100, 4096], ids=["one message", "in chunks"])
def test_a_file_that_changes_while_it_is_sent_fails_both_ends_with_htcondor_s_sentence(amqp_url, tmp_path, monkeypatch,
                                                                                        size):
    (tmp_path / "out").mkdir()
    src = tmp_path / "changing"
    src.write_bytes(b"c" * size)
    real_fstat = os.fstat
    seen: list[int] = []

    def fstat(fd):  # the file's size as it was when its sending began: 10 bytes fewer than now
        st = real_fstat(fd)
        seen.append(fd)
        if len(seen) == 1:
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
                                   st.st_size - 10, st.st_atime, st.st_mtime, st.st_ctime))
        return st

    async def go():
        a, b, sender, receiver = await _pair(amqp_url)
        monkeypatch.setattr(stream.os, "fstat", fstat)
        try:
            return await asyncio.gather(
                stream.send_files(sender, [Entry("changing", str(src))], chunk_size=1024),
                stream.receive_files(receiver, _sink(tmp_path / "out")), return_exceptions=True)
        finally:
            monkeypatch.undo()
            await a.close()
            await b.close()

    sent, got = asyncio.run(go())
    for err in (sent, got):  # a file's fault, not the link's: HTCondor holds the job
        assert isinstance(err, TransferError) and not err.link, err
        assert f"{src}: ReliSock: put_file: only sent" in err.reason and f"out of {size}" in err.reason
    assert list((tmp_path / "out").iterdir()) == []


def test_a_sender_gone_mid_file_is_a_link_failure_and_leaves_no_whole_looking_file(amqp_url, tmp_path):
    (tmp_path / "f").write_bytes(os.urandom(2 * 1024 * 1024))
    (tmp_path / "out").mkdir()

    async def go():
        a, b, sender, receiver = await _pair(amqp_url, stall=1.0)
        half = asyncio.Event()
        real_send, count = sender.send, 0

        async def stops_halfway(kind, body=b"", **h):
            nonlocal count
            count += kind == "data"
            if count > 5:
                half.set()
                await asyncio.Event().wait()  # never sends the rest
            await real_send(kind, body, **h)

        sender.send = stops_halfway
        receiving = asyncio.ensure_future(stream.receive_files(receiver, _sink(tmp_path / "out"), window=2))
        sending = asyncio.ensure_future(stream.send_files(sender, [Entry("f", str(tmp_path / "f"))], chunk_size=64 * 1024, window=2))
        await half.wait()
        await a.close()  # the sender's connection drops mid-transfer
        sending.cancel()
        try:
            with pytest.raises(TransferError) as err:
                await receiving
        finally:
            await b.close()
        return err.value

    err = asyncio.run(go())
    assert err.link and "no word" in err.reason
    assert list((tmp_path / "out").iterdir()) == []


def test_messages_without_the_token_are_dropped_and_names_that_leave_the_sandbox_refused(amqp_url, tmp_path):
    (tmp_path / "out").mkdir()

    async def go():
        a, b, sender, receiver = await _pair(amqp_url, stall=1.0)
        stranger = Endpoint(a, "not-the-token")
        await stranger.open()
        stranger.peer = receiver.queue_name
        await stranger.send("file", seq=1, name="evil", size=1)
        try:
            return await asyncio.gather(stream.send_files(sender, [Entry("../escape", None)]),
                                        stream.receive_files(receiver, _sink(tmp_path / "out")), return_exceptions=True)
        finally:
            await a.close()
            await b.close()

    _sent, got = asyncio.run(go())
    assert isinstance(got, TransferError) and "leave the sandbox" in got.reason
    assert list((tmp_path / "out").iterdir()) == [] and not (tmp_path / "escape").exists()


def test_an_aborted_receiver_gives_up_at_once_not_at_its_stall_timeout(amqp_url, tmp_path):
    (tmp_path / "out").mkdir()

    async def go():
        a, b, sender, receiver = await _pair(amqp_url, stall=30.0)
        receiving = asyncio.ensure_future(stream.receive_files(receiver, _sink(tmp_path / "out")))
        started = asyncio.get_running_loop().time()
        receiver.abort("the job is being removed")
        try:
            with pytest.raises(TransferError) as err:
                await receiving
        finally:
            await a.close()
            await b.close()
        return err.value, asyncio.get_running_loop().time() - started

    err, took = asyncio.run(go())
    assert err.link and "being removed" in err.reason
    assert took < 5  # not the 30 s stall


async def _cut_halfway(url: str, src: Path, sink: DirectorySink, *, after: int,
                       abort: str = "", direct_min: int = stream.directio.DIRECT_IO_MIN,
                       hashes: str | None = digests.OFFER) -> TransferError:
    """A transfer of ``src`` whose sender stops after ``after`` data messages, then its connection
    goes (or, with ``abort``, the receiver stops it on purpose, saying why): the receiver's error."""
    a, b, sender, receiver = await _pair(url, stall=5.0 if abort else 1.0, hashes=hashes)
    real_send, count = sender.send, 0
    half = asyncio.Event()

    async def stops(kind, body=b"", **h):
        nonlocal count
        count += kind == "data"
        if count > after:
            half.set()
            await asyncio.Event().wait()  # never sends the rest
        await real_send(kind, body, **h)

    sender.send = stops
    receiving = asyncio.ensure_future(stream.receive_files(receiver, sink, window=4))
    sending = asyncio.ensure_future(stream.send_files(sender, [Entry("f", str(src))], chunk_size=64 * 1024, window=4,
                                                      resume=True, direct_min=direct_min))
    await half.wait()
    if abort:
        receiver.abort(abort)
    else:
        await a.close()
        sending.cancel()
    try:
        with pytest.raises(TransferError) as err:
            await receiving
    finally:
        sending.cancel()
        await a.close()
        await b.close()
    return err.value


async def _whole(url: str, src: Path, sink: DirectorySink, direct_min: int = stream.directio.DIRECT_IO_MIN) -> stream.Stats:
    a, b, sender, receiver = await _pair(url)
    try:
        sent, _got = await asyncio.gather(
            stream.send_files(sender, [Entry("f", str(src))], chunk_size=64 * 1024, window=4, resume=True,
                              direct_min=direct_min),
            stream.receive_files(receiver, sink, window=4))
    finally:
        await a.close()
        await b.close()
    return sent


@pytest.mark.parametrize("direct_min", [0, 1], ids=["through-the-cache", "around-the-cache"])
def test_a_transfer_cut_halfway_resumes_where_the_receiver_s_kept_part_ends(amqp_url, tmp_path, direct_min):
    src, out = tmp_path / "f", tmp_path / "out"
    out.mkdir()
    data = os.urandom(2 * 1024 * 1024 + 5)  # 33 chunks of 64 KiB
    src.write_bytes(data)
    partials = stream.Partials()

    def sink() -> DirectorySink:  # a new sink per attempt, as every transfer makes its own
        return DirectorySink(lambda n: str(out / n), key="7.0/out", partials=partials, direct_min=direct_min)

    err = asyncio.run(_cut_halfway(amqp_url, src, sink(), after=10, direct_min=direct_min))
    assert err.link
    (kept,) = [p for p in out.iterdir()]  # the part, under a name that says so; nothing looks whole
    assert kept.name.startswith(".f.") and kept.name.endswith(stream.PARTIAL_SUFFIX)
    held = kept.stat().st_size
    assert 0 < held < len(data) and data.startswith(kept.read_bytes())

    sent = asyncio.run(_whole(amqp_url, src, sink(), direct_min))
    assert sent.skipped == held and sent.sent == len(data) - held  # not from zero
    assert (out / "f").read_bytes() == data
    assert [p.name for p in out.iterdir()] == ["f"] and len(partials) == 0


def test_a_kept_part_of_a_file_that_changed_since_is_not_resumed(amqp_url, tmp_path):
    src, out = tmp_path / "f", tmp_path / "out"
    out.mkdir()
    data = os.urandom(1024 * 1024)
    src.write_bytes(data)
    partials = stream.Partials()

    def sink() -> DirectorySink:
        return DirectorySink(lambda n: str(out / n), key="7.0/out", partials=partials)

    asyncio.run(_cut_halfway(amqp_url, src, sink(), after=4))
    assert len(partials) == 1
    # Rewritten, same size, same mtime (the sender's size and mtime agree): the sha256 of the part
    # tells it apart, and the file goes from its first byte.
    st = src.stat()
    changed = os.urandom(len(data))
    src.write_bytes(changed)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    sent = asyncio.run(_whole(amqp_url, src, sink()))
    assert sent.skipped == 0 and sent.sent == len(data)
    assert (out / "f").read_bytes() == changed

    # Another mtime: the receiver offers nothing (its part is of another file) and removes it.
    asyncio.run(_cut_halfway(amqp_url, src, sink(), after=4))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    sent = asyncio.run(_whole(amqp_url, src, sink()))
    assert sent.skipped == 0 and (out / "f").read_bytes() == changed
    assert [p.name for p in out.iterdir()] == ["f"]


def test_a_receiver_without_a_key_keeps_nothing_and_an_old_sender_is_served(amqp_url, tmp_path):
    src, out = tmp_path / "f", tmp_path / "out"
    out.mkdir()
    src.write_bytes(os.urandom(1024 * 1024))
    asyncio.run(_cut_halfway(amqp_url, src, _sink(out), after=4))
    assert list(out.iterdir()) == []

    async def old_sender():  # one that asks nothing (resume=False): the stream it knows
        a, b, sender, receiver = await _pair(amqp_url)
        try:
            return await asyncio.gather(stream.send_files(sender, [Entry("f", str(src))], chunk_size=64 * 1024, resume=False),
                                        stream.receive_files(receiver, DirectorySink(lambda n: str(out / n), key="k")))
        finally:
            await a.close()
            await b.close()

    sent, got = asyncio.run(old_sender())
    assert sent.sent == got.bytes == 1024 * 1024 and (out / "f").read_bytes() == src.read_bytes()



def test_a_transfer_stopped_on_purpose_keeps_nothing_for_a_next_attempt(amqp_url, tmp_path):
    src, out = tmp_path / "f", tmp_path / "out"
    out.mkdir()
    src.write_bytes(os.urandom(1024 * 1024))
    partials = stream.Partials()

    async def go():
        sink = DirectorySink(lambda n: str(out / n), key="7.0/in", partials=partials)
        # (the startd's claim deactivated)
        return await _cut_halfway(amqp_url, src, sink, after=4, abort="the job is being removed")

    err = asyncio.run(go())
    assert err.link and not err.resumable
    assert len(partials) == 0 and list(out.iterdir()) == []


def test_big_files_go_around_the_page_cache_and_arrive_whole_both_ways(amqp_url, tmp_path):
    """A file of TRANSFER_DIRECT_IO_MIN_MB or more is written with O_DIRECT (whole chunks; its
    short last one as usual) and, sent on from where nobody has read it since, read around the
    cache too: byte for byte the same after two hops, with a small file beside it unaffected."""
    src, mid, dst = tmp_path / "src", tmp_path / "mid", tmp_path / "dst"
    for d in (src, mid, dst):
        d.mkdir()
    big = os.urandom(3 * 1024 * 1024 + 17)
    (src / "big.bin").write_bytes(big)
    (src / "small").write_bytes(b"small\n")
    entries = [Entry("big.bin", str(src / "big.bin")), Entry("small", str(src / "small"))]
    direct_min = 1024 * 1024

    async def hop(entries, into: Path):
        a, b, sender, receiver = await _pair(amqp_url)
        try:
            return await asyncio.gather(
                stream.send_files(sender, entries, chunk_size=256 * 1024, window=4, direct_min=direct_min),
                stream.receive_files(receiver, DirectorySink(lambda n: str(into / n), direct_min=direct_min), window=4))
        finally:
            await a.close()
            await b.close()

    asyncio.run(hop(entries, mid))
    assert (mid / "big.bin").read_bytes() == big and (mid / "small").read_bytes() == b"small\n"
    fd = os.open(mid / "big.bin", os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # (none of it cached: read around the cache)
    os.close(fd)
    asyncio.run(hop([Entry("big.bin", str(mid / "big.bin"))], dst))
    assert hashlib.sha256((dst / "big.bin").read_bytes()).digest() == hashlib.sha256(big).digest()
    assert not [p for p in dst.rglob("*") if "partial" in p.name]


def _recording(ep: Endpoint) -> list[tuple[str, dict]]:
    """Every message ``ep`` sends from now on, as (kind, headers)."""
    sent: list[tuple[str, dict]] = []
    real = ep.send

    async def send(kind, body=b"", **h):
        sent.append((kind, h))
        await real(kind, body, **h)

    ep.send = send  # type: ignore[method-assign]
    return sent


async def _send_one_of_each(url: str, src: Path, into: Path, *, hashes: str | None,
                            tamper: bool = False) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
    """A small file (``whole``) and a chunked one between two ends, the receiver having named
    ``hashes``; with ``tamper``, one chunk's bytes are changed on the way. What each end sent."""
    a, b, sender, receiver = await _pair(url, hashes=hashes)
    by_sender, by_receiver = _recording(sender), _recording(receiver)
    if tamper:
        real = sender._channel.default_exchange.publish

        async def publish(message, routing_key, **kw):
            if (message.headers or {}).get("t") == "data" and message.body:
                message.body = b"\0" + message.body[1:]
            return await real(message, routing_key, **kw)

        sender._channel.default_exchange.publish = publish
    try:
        await asyncio.gather(
            stream.send_files(sender, [Entry("small", str(src / "small")), Entry("big", str(src / "big"))],
                              chunk_size=64 * 1024, window=4, resume=True),
            stream.receive_files(receiver, DirectorySink(lambda n: str(into / n), key="1.0/in"), window=4))
    finally:
        await a.close()
        await b.close()
    return by_sender, by_receiver


def _sources(tmp_path: Path) -> tuple[Path, Path, bytes]:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    big = os.urandom(300 * 1024 + 3)
    (src / "small").write_bytes(b"small\n")
    (src / "big").write_bytes(big)
    return src, out, big


def test_two_ends_that_both_know_xxh3_check_every_file_by_it(amqp_url, tmp_path):
    src, out, big = _sources(tmp_path)
    by_sender, by_receiver = asyncio.run(_send_one_of_each(amqp_url, src, out, hashes=digests.OFFER))
    named = {kind: h for kind, h in by_sender if kind in ("whole", "file", "eof")}
    assert named["whole"]["hash"] == named["file"]["hash"] == "xxh3_128"
    assert named["whole"]["xxh3_128"] == digests.of(b"small\n", "xxh3_128")
    assert named["eof"]["xxh3_128"] == digests.of(big, "xxh3_128")
    assert not any("sha256" in h for _, h in by_sender + by_receiver)
    (at,) = [h for kind, h in by_receiver if kind == "at"]
    assert at["offset"] == 0 and at["xxh3_128"] == ""
    assert (out / "big").read_bytes() == big and (out / "small").read_bytes() == b"small\n"


@pytest.mark.parametrize("hashes", [None, "sha256", "md5,sha256"], ids=["named-none", "sha256-only", "unknown-first"])
def test_a_receiver_that_knows_only_sha256_gets_the_stream_it_knows(amqp_url, tmp_path, hashes):
    """An older end (gridbus 0.1.0 names no digests, and checks sha256 only) is sent sha256 with
    no ``hash`` named: the messages it has always read."""
    src, out, big = _sources(tmp_path)
    by_sender, _ = asyncio.run(_send_one_of_each(amqp_url, src, out, hashes=hashes))
    named = {kind: h for kind, h in by_sender if kind in ("whole", "file", "eof")}
    assert not any("hash" in h or "xxh3_128" in h for h in named.values())
    assert named["whole"]["sha256"] == hashlib.sha256(b"small\n").hexdigest()
    assert named["eof"]["sha256"] == hashlib.sha256(big).hexdigest()
    assert (out / "big").read_bytes() == big


@pytest.mark.parametrize("hashes", [digests.OFFER, None], ids=["xxh3_128", "sha256"])
def test_a_chunk_changed_on_the_way_fails_the_file_by_its_digest(amqp_url, tmp_path, hashes):
    src, out, _big = _sources(tmp_path)
    with pytest.raises(TransferError) as err:
        asyncio.run(_send_one_of_each(amqp_url, src, out, hashes=hashes, tamper=True))
    algorithm = digests.choose(digests.offered(hashes))
    assert err.value.link and f"big: received {300 * 1024 + 3} of {300 * 1024 + 3} bytes, or a wrong {algorithm}" in err.value.reason
    assert not (out / "big").exists()


def test_a_file_checked_by_a_digest_the_receiver_does_not_know_is_refused(amqp_url, tmp_path):
    src, out, _big = _sources(tmp_path)

    async def go():
        a, b, sender, receiver = await _pair(amqp_url)
        real = sender.send

        async def names_md5(kind, body=b"", **h):
            if kind in ("whole", "file"):
                h["hash"] = "md5"
            await real(kind, body, **h)

        sender.send = names_md5
        try:
            return await asyncio.gather(
                stream.send_files(sender, [Entry("small", str(src / "small"))], window=4),
                stream.receive_files(receiver, _sink(out), window=4), return_exceptions=True)
        finally:
            await a.close()
            await b.close()

    sent, got = asyncio.run(go())
    assert isinstance(got, TransferError) and "small: checked by the digest 'md5', which this end does not know" in got.reason
    assert isinstance(sent, TransferError) and "md5" in sent.reason
    assert list(out.iterdir()) == []


def test_a_part_kept_by_sha256_is_not_resumed_by_an_attempt_checked_by_xxh3(amqp_url, tmp_path):
    """A part cut from an older sender's attempt (sha256) and the next attempt by a newer one
    (xxh3_128): the kept part's state is of the other digest, so the file goes from its first
    byte, and arrives whole."""
    src, out = tmp_path / "f", tmp_path / "out"
    out.mkdir()
    data = os.urandom(1024 * 1024 + 9)
    src.write_bytes(data)
    partials = stream.Partials()

    def sink() -> DirectorySink:
        return DirectorySink(lambda n: str(out / n), key="7.0/in", partials=partials)

    asyncio.run(_cut_halfway(amqp_url, src, sink(), after=4, hashes=None))
    (part,) = partials._kept.values()
    assert digests.name_of(part.digest) == "sha256" and part.offset > 0
    sent = asyncio.run(_whole(amqp_url, src, sink()))
    assert sent.skipped == 0 and sent.sent == len(data)
    assert [p.name for p in out.iterdir()] == ["f"] and (out / "f").read_bytes() == data
