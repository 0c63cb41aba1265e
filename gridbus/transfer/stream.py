"""A set of files as a stream of chunks between two ends of the bus, with flow control.

(One module over 500 lines: both ends of the protocol read together, in a module the owner's shadow imports alone.)

Each end of one transfer has a queue of its own on the broker: server-named, exclusive (only the
connection that declared it may consume from it, and it goes away with that connection) and
auto-deleted. Its name is told to the other end only: in the opening message, which goes to the
owner's shadow's own exclusive queue, whose name the startd gets from the schedd (OpenTransfer).
Nothing of a transfer goes through the ad or event exchanges, and plain users may not publish on
the default exchange at all (``gridbus broker setup``), so only daemons' connections can even
reach these queues; every message also carries the transfer's token, and one without it is dropped.

The sender sends, in order and numbered: ``dir`` (a directory to make), ``file`` (name, size,
mode, mtime), ``data`` chunks of at most CHUNK_SIZE bytes, ``eof`` (the file's digest), ..., ``end``;
a file smaller than a chunk goes as one ``whole`` message (name, size, mode, digest and the bytes).
Which digest (xxh3_128, or sha256 for a peer that knows no other) is agreed as digests.py says:
each end's opening message names those it knows, each ``file`` and ``whole`` the one it is checked by.

Flow control is by credit: the receiver grants it, the sender spends it. Each ``ack`` says the
last message the receiver has written (``seq``) and the last one the sender may send (``credit``,
``seq`` + the receiver's window); the receiver acknowledges every quarter window and at every
``eof``, so the sender, whose window is never empty while the receiver keeps up, never stops to
wait for a reply, and a slow receiver (or disk) slows it down: at most a window of chunks is in
flight whatever the file's size. Both ends are pipelined: the sender reads and hashes the next
chunk on a thread while it publishes the current one (the bytes read go to the connection as
they are: no copy before its own framing), and the receiver hashes and writes a chunk on a thread
while the next one comes, so the disk, the hash and the broker overlap. ``end`` is answered
``done`` once every file is written and verified.

Resumption: a receiver whose transfer is cut (a link failure) keeps the part of a file it has
written (a ``.gridbus-partial`` file, remembered in memory with the sender's size and mtime and
the digest's state of the part; ``Partials``). When the same job sends again, its ``file`` says the
file's size and mtime and asks (``res``) where to start; the receiver answers ``at``: the
offset it holds for that name if the size and mtime agree (else 0, or if the part was hashed by
another digest) and that part's digest. The sender hashes its own first ``offset`` bytes and, if
they agree, sends from there (the first
``data`` says ``off``); otherwise from 0. An end asks only a peer that said, in its opening
message (``res`` on ``open`` or ``ready``), that it answers: an older peer gets the stream it knows.

Failures: either end may send ``error`` (a named file cannot be read, or written) and give up;
silence for ``stall`` seconds (a connection or a process gone) ends the transfer as a link
failure. No half transfer is ever taken for a whole one: the receiver commits a file only when
its size and digest agree, and the transfer only on ``end``.

This module imports only the standard library, aio-pika and xxhash (the owner's shadow imports it).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, cast

from gridbus import protocol
from gridbus.transfer import digests, directio

CHUNK_SIZE = 1 << 20  # bytes per data message (see docs/architecture.md, "File transfer")
WINDOW = 8  # messages a receiver lets the sender have in flight (its credit beyond what it wrote)
STALL_TIMEOUT = 30.0  # seconds without a message from the other end: the transfer has failed
PARTIAL_KEEP = 3600.0  # seconds a cut transfer's partial file is kept for the job's next attempt
PARTIALS_KEPT = 64  # partial files a process keeps at most (the oldest go first)


class TransferError(Exception):
    """A transfer failed. ``link``: the connection, not the files, failed (silence, a process or
    a broker connection gone): try again elsewhere. Otherwise a named file could not be read or
    written: the job's owner has to act (HTCondor holds the job). ``path`` names the file.
    ``resumable``: a cut link after which the receiver keeps what it has for the job's next
    attempt (not a transfer this end stopped on purpose: its job removed, held or vacated)."""

    def __init__(self, reason: str, *, link: bool = False, path: str = "", errno: int = 0,
                 resumable: bool | None = None):
        super().__init__(reason)
        self.reason = reason
        self.link = link
        self.resumable = link if resumable is None else resumable
        self.path = path
        self.errno = errno


@dataclass
class Entry:
    """One thing to send: a directory (``path`` None) or a regular file read from ``path``."""

    name: str  # its relative name at the receiver, '/'-separated
    path: str | None
    mode: int = 0o644


@dataclass
class Stats:
    files: int = 0
    bytes: int = 0  # the files' bytes
    sent: int = 0  # bytes of chunked files sent (not those the receiver held from a cut attempt)
    skipped: int = 0  # bytes the receiver held from a cut attempt: not sent again
    started: float = field(default_factory=time.time)
    finished: float = 0.0


def safe_name(name: str) -> bool:
    """A relative name that stays below the directory it is put in: no absolute path, no ``..``,
    no empty or ``.`` part, no NUL (the receiver never trusts the sender's names)."""
    if not name or "\0" in name or name.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


class Sink(Protocol):
    """Where a receiver puts what it gets."""

    def directory(self, name: str, mode: int) -> None: ...
    def open(self, name: str, size: int, mode: int) -> BinaryIO: ...
    def commit(self, name: str, fh: BinaryIO) -> None: ...
    def abort(self, name: str, fh: BinaryIO) -> None: ...


class ResumingSink(Sink, Protocol):
    """A sink that keeps a cut file's written part for the next attempt (DirectorySink with a key)."""

    def resume(self, name: str, source: tuple[int, int], mode: int) -> tuple[BinaryIO, int, Any] | None: ...
    def keep(self, name: str, fh: BinaryIO, source: tuple[int, int], offset: int, digest: Any) -> None: ...


OPENING: dict[str, Any] = {"res": True, "hashes": digests.OFFER}
"""What an opening message (``open``, ``ready``) says this end can do: it answers where a file starts
(resumption) and knows these digests."""


class Endpoint:
    """One end of one transfer: an exclusive, server-named queue on its own channel."""

    def __init__(self, connection: Any, token: str, *, stall: float = STALL_TIMEOUT):
        self.connection = connection
        self.token = token
        self.stall = stall
        self.peer = ""  # the other end's queue
        self.peer_resumes = False  # the other end answers ``at`` (its opening message said ``res``)
        self.peer_hashes: tuple[str, ...] = (digests.SHA256,)  # the digests it knows (``hashes``)
        self.queue_name = ""
        self._channel: Any = None
        self._queue: Any = None
        self._tag: str | None = None
        self._inbox: asyncio.Queue = asyncio.Queue()

    def heard(self, opening: Any) -> None:
        """Learn what the other end can do from the headers of its opening message (``open`` or
        ``ready``): whether it answers where a file starts, which digests it knows."""
        headers = opening if isinstance(opening, dict) else {}
        self.peer_resumes = bool(headers.get("res"))
        self.peer_hashes = digests.offered(headers.get("hashes"))

    async def open(self) -> str:
        self._channel = await self.connection.channel(publisher_confirms=False)
        self._queue = await self._channel.declare_queue("", exclusive=True, auto_delete=True)
        self.queue_name = self._queue.name
        self._tag = await self._queue.consume(self._on_message, no_ack=True)
        return self.queue_name

    async def _on_message(self, message: Any) -> None:
        headers = message.headers or {}
        if headers.get("tok") != self.token:
            return  # not this transfer's: dropped
        self._inbox.put_nowait(message)

    async def send(self, kind: str, body: bytes = b"", /, **headers: Any) -> None:
        import aio_pika

        if not self.peer:
            raise TransferError("the other end's queue is not known yet", link=True)
        message = aio_pika.Message(body, headers=protocol.headers({"t": kind, "tok": self.token, **headers}),
                                   reply_to=self.queue_name,
                                   delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT)
        try:
            # Not mandatory: a message to a queue that is gone is dropped (the other end's silence
            # ends the transfer), not returned to a channel that has no use for it. Bounded by the
            # stall: a robust connection's channel waits out a reconnection (to another broker,
            # where the other end's queue is not) rather than fail.
            # (asyncio.timeout, not wait_for: no task per message.)
            async with asyncio.timeout(self.stall):
                await self._channel.default_exchange.publish(message, routing_key=self.peer, mandatory=False)
        except TimeoutError:
            raise TransferError(f"could not send for {self.stall:g} s: the broker connection is gone", link=True) from None
        except Exception as exc:  # the channel or connection is gone
            raise TransferError(f"lost the broker connection while sending: {exc!r}", link=True) from None

    async def next(self, timeout: float | None = None) -> Any:
        """The next message from the other end; TransferError(link) after ``stall`` seconds of
        silence, or once ``abort`` was called."""
        try:
            if not self._inbox.empty():  # (the common case while chunks stream in: no timer at all)
                message = self._inbox.get_nowait()
            else:
                async with asyncio.timeout(self.stall if timeout is None else timeout):
                    message = await self._inbox.get()
        except TimeoutError:
            raise TransferError(f"no word from the other end for {self.stall:g} s", link=True) from None
        if isinstance(message, TransferError):
            raise message
        return message

    def abort(self, reason: str) -> None:
        """End the transfer from this side now (its job is being stopped): the next wait fails."""
        self._inbox.put_nowait(TransferError(reason, link=True, resumable=False))

    def pending(self) -> Any | None:
        try:
            message = self._inbox.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if isinstance(message, TransferError):
            raise message
        return message

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is None:
            return
        try:
            if self._tag is not None and self._queue is not None:
                await self._queue.cancel(self._tag)
            await channel.close()
        except Exception:  # the connection went: the queue went with it
            pass

    async def __aenter__(self) -> Endpoint:
        await self.open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def error_of(message: Any) -> TransferError:
    h = message.headers or {}
    return TransferError(str(h.get("reason") or "the other end gave up"), link=bool(h.get("link")),
                         path=str(h.get("path") or ""), errno=int(h.get("errno") or 0))


async def send_error(ep: Endpoint, error: TransferError) -> None:
    """Tell the other end why this end gives up (best effort: the link may be what failed)."""
    try:
        await ep.send("error", reason=error.reason[:2000], link=error.link, path=error.path[:1000], errno=error.errno)
    except TransferError:
        pass


async def send_files(ep: Endpoint, entries: Iterable[Entry], *, chunk_size: int = CHUNK_SIZE, window: int = WINDOW,
                     opener: Callable[[str], int] | None = None, resume: bool | None = None,
                     direct_min: int = directio.DIRECT_IO_MIN) -> Stats:
    """Send ``entries`` to ``ep.peer``; returns once the receiver has verified every file.

    ``opener(path)`` opens a file for reading and returns its descriptor (default: plain
    ``os.open``); the starter's opener refuses symbolic links. An OSError reading a file is sent
    to the receiver and raised as a TransferError naming the file. ``window``: the credit taken
    before the receiver grants any (and beyond each acknowledgement of a receiver that grants
    none). ``resume``: ask the receiver where each chunked file starts (default: whether its
    opening message said it answers, ``ep.peer_resumes``). A file of ``direct_min`` bytes or more
    is read from the page cache where it is there and around it where it is not (directio; 0:
    never)."""
    stats = Stats()
    seq = 0
    acked = 0
    credit = window  # the last message this end may send until the receiver grants more
    asks = ep.peer_resumes if resume is None else resume
    algorithm = digests.choose(ep.peer_hashes)
    naming = {} if algorithm == digests.SHA256 else {"hash": algorithm}  # (sha256 goes unnamed: older peers)
    answers: dict[int, Any] = {}  # the receiver's ``at``, by the number of the ``file`` it answers
    loop = asyncio.get_running_loop()

    def take(message: Any) -> None:
        nonlocal acked, credit
        h = message.headers or {}
        kind = h.get("t")
        if kind == "ack":
            acked = max(acked, int(h.get("seq") or 0))
            granted = h.get("credit")
            credit = max(credit, int(granted) if granted is not None else acked + window)
        elif kind == "at":
            answers[int(h.get("seq") or 0)] = h
        elif kind == "error":
            raise error_of(message)

    async def put(kind: str, body: bytes = b"", /, **headers: Any) -> None:
        nonlocal seq
        while (m := ep.pending()) is not None:
            take(m)
        while seq >= credit:  # no credit left: wait for the receiver
            take(await ep.next())
        seq += 1
        await ep.send(kind, body, seq=seq, **headers)

    def failed(exc: OSError, path: str) -> TransferError:
        return TransferError(f"reading from file {path}: (errno {exc.errno}) {exc.strerror}", path=path,
                             errno=exc.errno or 0)

    open_fd = opener or (lambda p: os.open(p, os.O_RDONLY | os.O_CLOEXEC))
    for entry in entries:
        if entry.path is None:
            await put("dir", name=entry.name, mode=entry.mode)
            continue
        try:
            fd = open_fd(entry.path)
        except OSError as exc:
            error = failed(exc, entry.path)
            await send_error(ep, error)
            raise error from None
        with os.fdopen(fd, "rb", buffering=0) as fh:
            before = os.fstat(fh.fileno())
            size = before.st_size
            if size < chunk_size:  # a small file is one message: name, data and digest together
                try:
                    data = _read_all(fh, entry.path, size)
                    check_unchanged(fh.fileno(), before, len(data), entry.path)
                except TransferError as refused:
                    await send_error(ep, refused)
                    raise
                await put("whole", data, name=entry.name, size=len(data), mode=entry.mode & 0o7777, **naming,
                          **{algorithm: digests.of(data, algorithm)})
                stats.files += 1
                stats.bytes += len(data)
                continue
            digest = digests.new(algorithm)
            start = 0
            if asks:
                await put("file", name=entry.name, size=size, mode=entry.mode & 0o7777, mtime=before.st_mtime_ns,
                          res=True, **naming)
                asked = seq
                while asked not in answers:
                    take(await ep.next())
                at = answers.pop(asked)
                offset = int(at.get("offset") or 0)
                if 0 < offset <= size:
                    try:  # the part the receiver holds must be this file's: its digest says so
                        same = await loop.run_in_executor(None, _hash_prefix, fh, digest, offset) == at.get(algorithm)
                    except OSError as exc:
                        error = failed(exc, entry.path)
                        await send_error(ep, error)
                        raise error from None
                    if same:
                        start = offset
                    else:
                        digest = digests.new(algorithm)
                        fh.seek(0)
                stats.skipped += start
            else:
                await put("file", name=entry.name, size=size, mode=entry.mode & 0o7777, **naming)
            sent = start
            left = [size - start]  # never more than announced: a file that grew is refused below
            # A big file is read from the page cache where it is there, else around it (directio).
            reader = directio.Reader(fh.fileno(), chunk_size, size) if directio.big(size, direct_min) else None

            def read_and_hash(fh: Any = fh, digest: Any = digest, left: list[int] = left, size: int = size,
                              reader: directio.Reader | None = reader) -> bytes:
                want = min(chunk_size, left[0])
                if want <= 0:
                    return b""
                data = reader.read(size - left[0], want) if reader is not None else fh.read(want)
                left[0] -= len(data)
                digest.update(data)  # (the read, and sha256's hashlib, let the loop go on meanwhile)
                return data

            # Pipelined: the next chunk is read and hashed on a thread while this one is sent.
            reading = loop.run_in_executor(None, read_and_hash)
            first = asks  # the first data message says where it starts
            while True:
                try:
                    data = await reading
                except OSError as exc:
                    error = failed(exc, entry.path)
                    await send_error(ep, error)
                    raise error from None
                if not data:
                    break
                reading = loop.run_in_executor(None, read_and_hash)
                try:
                    if first:
                        await put("data", data, off=sent)
                        first = False
                    else:
                        await put("data", data)
                except BaseException:
                    await asyncio.wait([reading])  # (the file is closed below: no read on it after)
                    raise
                sent += len(data)
                stats.sent += len(data)
            if reader is not None:
                reader.close()  # (no read under way: the last one answered the end of the file)
            try:
                check_unchanged(fh.fileno(), before, sent, entry.path)
            except TransferError as refused:
                await send_error(ep, refused)
                raise
            await put("eof", size=sent, **{algorithm: digest.hexdigest()})
        stats.files += 1
        stats.bytes += sent
    await put("end", files=stats.files, bytes=stats.bytes)
    while True:  # the receiver's verdict
        message = await ep.next()
        if (message.headers or {}).get("t") == "done":
            break
        take(message)
    stats.finished = time.time()
    return stats


def _hash_prefix(fh: Any, digest: Any, size: int) -> str:
    """Feed the first ``size`` bytes of ``fh`` to ``digest`` (leaving ``fh`` there); their digest."""
    fh.seek(0)
    left = size
    while left > 0:
        data = fh.read(min(CHUNK_SIZE, left))
        if not data:
            return ""  # shorter than that now: it cannot be the same
        digest.update(data)
        left -= len(data)
    return digest.copy().hexdigest()


async def receive_files(ep: Endpoint, sink: Sink, *, window: int = WINDOW) -> Stats:
    """Receive one transfer into ``sink``; returns once every file is committed and the sender
    told so. The sender's queue is learnt from the first message's ``reply_to``, unless known.
    The sender may have ``window`` messages beyond the last one written (its credit). A sink with
    ``resume`` and ``keep`` (ResumingSink) keeps a file cut by a link failure and offers it to
    the next attempt."""
    stats = Stats()
    expected = 1
    fh: BinaryIO | None = None
    name = ""
    size = 0
    got = 0
    source = (0, 0)  # the sender's size and mtime of the file being received
    digest: Any = None
    algorithm = digests.SHA256  # the digest the file being received is checked by
    every = max(1, window // 4)
    written = 0  # the last message whose bytes are written
    granted = 0  # the last acknowledgement sent
    loop = asyncio.get_running_loop()
    writing: asyncio.Future | None = None  # the chunk being hashed and written on a thread
    resuming = callable(getattr(sink, "resume", None)) and callable(getattr(sink, "keep", None))

    def write_and_hash(fh: BinaryIO, body: bytes, digest: Any, name: str) -> None:
        digest.update(body)
        _write(fh, body, name)

    async def written_all() -> None:
        nonlocal writing
        if writing is not None:
            pending, writing = writing, None
            await pending

    async def grant(upto: int) -> None:
        nonlocal granted
        granted = upto
        await ep.send("ack", seq=upto, credit=upto + window)
    try:
        while True:
            message = await ep.next()
            h = message.headers or {}
            if not ep.peer and message.reply_to:
                ep.peer = message.reply_to
            kind = h.get("t")
            if kind == "error":
                raise error_of(message)
            seq = int(h.get("seq") or 0)
            if seq != expected:
                raise TransferError(f"message {seq} arrived where {expected} was due", link=True)
            expected += 1
            if kind == "data":
                if fh is None:
                    raise TransferError("data arrived outside a file", link=True)
                body = message.body
                off = h.get("off")
                await written_all()
                if off is not None and int(off) != got:
                    if int(off) != 0:
                        raise TransferError(f"{name}: data from byte {off} where {got} were received", link=True)
                    stats.skipped -= got
                    got, digest = 0, digests.new(algorithm)  # the sender starts again: its file is not the part kept
                    fh.seek(0)
                    fh.truncate(0)
                got += len(body)
                if got > size:
                    raise TransferError(f"{name}: more data than the announced {size} bytes", link=True)
                # Pipelined: this chunk is hashed and written on a thread while the next arrives;
                # the credit granted counts the chunks written (a slow disk slows the sender).
                written = seq - 1
                writing = loop.run_in_executor(None, write_and_hash, fh, body, digest, name)
            elif kind == "file":
                name, size = str(h.get("name") or ""), int(h.get("size") or 0)
                if not safe_name(name):
                    raise TransferError(f"refusing the file name {name!r}: it would leave the sandbox", path=name)
                mode = int(h.get("mode") or 0o644)
                source = (size, int(h.get("mtime") or 0))
                algorithm = _algorithm(h, name)
                kept = sink.resume(name, source, mode) if resuming and h.get("res") else None  # type: ignore[attr-defined]
                if kept is not None and digests.name_of(kept[2]) != algorithm:
                    sink.abort(name, kept[0])  # hashed by another digest than this attempt's: start anew
                    kept = None
                if kept is not None:
                    fh, got, digest = kept
                    stats.skipped += got
                else:
                    fh, got, digest = _open(sink, name, size, mode), 0, digests.new(algorithm)
                if h.get("res"):
                    await ep.send("at", seq=seq, offset=got, **{algorithm: digest.copy().hexdigest() if got else ""})
                written = seq
            elif kind == "whole":
                name, size = str(h.get("name") or ""), int(h.get("size") or 0)
                if not safe_name(name):
                    raise TransferError(f"refusing the file name {name!r}: it would leave the sandbox", path=name)
                body = message.body
                algorithm = _algorithm(h, name)
                if len(body) != size or h.get(algorithm) != digests.of(body, algorithm):
                    raise TransferError(f"{name}: received {len(body)} of {size} bytes, or a wrong {algorithm}", link=True)
                fh = _open(sink, name, size, int(h.get("mode") or 0o644))
                _write(fh, body, name)
                opened, fh = fh, None
                _commit(sink, name, opened)
                stats.files += 1
                stats.bytes += size
                written = seq
            elif kind == "eof":
                if fh is None:
                    raise TransferError("end of file outside a file", link=True)
                await written_all()
                if got != size or h.get(algorithm) != digest.hexdigest():
                    raise TransferError(f"{name}: received {got} of {size} bytes, or a wrong {algorithm}", link=True)
                opened, fh = fh, None
                _commit(sink, name, opened)
                stats.files += 1
                stats.bytes += got
                written = seq
            elif kind == "dir":
                dname = str(h.get("name") or "")
                if not safe_name(dname):
                    raise TransferError(f"refusing the directory name {dname!r}: it would leave the sandbox", path=dname)
                try:
                    sink.directory(dname, int(h.get("mode") or 0o755))
                except OSError as exc:
                    raise TransferError(f"making directory {dname}: (errno {exc.errno}) {exc.strerror}",
                                        path=dname, errno=exc.errno or 0) from None
                written = seq
            elif kind == "end":
                await grant(seq)
                await ep.send("done", files=stats.files, bytes=stats.bytes)
                stats.finished = time.time()
                return stats
            else:
                raise TransferError(f"unknown message {kind!r}", link=True)
            if kind == "eof" or written - granted >= every:
                await grant(written)
    except BaseException as error:
        intact = True  # every byte counted in ``got`` is in the file
        if writing is not None:  # (no write on the file once it is closed)
            await asyncio.wait([writing])
            intact = not writing.cancelled() and writing.exception() is None
        if fh is not None:
            if resuming and isinstance(error, TransferError) and error.resumable and intact and 0 < got <= size:
                sink.keep(name, fh, source, got, digest)  # type: ignore[attr-defined]
            else:
                sink.abort(name, fh)
        if not isinstance(error, TransferError):
            raise
        if ep.peer and not error.reason.startswith("no word"):
            await send_error(ep, error)
        raise


def check_unchanged(fd: int, before: os.stat_result, sent: int, path: str) -> None:
    """Raise TransferError, with HTCondor's sentence (put_file's), if the file read from ``fd``
    changed while it was being sent: its size or mtime now, or the bytes read, differ from
    ``before``. (The owner's files are never sent torn: the job is held, its owner told.)"""
    try:
        now = os.fstat(fd)
    except OSError as exc:
        raise TransferError(f"reading from file {path}: (errno {exc.errno}) {exc.strerror}", path=path,
                            errno=exc.errno or 0) from None
    if sent != before.st_size or (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise TransferError(f"reading from file {path}: ReliSock: put_file: only sent {sent} bytes out of "
                            f"{now.st_size} (the file changed while it was being sent)", path=path)


def _algorithm(headers: Any, name: str) -> str:
    """The digest a ``file`` or ``whole`` message names (``hash``; none: sha256), if this end knows it."""
    algorithm = str(headers.get("hash") or digests.SHA256)
    if algorithm not in digests.KNOWN:
        raise TransferError(f"{name}: checked by the digest {algorithm!r}, which this end does not know", link=True)
    return algorithm


def _read_all(fh: Any, path: str, size: int) -> bytes:
    try:
        return fh.read(size + 1)  # one byte more: a file that grew meanwhile goes in chunks
    except OSError as exc:
        raise TransferError(f"reading from file {path}: (errno {exc.errno}) {exc.strerror}", path=path,
                            errno=exc.errno or 0) from None


def _open(sink: Sink, name: str, size: int, mode: int) -> BinaryIO:
    try:
        return sink.open(name, size, mode)
    except OSError as exc:
        raise TransferError(f"writing to file {name}: (errno {exc.errno}) {exc.strerror}", path=name,
                            errno=exc.errno or 0) from None


def _write(fh: BinaryIO, body: bytes, name: str) -> None:
    try:
        fh.write(body)
    except OSError as exc:
        raise TransferError(f"writing to file {name}: (errno {exc.errno}) {exc.strerror}", path=name,
                            errno=exc.errno or 0) from None


def _commit(sink: Sink, name: str, fh: BinaryIO) -> None:
    try:
        sink.commit(name, fh)
    except OSError as exc:
        raise TransferError(f"writing to file {name}: (errno {exc.errno}) {exc.strerror}", path=name,
                            errno=exc.errno or 0) from None


PARTIAL_SUFFIX = ".gridbus-partial"


def _open_for_writing(path: str, flags: int, size: int, direct_min: int) -> BinaryIO:
    """A received file of ``size`` bytes, opened around the page cache if it is ``direct_min``
    bytes or more and its file system lets it (directio), else as usual (unbuffered)."""
    if directio.big(size, direct_min):
        direct = directio.open_direct(path, flags, 0o600, CHUNK_SIZE)
        if direct is not None:
            return cast(BinaryIO, direct)  # (it has what a sink's file is asked: write, seek, truncate, close)
    return os.fdopen(os.open(path, flags, 0o600), "wb", buffering=0)


def partial_tag(pid: int) -> str:
    """How the temporary names written by process ``pid`` begin their tag."""
    return f"{pid}x"


def sweep_partials(directories: Iterable[str], pid: int) -> int:
    """Remove the temporary files that process ``pid`` (gone: killed mid-write) left in
    ``directories``; answers how many. Only regular files named as its DirectorySink names them."""
    marker = "." + partial_tag(pid)
    removed = 0
    for d in directories:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.startswith(".") and name.endswith(PARTIAL_SUFFIX) and marker in name:
                try:
                    path = os.path.join(d, name)
                    if os.path.isfile(path) and not os.path.islink(path):
                        os.unlink(path)
                        removed += 1
                except OSError:
                    pass
    return removed


@dataclass
class Partial:
    """The written part of a file a cut transfer left: where, of which source file (its size and
    mtime as the sender told them), how many bytes, their digest's state, since when."""

    path: str
    source: tuple[int, int]
    offset: int
    digest: Any
    when: float


class Partials:
    """The parts of files that cut transfers left, kept for the next attempt of the same job, by
    (key, name). In memory: a process that dies takes them with it (its files are then swept by
    its pid, ``sweep_partials``). Bounded: ``most`` of them, each ``keep_for`` seconds; a part
    dropped is removed."""

    def __init__(self, keep_for: float = PARTIAL_KEEP, most: int = PARTIALS_KEPT):
        self.keep_for = keep_for
        self.most = most
        self._kept: dict[tuple[str, str], Partial] = {}

    def put(self, key: str, name: str, partial: Partial) -> None:
        self.expire()
        old = self._kept.pop((key, name), None)
        if old is not None and old.path != partial.path:
            _unlink(old.path)
        self._kept[(key, name)] = partial
        while len(self._kept) > self.most:
            _unlink(self._kept.pop(next(iter(self._kept))).path)

    def take(self, key: str, name: str) -> Partial | None:
        self.expire()
        return self._kept.pop((key, name), None)

    def held(self, key: str) -> list[str]:
        """The paths of the parts kept under ``key``."""
        return [p.path for (k, _), p in self._kept.items() if k == key]

    def expire(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for k in [k for k, p in self._kept.items() if now - p.when > self.keep_for]:
            _unlink(self._kept.pop(k).path)

    def clear(self) -> None:
        """Remove every part kept (the process is stopping)."""
        for partial in self._kept.values():
            _unlink(partial.path)
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)


PARTIALS = Partials()  # this process's kept parts


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class DirectorySink:
    """Files put where ``place(name)`` says, written to a temporary name beside it and renamed
    into place once verified (a failed transfer leaves no file that looks whole); made files and
    directories are given to ``chown`` (uid, gid) when set (a root starter writing for the job's
    account). Never follows a symbolic link at the final component.

    With a ``key`` (the job and direction: the same for every attempt of one job's transfer) the
    part of a file a cut link left is kept, under its temporary name, in ``partials`` and offered
    to the next attempt with the same key (``resume``). A file of ``direct_min`` bytes or more is
    written around the page cache (directio; 0: never)."""

    def __init__(self, place: Callable[[str], str], chown: tuple[int, int] | None = None, *, key: str = "",
                 partials: Partials | None = None, direct_min: int = directio.DIRECT_IO_MIN):
        self.place = place
        self.direct_min = direct_min
        self.chown = chown
        self.key = key
        self.partials = PARTIALS if partials is None else partials
        self._temps: dict[str, str] = {}
        # Two transfers may write the same name at once (jobs of one cluster with one Iwd): each
        # has temporary names of its own; the last rename wins, as the last writer would. The
        # writer's pid leads the tag: a killed owner's shadow's leftovers are found by it (sweep).
        self._tag = partial_tag(os.getpid()) + secrets.token_hex(4)

    def directory(self, name: str, mode: int) -> None:
        path = self.place(name)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if not os.path.isdir(path) or os.path.islink(path):
                raise
        else:
            if self.chown:
                os.chown(path, *self.chown)
        os.chmod(path, (mode & 0o777) | 0o700, follow_symlinks=False)

    def open(self, name: str, size: int, mode: int) -> BinaryIO:
        final = self.place(name)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        temp = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.{self._tag}{PARTIAL_SUFFIX}")
        fh = _open_for_writing(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, size,
                               self.direct_min)
        if self.chown:
            os.fchown(fh.fileno(), *self.chown)
        os.fchmod(fh.fileno(), (mode & 0o777) | 0o600)
        self._temps[name] = temp
        return fh

    def commit(self, name: str, fh: BinaryIO) -> None:
        fh.close()
        temp = self._temps.pop(name)
        os.replace(temp, self.place(name))

    def abort(self, name: str, fh: BinaryIO) -> None:
        fh.close()
        temp = self._temps.pop(name, None)
        if temp:
            try:
                os.unlink(temp)
            except OSError:
                pass

    def resume(self, name: str, source: tuple[int, int], mode: int) -> tuple[BinaryIO, int, Any] | None:
        """The part of ``name`` a cut attempt with this key left, if it is of the same source
        file (size and mtime): open at its end, with its length and digest's state; else None
        (a part of another source is removed)."""
        if not self.key:
            return None
        partial = self.partials.take(self.key, name)
        if partial is None:
            return None
        if partial.source != source or os.path.dirname(partial.path) != os.path.dirname(self.place(name)):
            _unlink(partial.path)
            return None
        try:
            fh = _open_for_writing(partial.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, source[0], self.direct_min)
        except OSError:
            _unlink(partial.path)
            return None
        try:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size < partial.offset:
                raise OSError(0, "the kept part is not what was written")
            fh.truncate(partial.offset)
            fh.seek(partial.offset)
            os.fchmod(fh.fileno(), (mode & 0o777) | 0o600)
        except OSError:
            fh.close()
            _unlink(partial.path)
            return None
        self._temps[name] = partial.path
        return fh, partial.offset, partial.digest

    def keep(self, name: str, fh: BinaryIO, source: tuple[int, int], offset: int, digest: Any) -> None:
        """A cut link: keep what was written of ``name`` for the next attempt (without a key: abort)."""
        if not self.key:
            self.abort(name, fh)
            return
        fh.close()
        temp = self._temps.pop(name, None)
        if temp:
            self.partials.put(self.key, name, Partial(temp, source, offset, digest, time.monotonic()))
