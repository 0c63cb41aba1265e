"""The schedd's side of file transfer: OpenTransfer, called by the startd that runs a job.

The schedd itself never reads or writes a file of the job's owner: it checks that the calling
claim runs the job, hands the job's owner's shadow (owner_shadow.py) what the transfer needs from
the job's ad (Iwd, TransferInput, TransferOutput, TransferOutputRemaps, Cmd, In, Out, Err, ...)
with a fresh token, and answers the shadow's queue and the token. The shadow, as the owner, sends
the input or writes the output; the startd reports the outcome with the job's exit. A spooled
job's files are the schedd's own (spooling.py): the schedd serves its transfers itself.

A self-checkpointing job's checkpoint (checkpoints.py) is a transfer of its own, Direction
``checkpoint``: the shadow receives it as output, into the job's incoming checkpoint directory in
the spool; and a run's input (``in``) brings back the job's last checkpoint, if it has one.
"""

from __future__ import annotations

import secrets
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd import matchexp
from gridbus.agents.schedd.checkpoints import CheckpointStore
from gridbus.agents.schedd.claims import Claims
from gridbus.agents.schedd.inline_sandboxes import transfer_spec
from gridbus.agents.schedd.jobqueue import JobQueue
from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowRefused
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.spooling import Spooling
from gridbus.status import app_error, forbidden, invalid
from gridbus.transfer import OPEN_REFUSED, spec


class Transfers:
    def __init__(self, queue: JobQueue, claims: Claims, owner_shadows: OwnerShadows, spooling: Spooling,
                 settings: ScheddSettings, checkpoints: CheckpointStore | None = None,
                 stats: dict[str, int] | None = None):
        self.checkpoints = checkpoints
        self.stats = stats if stats is not None else {}
        self.stats.setdefault("TransfersOpened", 0)  # streamed transfers (small sandboxes go inline)
        self.queue = queue
        self.claims = claims
        self.owner_shadows = owner_shadows
        self.spooling = spooling
        self.settings = settings

    @method("scheduler")
    async def OpenTransfer(self, call: Call, ClaimId: str, ClusterId: int, ProcId: int, Direction: str) -> dict[str, Any]:
        if Direction not in ("in", "out", "checkpoint"):
            raise invalid(f"OpenTransfer: Direction must be in, out or checkpoint, not {Direction[:20]!r}")
        job = (ClusterId, ProcId)
        claim = self.claims.by_job.get(job)
        ahead = self.claims.ahead_of.get(job)
        if claim is None and ahead is not None and job not in ahead.withdrawn:
            # A job queued ahead on the claim starts at its predecessor's exit and asks for its
            # input before the report of that start has come.
            claim = ahead
        if claim is None or claim.claim_id != ClaimId:
            raise forbidden(f"OpenTransfer: claim {ClaimId[:6]}... does not run job {ClusterId}.{ProcId} here")
        ad = self.queue.get(ClusterId, ProcId)
        if ad is None:
            raise forbidden(f"OpenTransfer: job {ClusterId}.{ProcId} is not in the queue")
        ad = matchexp.as_matched(ad)  # its $$() as expanded for this claim's slot at the activation
        stall = self.settings.transfer_stall
        token = secrets.token_hex(16)
        self.stats["TransfersOpened"] += 1
        checkpoint, direction = self._checkpoint_spec(ad, Direction, ClaimId)
        # (TRANSFER_DIRECT_IO_MIN_MB: for the owner's shadow and for the schedd's own spooled transfers)
        extra: dict[str, Any] = {**checkpoint, spec.DIRECT_MIN: self.settings.transfer_direct_io_min}
        if self.spooling.is_spooled(ad):
            return {"Queue": await self.spooling.open_transfer({**ad, **extra}, direction, token, stall), "Token": token}
        wanted = transfer_spec(ad)
        try:
            queue = await self.owner_shadows.expect(str(ad.get("Owner") or ""), token, direction,
                                                    {**wanted, **extra, "stall": stall,
                                                     spec.RESUME_KEY: f"{ClusterId}.{ProcId}"})
        except ShadowRefused as exc:
            raise app_error(OPEN_REFUSED, f"OpenTransfer: {exc.sentence}") from None
        return {"Queue": queue, "Token": token}

    def _checkpoint_spec(self, ad: dict[str, Any], direction: str, claim_id: str) -> tuple[dict[str, str], str]:
        """What a transfer's spec adds for checkpoints, and the direction the submit side serves:
        a checkpoint is received as output, into a fresh incoming directory; an input brings the
        job's last checkpoint back too."""
        store = self.checkpoints
        cluster, proc = int(ad.get("ClusterId", -1)), int(ad.get("ProcId", -1))
        if direction == "checkpoint":
            if store is None:
                raise app_error(OPEN_REFUSED, "OpenTransfer: this schedd keeps no checkpoints")
            try:
                where = store.incoming(cluster, proc, claim_id, str(ad.get("Owner") or ""))
            except OSError as exc:
                raise app_error(OPEN_REFUSED, f"OpenTransfer: cannot make the checkpoint directory in the spool: "
                                              f"{exc.strerror}") from None
            return {spec.CHECKPOINT_TO: str(where)}, "out"
        return (store.input_spec(ad) if direction == "in" and store is not None else {}), direction
