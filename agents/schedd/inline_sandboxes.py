"""Small sandboxes inline, the schedd's side (gridbus/transfer/inline.py).

A job whose sandbox travels and whose input comes to at most MAX_INLINE_TRANSFER_KB has it read
by its owner's shadow, as the owner, and put into the activation that starts it (``Sandbox``:
``Files``); every such activation also says how big an output may come back inside the exit
report (``OutputLimit``). The exit reports' outputs are written by the owners' shadows before
the reports are applied, so a completion is never recorded before its output is in place.
Neither direction opens a transfer (OpenTransfer, queues, a round trip of its own), and the
shadow is asked once per owner for a whole batch of activations or of reports, not once per job.
A self-checkpointing job's input brings its last checkpoint back (checkpoints.py), inline too when
small; its checkpoints themselves are always streamed, into the spool.

Anything else keeps the streamed path: a bigger sandbox, a spooled job (its files are the
schedd's own: spooling.py serves them), an input the shadow cannot read (the startd's
OpenTransfer then hears the shadow's sentence and holds the job, as before).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from gridbus.agents.schedd import matchexp
from gridbus.agents.schedd.checkpoints import CheckpointStore
from gridbus.agents.schedd.claims import Claims
from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowRefused
from gridbus.transfer import spec

log = logging.getLogger("gridbus.schedd.inline")

HOLD_TRANSFER_OUTPUT = 12  # HTCondor's TransferOutputError
_LIVE = (1, 2, 7)  # Idle (a job queued ahead, not known to run yet), Running, Suspended


def transfer_spec(ad: dict[str, Any]) -> dict[str, Any]:
    """The attributes of a job's ad its owner's shadow needs to move its files."""
    return {k: ad[k] for k in spec.SPEC_ATTRS if isinstance(ad.get(k), str | bool | int | float)}


class InlineSandboxes:
    def __init__(self, address: str, queue: JobQueue, claims: Claims, owner_shadows: OwnerShadows,
                 is_spooled: Callable[[dict[str, Any]], bool], limit: Callable[[], int],
                 checkpoints: CheckpointStore | None = None):
        self.address = address
        self.queue = queue
        self.claims = claims
        self.owner_shadows = owner_shadows
        self.is_spooled = is_spooled
        self.limit = limit  # MAX_INLINE_TRANSFER_KB in bytes, read at each use (a reconfig applies)
        self.checkpoints = checkpoints  # a self-checkpointing job's input brings its last checkpoint back
        self.stats = {"InlineInputs": 0, "InlineOutputs": 0, "InlineShadowRequests": 0}

    def _travels(self, entry: dict[str, Any]) -> bool:
        ad = entry.get("JobAd")
        if not isinstance(ad, dict) or self.is_spooled(ad):
            return False
        claim = self.claims.by_id.get(str(entry.get("ClaimId")))
        domain = str((claim.slot_ad if claim is not None else {}).get("FileSystemDomain") or "")
        return spec.wants_transfer(ad, domain)

    async def attach(self, entries: Iterable[dict[str, Any]]) -> None:
        """Give each activation entry (ActivateClaims, a JobReports answer's Activations or Ahead)
        whose sandbox travels its ``Sandbox``: the input's files when they are small enough."""
        limit = self.limit()
        if limit <= 0:
            return
        by_owner: dict[str, dict[str, dict[str, Any]]] = {}
        for entry in entries:
            if not self._travels(entry):
                continue
            ad = entry["JobAd"]
            entry["Sandbox"] = {"OutputLimit": limit}
            key = f"{ad.get('ClusterId')}.{ad.get('ProcId')}"
            by_owner.setdefault(str(ad.get("Owner") or ""), {})[key] = entry
        await asyncio.gather(*(self._read_inputs(owner, jobs, limit) for owner, jobs in by_owner.items()))

    async def _read_inputs(self, owner: str, jobs: dict[str, dict[str, Any]], limit: int) -> None:
        self.stats["InlineShadowRequests"] += 1
        try:
            answers = await self.owner_shadows.inline_inputs(
                owner, {k: self._input_spec(e["JobAd"]) for k, e in jobs.items()}, limit)
        except ShadowRefused as exc:
            log.info("the inputs of %d job(s) of %s go streamed: %s", len(jobs), owner, exc.sentence)
            return
        for key, entry in jobs.items():
            files = (answers.get(key) or {}).get("files")
            if isinstance(files, list):
                entry["Sandbox"]["Files"] = files
                self.stats["InlineInputs"] += 1

    def _input_spec(self, ad: dict[str, Any]) -> dict[str, Any]:
        wanted = transfer_spec(matchexp.as_matched(ad))
        if self.checkpoints is not None:
            wanted.update(self.checkpoints.input_spec(ad))
        return wanted

    async def take_outputs(self, reports: Iterable[dict[str, Any]]) -> None:
        """Write the outputs that came inside exit reports (``OutputSandbox``, taken out of the
        report) as their owners, a request per owner; a file that cannot be written holds the
        job (code 12, TransferOutputError), as a streamed output's would."""
        by_owner: dict[str, dict[str, tuple[dict[str, Any], dict[str, Any], list[Any]]]] = {}
        for report in reports:
            files = report.pop("OutputSandbox", None)
            if files is None or report.get("Event") != "exit":
                continue
            cluster, proc = report.get("ClusterId"), report.get("ProcId")
            ad = self.queue.get(cluster, proc) if isinstance(cluster, int) and isinstance(proc, int) else None
            if (ad is None or ad.get("JobStatus") not in _LIVE or report.get("HoldReason")
                    or str(report.get("ClaimId")) not in self.claims.by_id):
                continue  # a repeated report of a job done with, one held by the startd, or of a claim gone
            if not isinstance(files, list):
                self._hold(report, "the output sandbox came malformed", 0)
                continue
            key = f"{cluster}.{proc}"
            by_owner.setdefault(str(ad.get("Owner") or ""), {})[key] = (report, matchexp.as_matched(ad), files)
        await asyncio.gather(*(self._write_outputs(owner, jobs) for owner, jobs in by_owner.items()))

    async def _write_outputs(self, owner: str, jobs: dict[str, tuple[dict[str, Any], dict[str, Any], list[Any]]]) -> None:
        self.stats["InlineShadowRequests"] += 1
        try:
            answers = await self.owner_shadows.inline_outputs(
                owner, {k: (transfer_spec(ad), files) for k, (_r, ad, files) in jobs.items()})
        except ShadowRefused as exc:
            for report, _ad, _files in jobs.values():
                self._hold(report, exc.sentence, exc.errno)
            return
        for key, (report, _ad, _files) in jobs.items():
            answer = answers.get(key) or {"error": "the owner's shadow did not answer for this job"}
            if "error" in answer:
                self._hold(report, str(answer["error"]), int(answer.get("errno") or 0))
            else:
                self.stats["InlineOutputs"] += 1

    def _hold(self, report: dict[str, Any], reason: str, errno: int) -> None:
        claim = self.claims.by_id.get(str(report.get("ClaimId")))
        where = claim.slot if claim is not None else "the execution point"
        report.update({"HoldReason": f"Transfer output files failure at access point {self.address} while receiving "
                                     f"files from the execution point {where}: {reason}",
                       "HoldReasonCode": HOLD_TRANSFER_OUTPUT, "HoldReasonSubCode": errno})
