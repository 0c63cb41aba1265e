"""Spooling for remote submission (HTCondor's ``condor_submit -spool`` and ``condor_transfer_data``).

A client that will not stay (a laptop) submits its jobs held with HoldReasonCode 16
(SpoolingInput) and LeaveJobInQueue true, then sends each job's input sandbox to the schedd
(``SpoolInput``, in chunks, over the job's owner's own calls) and says it is done (``SpoolDone``).
The schedd keeps the files as its own, under ``SPOOL/<cluster>/<proc>/``, makes that directory the
job's Iwd (the submitter's is kept as SUBMIT_Iwd, Cmd as SUBMIT_Cmd, and so on) and releases the
job. Its transfers are then served by the schedd itself (never by the owner's shadow: these are the
schedd's files, not the owner's), its output lands in the spool, and the completed job stays in
the queue until the client fetches the output (``ListSpool``, ``RetrieveSpool``) and lets it go
(``RetrieveDone``): the job leaves for the history and its spool directory goes.

As HTCondor's schedd rewrites a spooled job's UserLog (SUBMIT_UserLog keeps the submitter's), the
job's events from SpoolDone on go to a log in its spool (the name is the log's base name), kept
there until the client retrieves it with the output and appends it to its own log; the schedd
writes it itself, as it serves these jobs' transfers (``owns_log``, the user-log writer's hook).

MAX_SPOOL_MB_PER_OWNER bounds what one owner's spooled input may take of the spool (0: no bound,
HTCondor's MAX_*_PER_OWNER style): a chunk that would go over is refused with a sentence saying
how much the owner's jobs use, and the job is held with HTCondor's HoldReasonCode 32
(MaxTransferInputSizeExceeded) instead of waiting for the rest of its input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aio_pika.abc import AbstractRobustConnection

from gridbus.agent import Call, method
from gridbus.agents.schedd.claims import Spawn
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobattrs import COMPLETED, HELD, HoldCode, parse_job_id
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.jobstate import JobState
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.users import Users
from gridbus.status import MethodError, Status, app_error, forbidden, invalid, unknown_object
from gridbus.transfer import spec, stream
from gridbus.transfer.serve import serve

log = logging.getLogger("gridbus.schedd.spooling")

HOLD_SPOOLING_INPUT = int(HoldCode.SPOOLING_INPUT)
HOLD_INPUT_TOO_BIG = 32  # HTCondor's HoldReasonCode MaxTransferInputSizeExceeded
CHUNK_MAX = 4 << 20  # bytes of one SpoolInput or RetrieveSpool call
SPOOLED = "SpooledInputFiles"  # the names the client spooled (its input), as HTCondor lists them


class Spooling:
    """SpoolInput, SpoolDone, ListSpool, RetrieveSpool, RetrieveDone, and the schedd's own side of a
    spooled job's transfers (``open_transfer``, for OpenTransfer in transfers.py)."""

    def __init__(self, address: str, queue: JobQueue, state: JobState, commits: Commits, users: Users,
                 settings: ScheddSettings, connection: Callable[[], AbstractRobustConnection | None], spawn: Spawn,
                 ads_changed: Callable[[], None]):
        self.address = address
        self.queue = queue
        self.state = state
        self.commits = commits
        self.users = users
        self.settings = settings
        self._connection = connection  # the schedd's broker connection, once it is up
        self._spawn = spawn
        self._ads_changed = ads_changed

    # ------------------------------------------------------------------ the sweep
    async def sweep_loop(self) -> None:
        """Every SPOOL_SWEEP_INTERVAL: remove the spool directories of jobs no longer in the queue
        (a spooled job removed before its output was retrieved, a self-checkpointing job's
        checkpoints once it has left)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.settings.spool_sweep_interval)
            try:
                # The directories are listed and removed in a worker thread; the queue is read here.
                # A self-checkpointing job's checkpoints (checkpoints.py) go the same way.
                for kind in ("jobs", "checkpoints"):
                    found = await loop.run_in_executor(None, _job_dirs, self._spool_root() / kind)
                    orphans = [path for (cluster, proc), path in found.items() if self.queue.proc(cluster, proc) is None]
                    if orphans:
                        await loop.run_in_executor(None, _remove_job_dirs, orphans)
            except Exception:
                log.exception("sweeping the spool failed")

    # ------------------------------------------------------------------ helpers
    def _spool_root(self) -> Path:
        return Path(self.settings.spool)

    def spool_dir(self, cluster: int, proc: int) -> Path:
        return self._spool_root() / "jobs" / str(cluster) / str(proc)

    def is_spooled(self, ad: dict[str, Any]) -> bool:
        return ad.get("SUBMIT_Iwd") is not None and str(ad.get("Iwd", "")).startswith(str(self._spool_root() / "jobs") + "/")

    def owns_log(self, path: str) -> bool:
        """Whether a user log is a spooled job's, in the schedd's spool: the schedd writes it itself
        (the owner's shadow may not reach the spool; these are the schedd's files)."""
        return os.path.normpath(path).startswith(str(self._spool_root() / "jobs") + "/")

    def _owner_usage(self, owner: str) -> int:
        """Bytes the spool directories of ``owner``'s jobs in the queue take (read in a worker)."""
        dirs = [self.spool_dir(c.id, pid) for c in list(self.queue.by_owner.get(owner, {}).values())
                for pid in list(c.procs)]
        return sum(_tree_size(d) for d in dirs)

    async def _check_quota(self, p: Proc, owner: str, job: str, name: str, adding: int) -> None:
        limit = self.settings.spool_quota_mb
        if limit <= 0:
            return
        used = await asyncio.get_running_loop().run_in_executor(None, self._owner_usage, owner)
        if used + adding <= limit << 20:
            return
        sentence = (f"SpoolInput: {name} of job {job} would bring the spool used by {owner}'s jobs to "
                    f"{(used + adding) / (1 << 20):.1f} MiB, over MAX_SPOOL_MB_PER_OWNER = {limit} MiB; "
                    "remove or retrieve jobs spooled before, or ask the administrator for more")
        self.queue.update(p, {"HoldReason": sentence.removeprefix("SpoolInput: "),
                              "HoldReasonCode": HOLD_INPUT_TOO_BIG, "HoldReasonSubCode": 0})
        await self._committed()
        raise app_error(2, sentence)

    def _own_job(self, call: Call, job: str, method_name: str) -> tuple[Proc, dict[str, Any]]:
        user = call.require_user()
        try:
            cid, pid = parse_job_id(job)
        except ValueError as exc:
            raise invalid(f"{method_name}: {exc}") from None
        if pid is None:
            raise invalid(f"{method_name}: {job!r} names a cluster; name one job ('cluster.proc')")
        p = self.queue.proc(cid, pid)
        if p is None:
            raise unknown_object(f"{method_name}: {self.address} has no job {cid}.{pid} in its queue")
        ad = self.queue.ad(p)
        if user != ad.get("Owner") and not self.users.is_super(user):
            raise forbidden(f"{method_name}: {user} may not touch the spool of job {cid}.{pid} (owner {ad.get('Owner')})")
        return p, ad

    @staticmethod
    def _name(name: str, method_name: str) -> str:
        if not stream.safe_name(name):
            raise invalid(f"{method_name}: {name[:80]!r} is not a relative name inside the job's spool")
        return name

    # ------------------------------------------------------------------ input
    @method("scheduler")
    async def SpoolInput(self, call: Call, Id: str, Name: str, Kind: str, Mode: int, Offset: int, Data: Any,
                         Last: bool) -> dict[str, Any]:
        p, ad = self._own_job(call, Id, "SpoolInput")
        if p.status != HELD or ad.get("HoldReasonCode") != HOLD_SPOOLING_INPUT:
            raise app_error(1, f"SpoolInput: job {Id} is not waiting for its input (held with code 16)")
        name = self._name(Name, "SpoolInput")
        path = self.spool_dir(p.cluster.id, p.id) / name
        loop = asyncio.get_running_loop()
        if Kind == "dir":
            await loop.run_in_executor(None, lambda: path.mkdir(parents=True, exist_ok=True))
            return {"Size": 0}
        if Kind != "file":
            raise invalid(f"SpoolInput: Kind must be file or dir, not {Kind[:20]!r}")
        if not isinstance(Data, bytes | bytearray) or len(Data) > CHUNK_MAX:
            raise invalid(f"SpoolInput: Data must be bytes, at most {CHUNK_MAX} of them")
        await self._check_quota(p, str(ad.get("Owner")), Id, name, len(Data) if Offset else len(Data) - _size(path))
        size = await loop.run_in_executor(None, _append_at, path, Offset, bytes(Data), Mode & 0o777 or 0o644)
        return {"Size": size}

    @method("scheduler")
    async def SpoolDone(self, call: Call, Id: str) -> dict[str, Any]:
        """The input is all there: the job runs from the spool and is released."""
        p, ad = self._own_job(call, Id, "SpoolDone")
        if p.status != HELD or ad.get("HoldReasonCode") != HOLD_SPOOLING_INPUT:
            raise app_error(1, f"SpoolDone: job {Id} is not waiting for its input (held with code 16)")
        where = self.spool_dir(p.cluster.id, p.id)
        where.mkdir(parents=True, exist_ok=True)
        names = sorted(os.listdir(where))
        attrs: dict[str, Any] = {
            "SUBMIT_Iwd": ad.get("Iwd"), "Iwd": str(where), "StageInFinish": int(time.time()), SPOOLED: ",".join(names),
            "TransferInput": ",".join(n for n in names if n != os.path.basename(str(ad.get("Cmd") or ""))),
            "LeaveJobInQueue": True,
        }
        cmd = str(ad.get("Cmd") or "")
        if ad.get("TransferExecutable") is not False and os.path.basename(cmd) in names:
            attrs.update(SUBMIT_Cmd=cmd, Cmd=str(where / os.path.basename(cmd)))
        for std in ("In", "Out", "Err", "UserLog"):
            value = ad.get(std)
            if isinstance(value, str) and value and value != os.devnull:
                # The job's streams and its log live in the spool; the client puts them back itself.
                attrs[f"SUBMIT_{std}"] = value if std != "UserLog" else os.path.join(str(ad.get("Iwd") or ""), value)
                attrs[std] = os.path.basename(value)
        self.queue.update(p, attrs)
        self.state.release_job(p, "Input data spooled", time.time())
        await self._committed()
        return {"Files": len(names)}

    async def _committed(self) -> None:
        await self.commits.now()  # answered once on disk, as a job action is
        self._ads_changed()

    # ------------------------------------------------------------------ output
    @method("scheduler")
    async def ListSpool(self, call: Call, Id: str) -> dict[str, Any]:
        """The job's output in the spool: [{Name, Kind, Size, Mode}], inputs left out."""
        p, ad = self._own_job(call, Id, "ListSpool")
        root = self.spool_dir(p.cluster.id, p.id)
        inputs = set(spec.split_files(str(ad.get(SPOOLED) or "")))
        files = await asyncio.get_running_loop().run_in_executor(None, _listing, root, inputs)
        return {"Files": files}

    @method("scheduler")
    async def RetrieveSpool(self, call: Call, Id: str, Name: str, Offset: int, Max: int) -> dict[str, Any]:
        p, _ad = self._own_job(call, Id, "RetrieveSpool")
        name = self._name(Name, "RetrieveSpool")
        if Offset < 0 or Max < 1:
            raise invalid("RetrieveSpool: Offset must be 0 or more and Max at least 1")
        path = self.spool_dir(p.cluster.id, p.id) / name
        try:
            data = await asyncio.get_running_loop().run_in_executor(None, _read_at, path, Offset, min(Max, CHUNK_MAX))
        except OSError as exc:
            raise MethodError(Status.USER + 10, f"RetrieveSpool: {name}: {exc.strerror}") from None
        if _ad.get("StageOutStart") is None:
            self.queue.update(p, {"StageOutStart": int(time.time())})
            self.commits.soon()
        return {"Data": data}

    @method("scheduler")
    async def RetrieveDone(self, call: Call, Id: str) -> dict[str, Any]:
        """The client has the output: the completed job leaves the queue and its spool goes."""
        p, _ad = self._own_job(call, Id, "RetrieveDone")
        if p.status != COMPLETED:
            raise app_error(1, f"RetrieveDone: job {Id} has not completed")
        now = time.time()
        self.queue.update(p, {"StageOutFinish": int(now), "LeaveJobInQueue": False})
        self.queue.retire(p, when=now)
        await self._committed()
        root = self.spool_dir(p.cluster.id, p.id)
        await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, root, True)
        return {}

    # ------------------------------------------------------------------ transfers of spooled jobs
    async def open_transfer(self, ad: dict[str, Any], direction: str, token: str, stall: float) -> str:
        """Serve a spooled job's transfer from the schedd itself: its queue for the starter's
        ``open``; the transfer runs in the background. Output lands in the job's spool only."""
        connection = self._connection()
        if connection is None:
            raise MethodError(Status.EXCEPTION, "OpenTransfer: the schedd is not connected to the broker")
        ep = stream.Endpoint(connection, token, stall=stall)
        queue = await ep.open()
        root = str(ad.get("Iwd"))

        def place(name: str) -> str:
            return os.path.join(root, name if name not in (spec.STDOUT, spec.STDERR)
                                else os.path.basename(str(ad.get("Out" if name == spec.STDOUT else "Err"))))

        async def run() -> None:
            try:
                opened = await ep.next()
                if (opened.headers or {}).get("t") != "open" or not opened.reply_to:
                    return
                ep.peer = opened.reply_to
                ep.heard(opened.headers)
                await serve(ep, direction, {**ad, "TransferOutputRemaps": ""}, place)
            except stream.TransferError:
                pass
            finally:
                await ep.close()

        self._spawn(run(), f"spooled transfer of {ad.get('ClusterId')}.{ad.get('ProcId')}")
        return queue


def _append_at(path: Path, offset: int, data: bytes, mode: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        if offset != size and not (offset == 0 and size > 0):
            raise MethodError(Status.INVALID_PARAMETER,
                              f"SpoolInput: {path.name} holds {size} bytes; the next chunk starts there, not at {offset}")
        if offset == 0:
            os.ftruncate(fd, 0)
        os.lseek(fd, offset, os.SEEK_SET)
        while data:
            data = data[os.write(fd, data):]
        os.fchmod(fd, (mode & 0o777) | 0o600)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _tree_size(root: Path) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            total += _size(Path(dirpath) / name)
    return total


def _read_at(path: Path, offset: int, most: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.pread(fd, most, offset)
    finally:
        os.close(fd)


def _listing(root: Path, inputs: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not root.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        for name in sorted(dirnames) + sorted(filenames):
            full = os.path.join(dirpath, name)
            relname = name if rel == "." else f"{rel}/{name}"
            if relname.split("/")[0] in inputs or ".gridbus-partial" in name:
                continue
            st = os.lstat(full)
            kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else ""
            if kind:
                out.append({"Name": relname, "Kind": kind, "Size": st.st_size if kind == "file" else 0,
                            "Mode": st.st_mode & 0o777})
    return out


def _job_dirs(root: Path) -> dict[tuple[int, int], Path]:
    """The job directories under the spool's ``jobs``, by (cluster, proc)."""
    out: dict[tuple[int, int], Path] = {}
    for cdir in (root.iterdir() if root.is_dir() else []):
        for pdir in (cdir.iterdir() if cdir.is_dir() and cdir.name.isdigit() else []):
            if pdir.name.isdigit():
                out[(int(cdir.name), int(pdir.name))] = pdir
    return out


def _remove_job_dirs(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # the cluster's directory, once empty
