"""Self-checkpointing jobs (HTCondor's ``checkpoint_exit_code``): their checkpoints in the spool,
and what a checkpoint does to the job.

A job whose run exits with its SuccessCheckpointExitCode (and WantFTOnCheckpoint, which
condor_submit sets with it) has checkpointed: the startd sends the checkpoint's files
(TransferCheckpoint, else the output's; gridbus/transfer/spec.py) as a transfer of its own
(OpenTransfer with Direction ``checkpoint``, through the owner's shadow as output is), into
``SPOOL/checkpoints/<cluster>/<proc>/incoming-<claim>``, then reports the exit marked
``Checkpointed``. On that report the incoming directory becomes the job's checkpoint (``current``:
the previous one is kept until then, so a checkpoint cut off midway never replaces a whole one),
the job's ad records it as HTCondor's shadow does (CheckpointNumber, JobLastCheckpointTime,
CommittedTime), the FileTransferEvent pair of an output transfer goes to the user log, and the job
starts again in place: a new activation on the same claim, the job Running throughout, no
execute event and no start counted (shadows.py, ``restart_in_place``).

Any later run, on this claim or, after a vacate, an eviction or a startd crash, elsewhere, gets
the checkpoint's files back with its input (OpenTransfer ``in`` adds the ``current`` directory;
its files win over input files of the same name; a small one goes inline with the activation,
inline_sandboxes.py). The job's checkpoint directory goes with the
job: the spool sweep (spooling.py) removes those of jobs no longer in the queue, as it does
spooled jobs' directories (the same ``<cluster>/<proc>`` layout).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobevents import JobEvents
from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.jobstate import RunSoFar, run_usage
from gridbus.agents.startd.accounts import Account, RunAsRefused
from gridbus.classad.values import is_number
from gridbus.eventlog import writer
from gridbus.transfer.spec import CHECKPOINT_FROM

log = logging.getLogger("gridbus.schedd.checkpoints")

RUNNING = 2
CURRENT = "current"
INCOMING = "incoming-"


class CheckpointStore:
    """The checkpoints of one schedd's jobs under ``SPOOL/checkpoints``. ``account_for(owner)``:
    the Unix account the owner's shadow runs as; an incoming directory is that account's, so the
    shadow may write it (a schedd that is not root runs every shadow as itself)."""

    def __init__(self, spool: str | os.PathLike[str], account_for: Callable[[str], Account] | None = None):
        self.root = Path(spool) / "checkpoints"
        self._account_for = account_for

    def job_dir(self, cluster: int, proc: int) -> Path:
        return self.root / str(cluster) / str(proc)

    def current(self, cluster: int, proc: int) -> Path | None:
        """The job's last whole checkpoint, or None if it has none."""
        path = self.job_dir(cluster, proc) / CURRENT
        return path if path.is_dir() else None

    def input_spec(self, ad: Mapping[str, Any]) -> dict[str, str]:
        """What a run's input spec adds (streamed or inline): the job's last checkpoint, if any.
        Only a job that checkpoints (SuccessCheckpointExitCode) has the spool looked at: this is
        on every transfer's path."""
        if not isinstance(ad.get("SuccessCheckpointExitCode"), int):
            return {}
        current = self.current(int(ad.get("ClusterId", -1)), int(ad.get("ProcId", -1)))
        return {CHECKPOINT_FROM: str(current)} if current is not None else {}

    def incoming(self, cluster: int, proc: int, claim_id: str, owner: str) -> Path:
        """A fresh, empty directory for the checkpoint the job's run on ``claim_id`` sends."""
        job = self.job_dir(cluster, proc)
        # Passable, not listable, by the owners' shadows (they know the one path they are given);
        # each checkpoint directory is its owner's alone. (SPOOL itself must be passable too for a
        # schedd that runs shadows under the owners' accounts.)
        for d in (self.root, job.parent, job):
            d.mkdir(exist_ok=True)
            os.chmod(d, 0o711)  # (whatever the umask)
        path = job / (INCOMING + _safe(claim_id))
        shutil.rmtree(path, ignore_errors=True)  # a checkpoint of that run cut off before
        path.mkdir(mode=0o700)
        account = self._account(owner)
        if account is not None and account.switch:
            os.chown(path, account.uid, account.gid)
        return path

    def commit(self, cluster: int, proc: int, claim_id: str) -> bool:
        """The checkpoint ``claim_id``'s run sent is whole: it becomes the job's ``current``
        (renames: at every moment one whole checkpoint is there). False if none came."""
        job = self.job_dir(cluster, proc)
        incoming = job / (INCOMING + _safe(claim_id))
        if not incoming.is_dir():
            return False
        current = job / CURRENT
        old = job / f"old-{_safe(claim_id)}"
        if current.is_dir():
            shutil.rmtree(old, ignore_errors=True)
            os.rename(current, old)
        os.rename(incoming, current)
        shutil.rmtree(old, ignore_errors=True)
        return True

    def discard(self, cluster: int, proc: int, claim_id: str) -> None:
        """A checkpoint that will not be used (its run was evicted or held meanwhile)."""
        shutil.rmtree(self.job_dir(cluster, proc) / (INCOMING + _safe(claim_id)), ignore_errors=True)

    def _account(self, owner: str) -> Account | None:
        if self._account_for is None:
            return None
        try:
            return self._account_for(owner)
        except RunAsRefused:
            return None  # the shadow cannot run either: its transfer is refused with the reason


def _safe(claim_id: str) -> str:
    """A claim id as a file name (its characters are the schedd's and startd's, but never trusted)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in claim_id)[:80] or "_"


class Checkpointing:
    """What a checkpoint report does to the job (its ad, its events, its spool)."""

    def __init__(self, queue: JobQueue, commits: Commits, events: JobEvents, store: CheckpointStore,
                 ads_changed: Callable[[], None], run_so_far: RunSoFar):
        self.queue = queue
        self.commits = commits
        self.events = events
        self.store = store
        self._ads_changed = ads_changed
        self.run_so_far = run_so_far  # the run goes on: its end reports the whole run

    async def checkpointed(self, cluster: int, proc: int, claim_id: str, report: dict[str, Any]) -> bool:
        """The run on ``claim_id`` exited with the job's checkpoint code and its checkpoint was
        sent: keep the checkpoint and record it. True when the job restarts in place (it still
        runs here); False when it left Running meanwhile (held, removed), its checkpoint dropped."""
        p = self.queue.proc(cluster, proc)
        loop = asyncio.get_running_loop()
        if p is None or p.status != RUNNING:
            await loop.run_in_executor(None, self.store.discard, cluster, proc, claim_id)
            return False
        try:
            await loop.run_in_executor(None, self.store.commit, cluster, proc, claim_id)
        except OSError as exc:
            # The job's files are not lost (the previous checkpoint stays); this one is.
            log.warning("checkpoint of job %d.%d could not be kept: %s", cluster, proc, exc)
        now = time.time()
        attrs = run_usage(p, report)
        self.run_so_far.add(p.key, report)
        number = p.get("CheckpointNumber")
        attrs["CheckpointNumber"] = (number if isinstance(number, int) else -1) + 1
        # HTCondor's CommittedTime: the run time a checkpoint keeps (since the run's start or the
        # previous checkpoint, whichever is later).
        since = max(_num(p.get("JobCurrentStartDate")), _num(p.get("JobLastCheckpointTime")))
        if since > 0:
            attrs["CommittedTime"] = int(_num(p.get("CommittedTime")) + max(0.0, now - since))
        attrs["JobLastCheckpointTime"] = int(now)
        self.queue.update(p, attrs)
        ad = self.queue.ad(p)
        host = str(ad.get("RemoteHost") or "")
        started = report.get("TransferOutStarted")
        finished = report.get("TransferOutFinished")
        for kind, when in ((writer.OUT_STARTED, started), (writer.OUT_FINISHED, finished)):
            at = float(when) if is_number(when) else now
            self.events.emit("file_transfer", ad, writer.file_transfer(cluster, proc, at, kind, host),
                             {"Type": kind, "Checkpoint": True})
        self.commits.soon()
        self._ads_changed()
        return True


def _num(value: Any) -> float:
    return float(value) if is_number(value) else 0.0
