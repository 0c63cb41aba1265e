"""The owner's shadow: the process that touches a user's files for the schedd, as that user.

Started by ``owner_shadow.py`` under the owner's Unix account and fed over a pipe: one JSON
request a line on stdin, one JSON answer a line on stdout, in order. It is run as
``python -I -c <this file>`` (the owner need not read the schedd's configuration) and knows
nothing the schedd knows but what the requests say.

Requests: ``{"op": "read", "path", "start", "end", "max"}`` answers ``{"ok": true, "data"}``;
``{"op": "append", "path", "text"}`` answers ``{"ok": true}``; ``{"op": "whoami"}`` answers the
uid. A failure answers ``{"ok": false, "errno", "error"}``: the operating system's word, as the
owner.

File transfer (gridbus/transfer): ``{"op": "connect", "url", "urls", "paths"}`` makes the shadow
connect to the first broker of ``urls`` (or ``url``) that answers (the URL, with the credentials, comes over the pipe and is kept in memory only; the
process makes itself non-dumpable first, so the owner cannot read it out of its memory either)
and answers its own exclusive queue; for amqps the request carries the CA, client certificate and
key as text, used from memory; ``{"op": "expect", "token", "direction", "spec"}`` lets
one transfer of one job in (``in``: this shadow sends the job's input; ``out``: it receives the
output and writes it where the job's ad says); ``{"op": "busy"}`` answers how many transfers are
under way or expected (the schedd does not stop a shadow that has some). A starter opens an expected transfer by sending
``open`` with the token to the shadow's queue; an unknown token is refused, and a token opens
once. Transfers run concurrently with the pipe's requests, on one event loop. The part of an
output a cut link left is kept (in memory, by the job's id) for the job's next attempt, which
resumes from it; a shadow that ends removes the parts it kept, and one that is killed has its
files swept by its successor (``sweep``).

Small sandboxes inline (gridbus/transfer/inline.py), many jobs a request: ``{"op": "inline_in",
"paths", "limit", "jobs": [{"id", "spec"}]}`` reads each job's input if it comes to at most
``limit`` bytes, answering per id ``{"files"}`` (data base64), ``{"big": true}`` or ``{"error",
"errno", "path"}``; ``{"op": "inline_out", "paths", "jobs": [{"id", "spec", "files"}]}`` writes
each job's output where its ad says, answering per id ``{"bytes"}`` or an error.
``{"op": "sweep", "pid", "dirs", "paths"}`` removes the temporary files a killed shadow (``pid``)
left in ``dirs`` (the schedd asks it of the shadow it starts in the killed one's place).
"""

import asyncio
import base64
import ctypes
import json
import os
import sys
import time
from typing import Any

EXPECT_SECONDS = 600  # an expected transfer nobody opened within this is forgotten
CONNECT_TIMEOUT = 10  # seconds a broker of the list has to answer before the next is tried
_transfers: dict[str, tuple[Any, ...]] = {}  # token -> (direction, spec, when): what the schedd let in
_bus: dict[str, Any] = {}  # "connection", "queue" once connected


def _read(req):
    path, start, end, most = req["path"], int(req["start"]), int(req["end"]), int(req["max"])
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if start < 0:
            first = max(0, size + start)
            last = size + end if end < 0 else size
        else:
            first = start
            last = end if end > 0 else size
        last = min(last, size, first + most)
        fh.seek(first)
        data = fh.read(max(0, last - first))
    return {"ok": True, "data": data.decode("utf-8", "replace")}


def _append(req):
    # O_APPEND: each write lands whole at the end, as the schedd's own writer did.
    fd = os.open(req["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = req["text"].encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return {"ok": True}


def _not_dumpable():
    """No core file and no ptrace by the owner: the broker credentials stay out of their reach."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _add_paths(req):
    """Make gridbus importable (the requests that need it say where it is), and malloc tuned for
    the transfers that follow (gridbus/allocator.py; it does so once)."""
    for path in req.get("paths") or []:
        if isinstance(path, str) and path not in sys.path:
            sys.path.append(path)
    try:
        from gridbus import allocator
    except ImportError:  # (the request that needs gridbus says so, with a sentence)
        return
    allocator.tune()


async def _connect(req):
    if _connected():
        return {"ok": True, "queue": _bus["queue"]}
    _add_paths(req)
    try:
        import aio_pika

        import gridbus.transfer.serve  # noqa: F401 - fails here, with a sentence, rather than mid-transfer
    except ImportError as exc:
        return {"ok": False, "errno": 0, "error": f"cannot load the transfer code as this user: {exc}"}
    extra = {"ssl_context": _tls_context(req["tls"])} if req.get("tls") else {}
    # The brokers in the URL list's order, from the one after the broker whose connection went
    # (failover, as every daemon): the first that answers is taken.
    urls = [u for u in req.get("urls") or [req["url"]] if isinstance(u, str)]
    first = (_bus.get("index", -1) + 1) % len(urls) if _bus.get("closed") else 0
    connection = None
    errors = []
    for i in [*range(first, len(urls)), *range(first)]:
        try:
            connection = await asyncio.wait_for(aio_pika.connect(
                urls[i], client_properties={"connection_name": req.get("name") or "shadow"}, **extra), CONNECT_TIMEOUT)
        except (OSError, TimeoutError, aio_pika.exceptions.AMQPError) as exc:
            errors.append(f"{urls[i].rsplit('@', 1)[-1]}: {exc!r}")  # (no credentials in the sentence)
            continue
        _bus["index"] = i
        break
    if connection is None:
        return {"ok": False, "errno": 0, "error": "no broker answered: " + "; ".join(errors)}
    channel = await connection.channel()
    queue = await channel.declare_queue("", exclusive=True, auto_delete=True)
    await queue.consume(_on_open, no_ack=True)
    _bus.update(connection=connection, queue=queue.name, channel=channel, closed=False)
    # (aio-pika's is_closed stays false when the broker closes the connection: its callbacks tell.)
    connection.close_callbacks.add(lambda *_: _bus.update(closed=True))
    return {"ok": True, "queue": queue.name}


def _connected():
    return _bus.get("connection") is not None and not _bus.get("closed")


def _tls_context(material):
    """amqps with the schedd's CA and client certificate, given as PEM text over the pipe: the
    certificate and key go through an anonymous in-memory file (memfd), never onto a disk."""
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=material.get("ca") or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if material.get("cert"):
        fd = os.memfd_create("gridbus-shadow-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, (material["cert"] + "\n" + (material.get("key") or "")).encode("ascii"))
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    if not material.get("verify", True):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def _on_open(message):
    headers = message.headers or {}
    token = headers.get("tok")
    if headers.get("t") != "open" or not isinstance(token, str) or not message.reply_to:
        return
    expected = _transfers.pop(token, None)
    expected = expected[:2] if expected else None
    task = asyncio.get_running_loop().create_task(_serve_transfer(token, expected, message.reply_to, headers))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


_tasks: set[asyncio.Task[Any]] = set()


async def _serve_transfer(token, expected, peer, opening=None):
    from gridbus.transfer import stream
    from gridbus.transfer.serve import serve

    ep = stream.Endpoint(_bus["connection"], token, stall=float((expected or (0, {}))[1].get("stall", stream.STALL_TIMEOUT)))
    try:
        await ep.open()
        ep.peer = peer
        ep.heard(opening)
        if expected is None:
            await stream.send_error(ep, stream.TransferError("the owner's shadow expects no transfer with this token", link=True))
            return
        await serve(ep, *expected)
    except Exception as exc:  # never the shadow's end: the other end gives up at its stall timeout
        sys.stderr.write(f"transfer {token[:8]}: {exc!r}\n")
    finally:
        await ep.close()


def _failed(error):
    return {"error": error.reason, "errno": error.errno, "path": error.path}


def _inline_in(req):
    """The inputs of many jobs, each read whole if small enough (one pipe round trip for all)."""
    _add_paths(req)
    from gridbus.transfer import inline, stream

    limit = int(req.get("limit") or 0)
    out = {}
    for job in req.get("jobs") or []:
        try:
            files = inline.read_input(job["spec"], limit)
        except stream.TransferError as error:
            out[str(job["id"])] = _failed(error)
            continue
        if files is None:
            out[str(job["id"])] = {"big": True}
        else:
            out[str(job["id"])] = {"files": [[n, m, None if d is None else base64.b64encode(d).decode("ascii")]
                                             for n, m, d in files]}
    return {"ok": True, "jobs": out}


def _inline_out(req):
    """The outputs of many jobs, each written where its ad says (as a stream's receiver would)."""
    _add_paths(req)
    from gridbus.transfer import inline, spec, stream

    out = {}
    for job in req.get("jobs") or []:
        ad = job["spec"]
        try:
            files = [[n, m, None if d is None else base64.b64decode(d)] for n, m, d in job.get("files") or []]
            sink = stream.DirectorySink(lambda name, ad=ad: spec.output_destination(ad, name))
            out[str(job["id"])] = {"bytes": inline.write_files(files, sink)}
        except stream.TransferError as error:
            out[str(job["id"])] = _failed(error)
        except (ValueError, TypeError) as exc:
            out[str(job["id"])] = {"error": f"a malformed inline sandbox: {exc}", "errno": 0, "path": ""}
    return {"ok": True, "jobs": out}


async def _handle(req):
    op = req.get("op")
    if op == "read":
        return _read(req)
    if op == "append":
        return _append(req)
    if op == "whoami":
        return {"ok": True, "uid": os.geteuid()}
    if op == "connect":
        return await _connect(req)
    if op == "expect":
        if req.get("direction") not in ("in", "out") or not isinstance(req.get("spec"), dict):
            return {"ok": False, "errno": 0, "error": "expect needs direction in or out and a spec"}
        if _bus.get("connection") is not None and not _connected():
            # The broker connection went (closed, broker restarted): the schedd connects us again.
            return {"ok": False, "errno": 0, "error": "the shadow's broker connection is closed", "connect": True}
        _transfers[str(req["token"])] = (req["direction"], req["spec"], time.monotonic())
        return {"ok": True}
    if op == "busy":  # transfers under way or expected: the schedd does not stop a busy shadow
        now = time.monotonic()
        for token, (_d, _s, when) in list(_transfers.items()):
            if now - when > EXPECT_SECONDS:
                del _transfers[token]
        return {"ok": True, "count": len(_tasks) + len(_transfers)}
    if op == "sweep":  # a killed predecessor's temporary files, in the directories it wrote to
        from gridbus.transfer import stream

        _add_paths(req)
        return {"ok": True, "removed": stream.sweep_partials([str(d) for d in req.get("dirs") or []], int(req["pid"]))}
    if op == "inline_in":
        return _inline_in(req)
    if op == "inline_out":
        return _inline_out(req)
    if op == "forget":
        _transfers.pop(str(req.get("token")), None)
        return {"ok": True}
    return {"ok": False, "errno": 0, "error": f"unknown request {op!r}"}


async def serve_async(reader, write):
    while True:
        line = await reader.readline()
        if not line:
            break
        try:
            answer = await _handle(json.loads(line))
        except OSError as exc:
            answer = {"ok": False, "errno": exc.errno or 0, "error": exc.strerror or str(exc)}
        except Exception as exc:  # a bad request must not end the shadow
            answer = {"ok": False, "errno": 0, "error": f"{type(exc).__name__}: {exc}"}
        try:
            write(json.dumps(answer) + "\n")
        except BrokenPipeError:  # the schedd is gone (killed): end as at the end of its requests
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (nothing left to flush)
            break
    if "gridbus.transfer.stream" in sys.modules:  # the parts of cut outputs kept for a next attempt
        sys.modules["gridbus.transfer.stream"].PARTIALS.clear()
    if _bus.get("connection") is not None:
        await _bus["connection"].close()


async def _main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def write(text):
        sys.stdout.write(text)
        sys.stdout.flush()

    await serve_async(reader, write)


if __name__ == "__main__":
    _not_dumpable()
    asyncio.run(_main())
