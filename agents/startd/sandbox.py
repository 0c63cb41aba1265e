"""The execute side of file transfer: a job's sandbox under EXECUTE, its input in, its output out.

For a job whose sandbox travels (ShouldTransferFiles YES, or IF_NEEDED from another
FILESYSTEM_DOMAIN) the startd, before the starter spawns it:

1. makes a scratch directory ``EXECUTE/dir_<pid>_t<n>``, owned by the job's account: the job's
   Iwd and cwd;
2. asks the job's schedd to open the transfer (``OpenTransfer``, on the claim that runs the job):
   the schedd lets the job's owner's shadow expect it and answers that shadow's queue and a token;
3. receives the input (gridbus/transfer/stream.py) into the scratch directory and runs the job
   there, with Cmd, In, Out and Err rewritten to files in it (gridbus/transfer/spec.py).

Small sandboxes (MAX_INLINE_TRANSFER_KB, the schedd's knob) need neither: the schedd puts the
input into the activation (``Sandbox``: ``Files``, written here into the scratch directory) and
says how big an output may come back inside the exit report (``OutputLimit``, the report's
``OutputSandbox``); gridbus/transfer/inline.py.

A self-checkpointing job that exits with its checkpoint code sends its checkpoint instead
(``checkpoint``, always streamed; agents/schedd/checkpoints.py); a later run's input brings it back.

When the job has exited (or was evicted, with ``when_to_transfer_output = ON_EXIT_OR_EVICT``)
the output goes back the same way before the exit is reported, and the scratch directory is
removed (kept while the job is held, if KEEP_SANDBOX_ON_HOLD says so).

Failures, as HTCondor reports them: an input file the owner's shadow cannot read holds the job with
code 13 (TransferInputError) and a reason naming the file; an output file that is missing or
cannot be written holds it with code 12 (TransferOutputError); a transfer that stops (a process
or a connection gone) sends the job back to Idle to run again. An exit is never reported as a
completion while its output is not all back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aio_pika.abc import AbstractRobustConnection

from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.accounts import Account, RunAsRefused
from gridbus.agents.startd.settings import StartdSettings
from gridbus.agents.startd.starter import Job, Starter, StartFailed
from gridbus.rpc import MethodResult
from gridbus.status import Status
from gridbus.transfer import OPEN_REFUSED, inline, spec, stream

log = logging.getLogger("gridbus.startd.sandbox")

HOLD_TRANSFER_OUTPUT = 12  # HTCondor's TransferOutputError
HOLD_TRANSFER_INPUT = 13  # HTCondor's TransferInputError
HOLD_FAILED_TO_CHECKPOINT = 36  # HTCondor's FailedToCheckpoint


class TransferLost(StartFailed):
    """The input transfer stopped (not the files' fault): the job goes back to Idle."""


@dataclass
class Sandbox:
    scratch: str
    account: Account
    before: dict[str, tuple[int, int]]  # the top-level files after the input arrived
    accounting: dict[str, Any]
    output_limit: int = 0  # bytes of output that may go back inside the exit report (the schedd's word)


# How the startd calls a daemon: (address, method, arguments, timeout) -> its answer.
DaemonCall = Callable[[str, str, dict[str, Any], float], Awaitable[MethodResult]]


class Sandboxes:
    """The sandboxes of one startd's jobs, by claim id. ``starter`` is None when the startd
    simulates its jobs (STARTD_SIMULATE_JOBS): nothing is transferred then. ``connection()`` is
    the startd's broker connection (each transfer opens a channel of its own on it), ``call`` its
    calls to the schedds (OpenTransfer)."""

    def __init__(self, starter: Starter | None, filesystem_domain: str, settings: StartdSettings,
                 connection: Callable[[], AbstractRobustConnection | None], call: DaemonCall):
        self.starter = starter
        self.filesystem_domain = filesystem_domain
        self.settings = settings  # replaced by a reconfig (TRANSFER_STALL_TIMEOUT and the others apply)
        self._connection = connection
        self._call = call
        self._seq = itertools.count(1)
        self._by_claim: dict[str, Sandbox] = {}
        self._closing: set[asyncio.Task] = set()  # endpoint closes under way
        self._returning: set[asyncio.Task] = set()  # output transfers under way
        self._open: dict[str, stream.Endpoint] = {}  # claim id -> its transfer under way
        # Scratch directories of cut input transfers holding a part of a file, kept for the job's
        # next attempt here: "<schedd>/<job id>/in" -> (directory, the account's uid, since when).
        self._kept: dict[str, tuple[str, int, float]] = {}
        # What activations brought (claim id, job id) -> their Sandbox entry, until the job starts;
        # bounded (an entry of a job withdrawn before its start is never taken).
        self._inline: dict[tuple[str, str], dict[str, Any]] = {}
        self._inline_bytes = 0
        # Bytes of the sandboxes moved since the start, in (input) and out (output), for the
        # startd's ad (the web console's transfer metrics).
        self.bytes_moved = {"in": 0, "out": 0}

    def statistics(self) -> dict[str, int]:
        """Transfers under way and bytes moved, as the startd advertises them (HTCondor's
        FileTransferUploadBytes / FileTransferDownloadBytes are the same counts)."""
        return {"TransfersInFlight": len(self._open), "TransferInputBytes": self.bytes_moved["in"],
                "TransferOutputBytes": self.bytes_moved["out"]}

    def wanted(self, job_ad: Mapping[str, Any]) -> bool:
        return self.starter is not None and spec.wants_transfer(job_ad, self.filesystem_domain)

    def holds(self, claim_id: str) -> bool:
        return claim_id in self._by_claim

    # ------------------------------------------------------------------ input
    def keep_inline(self, claim_id: str, entry: Mapping[str, Any]) -> None:
        """An activation's ``Sandbox`` (its inline input, the output allowed back inline), kept
        for the job's start (now, or later for a job queued ahead)."""
        box = entry.get("Sandbox")
        job_ad = entry.get("JobAd")
        if not isinstance(box, dict) or not isinstance(job_ad, dict):
            return
        key = (claim_id, _job_id(job_ad))
        self._drop_inline(key)
        self._inline[key] = box
        self._inline_bytes += _inline_size(box)
        while (self._inline_bytes > INLINE_KEPT_MAX or len(self._inline) > INLINE_KEPT_JOBS) and len(self._inline) > 1:
            self._drop_inline(next(iter(self._inline)))

    def _drop_inline(self, key: tuple[str, str]) -> dict[str, Any] | None:
        box = self._inline.pop(key, None)
        if box is not None:
            self._inline_bytes -= _inline_size(box)
        return box

    def inline_ready(self, claim_id: str, job_ad: Mapping[str, Any]) -> bool:
        """Whether the job's input came with its activation (`fill_inline` needs no await)."""
        return "Files" in self._inline.get((claim_id, _job_id(job_ad)), {})

    async def fetch_input(self, claim: sl.Claim, job_ad: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """Make the job's scratch directory and bring its input there; returns the ad to run and
        the directory. Raises StartFailed (held, 13) or TransferLost (back to Idle)."""
        if self.inline_ready(claim.id, job_ad):
            return self.fill_inline(claim, job_ad)
        box = self._drop_inline((claim.id, _job_id(job_ad))) or {}
        key = f"{claim.schedd}/{_job_id(job_ad)}/in"
        scratch, account = self._resumed_scratch(key, job_ad) or self._make_scratch(job_ad)
        started = time.time()
        with _removed_on_failure(scratch, claim, lambda: self._keep_scratch(key, scratch, account)):
            sink = stream.DirectorySink(lambda name: os.path.join(scratch, name), _chown(account), key=key,
                                       direct_min=self.settings.transfer_direct_io_min)
            stats = await self._transfer(claim, job_ad, "in", lambda ep: stream.receive_files(ep, sink))
        return self._filled(claim, job_ad, scratch, account, box, stats, started)

    def _keep_scratch(self, key: str, scratch: str, account: Account) -> bool:
        """A cut input transfer: keep its scratch directory for the job's next attempt here if a
        part of a file was kept in it (stream.PARTIALS); answers whether it is kept."""
        if not stream.PARTIALS.held(key):
            return False
        self._expire_kept()
        self._kept[key] = (scratch, account.uid, time.monotonic())
        while len(self._kept) > stream.PARTIALS_KEPT:
            _remove(self._kept.pop(next(iter(self._kept)))[0])
        return True

    def _resumed_scratch(self, key: str, job_ad: Mapping[str, Any]) -> tuple[str, Account] | None:
        """The scratch directory a cut input transfer of this job left (``_keep_scratch``), emptied
        but for the parts kept, for the input to resume into; None if there is none (or it is not
        the job's account's any more)."""
        self._expire_kept()
        kept = self._kept.pop(key, None)
        if kept is None or self.starter is None:
            return None
        scratch, uid, _when = kept
        try:
            account = self.starter.policy.account_for(_owner(job_ad))
        except RunAsRefused:
            account = None
        held = set(stream.PARTIALS.held(key))
        if account is None or account.uid != uid or not held:
            _remove(scratch)
            return None
        try:
            for entry in os.scandir(scratch):
                if entry.path in held:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    _remove(entry.path)
                else:
                    os.unlink(entry.path)
        except OSError:
            _remove(scratch)
            return None
        return scratch, account

    def _expire_kept(self) -> None:
        now = time.monotonic()
        for key in [k for k, (_s, _u, when) in self._kept.items() if now - when > stream.PARTIAL_KEEP]:
            _remove(self._kept.pop(key)[0])

    def drop_kept(self) -> None:
        """At the startd's stop: the scratch directories kept for resumption go."""
        for scratch, _uid, _when in self._kept.values():
            _remove(scratch)
        self._kept.clear()

    def fill_inline(self, claim: sl.Claim, job_ad: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """`fetch_input` for an input that came with the activation, at once: the claim's next
        job can be spawned without a turn of the loop. Raises StartFailed (held, 13)."""
        box = self._drop_inline((claim.id, _job_id(job_ad))) or {}
        scratch, account = self._make_scratch(job_ad)
        started = time.time()
        with _removed_on_failure(scratch, claim):
            stats = stream.Stats(files=len(box["Files"]) if isinstance(box.get("Files"), list) else 0)
            stats.bytes = inline.write_files(box.get("Files"),
                                             stream.DirectorySink(lambda name: os.path.join(scratch, name), _chown(account)))
        return self._filled(claim, job_ad, scratch, account, box, stats, started)

    def _make_scratch(self, job_ad: Mapping[str, Any]) -> tuple[str, Account]:
        if self.starter is None:
            raise StartFailed("this startd simulates its jobs: it transfers no files", HOLD_TRANSFER_INPUT)
        try:
            account = self.starter.policy.account_for(_owner(job_ad))
        except RunAsRefused as exc:
            raise StartFailed(exc.reason, exc.code) from None
        scratch = os.path.join(self.starter.execute, f"dir_{os.getpid()}_t{next(self._seq)}")
        try:
            os.mkdir(scratch, 0o700)
            if account.switch:
                os.chown(scratch, account.uid, account.gid)
        except OSError as exc:
            raise StartFailed(f"cannot make the scratch directory {scratch}: {exc.strerror}", HOLD_TRANSFER_INPUT,
                              exc.errno or 0) from None
        return scratch, account

    def _filled(self, claim: sl.Claim, job_ad: Mapping[str, Any], scratch: str, account: Account,
                box: Mapping[str, Any], stats: stream.Stats, started: float) -> tuple[dict[str, Any], str]:
        """The input is in: the sandbox is the claim's, and the job runs in it."""
        limit = box.get("OutputLimit")
        output_limit = limit if isinstance(limit, int) else 0
        self.bytes_moved["in"] += stats.bytes
        accounting = {"BytesSent": stats.bytes, "TransferInStarted": int(started), "TransferInFinished": int(time.time())}
        self._by_claim[claim.id] = Sandbox(scratch, account, spec.snapshot(scratch), accounting, output_limit)
        log.debug("job %s: %d input file(s), %d bytes%s, in %.3f s", _job_id(job_ad), stats.files, stats.bytes,
                  " inline" if "Files" in box else "", time.time() - started)
        if stats.skipped:
            log.info("job %s: input resumed, %d bytes kept from a cut transfer were not sent again", _job_id(job_ad),
                     stats.skipped)
        return spec.sandbox_ad(job_ad, scratch), scratch

    def forget(self, claim_id: str) -> None:
        """The job did not start after all: its sandbox goes (the starter removed the directory)."""
        self._by_claim.pop(claim_id, None)

    def discard(self, claim_id: str) -> None:
        """Nobody wants the job's output any more (its claim ended first): its sandbox goes."""
        box = self._by_claim.pop(claim_id, None)
        if box is not None:
            asyncio.get_running_loop().run_in_executor(None, _remove, box.scratch)

    # ------------------------------------------------------------------ output
    def return_output(self, claim: sl.Claim, job: Job, extra: dict[str, Any],
                      report: Callable[[dict[str, Any]], None]) -> None:
        """The job ended: send its output back (unless it was evicted with ON_EXIT, or held by
        the startd), or its checkpoint if it exited with its checkpoint code, then
        ``report(extra)`` with the accounting and any transfer failure. An output small enough
        to go inside the report (or none wanted) is reported now, without a task: the claim's
        next job starts at once. A checkpoint is always streamed (into the spool)."""
        box = self._by_claim.pop(claim.id)
        extra = {**extra, **box.accounting}
        if not extra.get("Checkpointed") and not _output_wanted(job.ad, extra):
            self._reported(box, extra, report)
            return
        if box.output_limit > 0 and not extra.get("Checkpointed"):
            started = time.time()
            try:
                files = inline.read_output(box.scratch, job.ad, box.before, box.output_limit)
            except stream.TransferError as exc:
                self._reported(box, _failed(claim, extra, exc), report)
                return
            except OSError as exc:  # (as a stream's failure of this kind: the job runs again)
                self._reported(box, _failed(claim, extra, stream.TransferError(repr(exc), link=True)), report)
                return
            if files is not None:  # small: it goes back inside the exit report
                size = sum(len(f[2]) for f in files if f[2] is not None)
                self.bytes_moved["out"] += size
                self._reported(box, {**extra, "OutputSandbox": files, "BytesRecvd": size,
                                     "TransferOutStarted": int(started), "TransferOutFinished": int(time.time())}, report)
                return
        task = asyncio.get_running_loop().create_task(self._return_output(claim, job.ad, box, extra, report))
        self._returning.add(task)  # referenced until done; a stopping startd waits for it (settle)
        task.add_done_callback(self._returning.discard)

    def _reported(self, box: Sandbox, extra: dict[str, Any], report: Callable[[dict[str, Any]], None]) -> None:
        """Report, then remove the sandbox off the loop (kept for a held job: KEEP_SANDBOX_ON_HOLD)."""
        report(extra)
        if not (extra.get("HoldReason") and self.settings.keep_sandbox_on_hold):
            asyncio.get_running_loop().run_in_executor(None, _remove, box.scratch)

    async def settle(self, timeout: float) -> None:
        """At the startd's stop: wait (at most ``timeout``) for the outputs on their way back,
        so that their jobs' exit reports are queued before the reports are flushed."""
        if self._returning:
            await asyncio.wait(list(self._returning), timeout=timeout)

    async def _return_output(self, claim: sl.Claim, ad: Mapping[str, Any], box: Sandbox, extra: dict[str, Any],
                             report: Callable[[dict[str, Any]], None]) -> None:
        """The streamed output (too big to go inline), or the checkpoint."""
        try:
            if extra.get("Checkpointed"):
                extra.update(await self._send_checkpoint(claim, ad, box))
            else:
                extra.update(await self._send_output(claim, ad, box))
        except stream.TransferError as exc:
            extra = _checkpoint_failed(claim, extra, exc) if extra.pop("Checkpointed", None) else _failed(claim, extra, exc)
        except Exception as exc:  # never a lost exit report
            log.exception("output transfer of job %s failed", _job_id(ad))
            extra.pop("Checkpointed", None)
            extra = {**extra, "Evicted": True, "EvictReason": f"output transfer failed: {exc!r}"}
        finally:
            report(extra)  # first: the output is back (or its failure known), the directory's removal need not delay it
            if not (extra.get("HoldReason") and self.settings.keep_sandbox_on_hold):
                await asyncio.get_running_loop().run_in_executor(None, _remove, box.scratch)

    async def _send_output(self, claim: sl.Claim, ad: Mapping[str, Any], box: Sandbox) -> dict[str, Any]:
        started = time.time()
        entries = spec.output_entries(box.scratch, ad, box.before)
        direct_min = self.settings.transfer_direct_io_min
        stats = await self._transfer(claim, ad, "out", lambda ep: stream.send_files(ep, entries, opener=spec.open_nofollow,
                                                                                    direct_min=direct_min))
        self.bytes_moved["out"] += stats.bytes
        log.info("job %s: %d output file(s), %d bytes, in %.2f s", _job_id(ad), stats.files, stats.bytes,
                 time.time() - started)
        return {"BytesRecvd": stats.bytes, "TransferOutStarted": int(started), "TransferOutFinished": int(time.time())}

    async def _send_checkpoint(self, claim: sl.Claim, ad: Mapping[str, Any], box: Sandbox) -> dict[str, Any]:
        """A self-checkpointing job's checkpoint to the schedd's spool (Direction ``checkpoint``),
        with the accounting of an output transfer (HTCondor counts it as one)."""
        started = time.time()
        entries = spec.checkpoint_entries(box.scratch, ad)
        direct_min = self.settings.transfer_direct_io_min
        stats = await self._transfer(claim, ad, "checkpoint", lambda ep: stream.send_files(
            ep, entries, opener=spec.open_nofollow, direct_min=direct_min))
        log.info("job %s: checkpoint of %d file(s), %d bytes, in %.2f s", _job_id(ad), stats.files, stats.bytes,
                 time.time() - started)
        return {"BytesRecvd": stats.bytes, "TransferOutStarted": int(started), "TransferOutFinished": int(time.time())}

    # ------------------------------------------------------------------ both
    async def _transfer(self, claim: sl.Claim, ad: Mapping[str, Any], direction: str,
                        run: Callable[[stream.Endpoint], Any]) -> Any:
        """Open the transfer with the schedd and the owner's shadow, then ``run`` it."""
        connection = self._connection()
        if connection is None:  # the startd is stopping: another startd may run the job
            raise stream.TransferError("the startd is not connected to the broker", link=True)
        # This end's queue is made while the schedd answers (the token is known before any
        # message can come: the other end learns of the queue only from the opening message).
        ep = stream.Endpoint(connection, "", stall=self.settings.transfer_stall)
        self._open[claim.id] = ep  # (abort ends it from now on)
        try:
            answer, opened = await asyncio.gather(self._call(claim.schedd, "OpenTransfer", {
                "ClaimId": claim.id, "ClusterId": ad.get("ClusterId"), "ProcId": ad.get("ProcId"),
                "Direction": direction,
            }, self.settings.transfer_open_timeout), ep.open(), return_exceptions=True)
            if isinstance(answer, BaseException) or isinstance(opened, BaseException):
                # No answer, or no queue: try again elsewhere.
                failed = answer if isinstance(answer, BaseException) else opened
                raise stream.TransferError(f"the transfer could not be opened: {failed!r}", link=True)
            if not answer.ok:
                # The schedd answers with a sentence (the owner's shadow could not start, ...).
                raise stream.TransferError(f"the schedd could not open the transfer: {answer.text}",
                                           link=answer.status != Status.USER + OPEN_REFUSED)
            ep.token, ep.peer = str(answer.outArgs.get("Token")), str(answer.outArgs.get("Queue"))
            if direction == "in":
                await ep.send("open", direction=direction, **stream.OPENING)  # (it answers where a file starts)
                ep.peer = ""  # the shadow's own queue for this transfer comes with its first message
            else:
                await ep.send("open", direction=direction)
                ready = await ep.next()
                if (ready.headers or {}).get("t") == "error":
                    raise stream.error_of(ready)
                ep.peer = ready.reply_to or ""
                ep.heard(ready.headers)
            return await run(ep)
        finally:
            if self._open.get(claim.id) is ep:
                del self._open[claim.id]
            self._close_later(ep)

    def abort(self, claim_id: str, reason: str) -> None:
        """The claim's job is being stopped or its claim ended: a transfer of it under way ends now
        (an input transfer would otherwise run to its end before the job could be stopped)."""
        ep = self._open.get(claim_id)
        if ep is not None:
            ep.abort(f"the transfer was stopped: {reason}")

    def _close_later(self, ep: stream.Endpoint) -> None:
        """Close the endpoint off the job's path: the transfer is over either way."""
        task = asyncio.get_running_loop().create_task(ep.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


def _chown(account: Account) -> tuple[int, int] | None:
    return (account.uid, account.gid) if account.switch else None


def _input_failed(claim: sl.Claim, exc: stream.TransferError) -> StartFailed:
    """The job could not start for its input: held (13) for a file's fault, back to Idle for a link's."""
    where = f"Transfer input files failure at execution point {claim.slot.name} while receiving files from the access point"
    if exc.link:
        return TransferLost(f"{where}: {exc.reason}", HOLD_TRANSFER_INPUT)
    return StartFailed(f"{where}: {exc.reason}", HOLD_TRANSFER_INPUT, exc.errno)


def _output_wanted(ad: Mapping[str, Any], extra: Mapping[str, Any]) -> bool:
    """Whether the run's output goes back: not for a job the startd held, nor for an eviction
    unless WhenToTransferOutput is ON_EXIT_OR_EVICT."""
    when = str(ad.get("WhenToTransferOutput") or "ON_EXIT").upper()
    return not extra.get("HoldReason") and (not extra.get("Evicted") or when == "ON_EXIT_OR_EVICT")


def _failed(claim: sl.Claim, extra: dict[str, Any], exc: stream.TransferError) -> dict[str, Any]:
    """The exit report of a run whose output could not go back: held (code 12) for a file's
    fault; for a link's, evicted (the run's result is not all back: it runs again, never completes)."""
    where = f"Transfer output files failure at execution point {claim.slot.name} while sending files to the access point"
    if exc.link:
        return extra if extra.get("Evicted") else {**extra, "Evicted": True, "EvictReason": f"{where}: {exc.reason}"}
    return {**extra, "HoldReason": f"{where}: {exc.reason}", "HoldReasonCode": HOLD_TRANSFER_OUTPUT,
            "HoldReasonSubCode": exc.errno}


def _checkpoint_failed(claim: sl.Claim, extra: dict[str, Any], exc: stream.TransferError) -> dict[str, Any]:
    """The exit report of a run whose checkpoint could not go to the spool: HTCondor's
    FailedToCheckpoint holds it (36); a cut link is an eviction: the job runs again, elsewhere,
    from its previous checkpoint."""
    where = f"Starter failed to upload checkpoint at execution point {claim.slot.name}: {exc.reason}"
    if exc.link:
        return {**extra, "Evicted": True, "EvictReason": where}
    return {**extra, "HoldReason": where, "HoldReasonCode": HOLD_FAILED_TO_CHECKPOINT, "HoldReasonSubCode": exc.errno}


INLINE_KEPT_MAX = 256 << 20  # bytes of inline input kept for jobs not started yet
INLINE_KEPT_JOBS = 10_000  # and jobs (an entry of a job withdrawn before its start is never taken)


def _inline_size(box: Mapping[str, Any]) -> int:
    files = box.get("Files")
    if not isinstance(files, list):
        return 0
    return sum(len(f[2]) for f in files if isinstance(f, list | tuple) and len(f) == 3 and isinstance(f[2], bytes))


def _remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _owner(ad: Mapping[str, Any]) -> str:
    owner = ad.get("Owner")
    return owner if isinstance(owner, str) else ""


def _job_id(ad: Mapping[str, Any]) -> str:
    return f"{ad.get('ClusterId')}.{ad.get('ProcId')}"


@contextlib.contextmanager
def _removed_on_failure(scratch: str, claim: sl.Claim, keep: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """The input goes into ``scratch``: on any failure the directory goes (unless, the link cut,
    ``keep()`` kept it for the job's next attempt), and a transfer's failure is the job's hold
    (StartFailed, 13) or its return to Idle (TransferLost)."""
    try:
        yield
    except stream.TransferError as exc:
        if not (exc.link and keep()):
            _remove(scratch)
        raise _input_failed(claim, exc) from None
    except BaseException:
        _remove(scratch)
        raise
