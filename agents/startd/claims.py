"""The claims: granting them (RequestClaim), keeping them (Alive, answered reports, leases), and
ending them (ReleaseClaim, Vacate, Drain, a lease run out, a schedd that no longer knows one).

Only an explicit "claim unknown" from the schedd ends a claim early; silence ends it only when its
lease runs out. Ending a claim stops its job first (waiting for a job still being spawned), then
frees the slot: a dynamic slot goes away, a static one gets a fresh claim id.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import secrets
import time
from collections.abc import Callable
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.ads import SlotAds
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.jobstarter import JobStarter
from gridbus.agents.startd.sandbox import Sandboxes
from gridbus.agents.startd.settings import StartdSettings
from gridbus.agents.startd.starter import Job
from gridbus.status import app_error, forbidden, invalid

# Application statuses (Status.USER + n), each answered with a sentence.
CLAIM_REFUSED = 1  # the slot will not take this job: Requirements, resources, draining
CLAIM_BUSY = 2  # the claim is running a job already

log = logging.getLogger("gridbus.startd")

KILL_GRACE = 10.0  # seconds a job may take to go after SIGKILL (its cgroup emptied, its scratch cleaned)


class Claims:
    def __init__(self, address: str, table: sl.SlotTable, ads: SlotAds, starter: JobStarter,
                 sandboxes: Sandboxes, settings: StartdSettings, *, spawn: Callable[..., Any],
                 ads_changed: Callable[..., None]):
        self.address = address
        self.table = table
        self.ads = ads
        self.starter = starter
        self.sandboxes = sandboxes  # a claim ended during its job's input transfer ends the transfer
        self.settings = settings  # replaced by the startd's reconfig
        self.spawn = spawn
        self.ads_changed = ads_changed
        # Called when a claim starts no further job (ending, draining): its successor spawned
        # ahead is stopped (the activation sets it; it drops Claim.successor).
        self.no_more_starts: Callable[[sl.Claim], None] = lambda claim: None
        self.by_id: dict[str, sl.Claim] = {}
        self._ending: dict[str, asyncio.Future] = {}  # claims being ended, done when they are
        # Claims ended, in the order they ended -> until when an unanswered exit report of theirs
        # is still sent (their lease from the end).
        self._ended: dict[str, float] = {}
        # (when the claim's lease could run out, claim id), soonest first. A renewal does not
        # touch the heap: an entry found due with the claim renewed since goes back with its new
        # deadline, so a check costs the claims that are due, not a walk over 10,000 of them.
        self._deadlines: list[tuple[float, str]] = []

    # ------------------------------------------------------------------ lookup
    def get(self, claim_id: str, what: str) -> sl.Claim:
        """The live claim ``claim_id``; refused (status 6) with what the id is if it is none."""
        claim = self.by_id.get(claim_id)
        if claim is None:
            slot = self.table.by_claim_id(claim_id)
            if slot is not None and slot.kind == sl.PARTITIONABLE:
                raise forbidden(f"{what}: {claim_id[:6]}... is the partitionable slot's id; RequestClaim carves a dynamic slot and gives its claim id")
            if slot is not None:
                raise forbidden(f"{what}: {slot.name} has not been claimed with this id; call RequestClaim first")
            raise forbidden(f"{what}: claim id {claim_id[:6]}... is not a claim of {self.address} (forged, or ended)")
        return claim

    def keep_report(self, report: dict[str, Any]) -> bool:
        """Whether an unanswered report is still to be sent: any of a live claim; the exit of a
        claim ended less than its lease ago (the job's end must reach the schedd, or it would run
        the job again)."""
        cid = str(report.get("ClaimId"))
        if cid in self.by_id:
            return True
        until = self._ended.get(cid)
        return report.get("Event") == "exit" and until is not None and until > time.monotonic()

    def is_ending(self, claim: sl.Claim) -> bool:
        return claim.id in self._ending

    # ------------------------------------------------------------------ granting
    @method("startd")
    async def RequestClaim(self, call: Call, ClaimId: str, JobAd: dict, Schedd: str, LeaseDuration: int) -> dict:
        if not Schedd or "@" not in Schedd:
            raise invalid(f"RequestClaim: Schedd must be the schedd's agent address (kind@name), not {Schedd!r}")
        if LeaseDuration <= 0:
            raise invalid("RequestClaim: LeaseDuration must be a positive number of seconds")
        existing = self.by_id.get(ClaimId)
        gid = str(lookup(JobAd, "GlobalJobId") or "")
        if existing is not None:  # a retry of a call whose answer was lost: same answer
            if existing.schedd != Schedd:
                raise forbidden(f"RequestClaim: {existing.slot.name} is claimed by another schedd")
            if gid and existing.requested_for and gid != existing.requested_for:
                # Not a retry but a second match, made on an ad from before the claim: answering
                # "OK" would hand the schedd the claim of a job it already runs on this slot.
                raise app_error(CLAIM_REFUSED, f"RequestClaim: {existing.slot.name} is already claimed, for "
                                               f"job {existing.requested_for}; the match was made on an out-of-date ad")
            if existing.id in self._ending or existing.retiring:
                raise app_error(CLAIM_REFUSED, f"RequestClaim: the claim on {existing.slot.name} is being ended "
                                               "(released, vacated, drained or its lease ran out)")
            return self._granted(existing)
        slot = self.table.by_claim_id(ClaimId)
        if slot is None:
            raise forbidden(f"RequestClaim: claim id {ClaimId[:6]}... is not one {self.address} issued (forged or stale)")
        drain = self.table.drain
        if drain is not None:
            raise app_error(CLAIM_REFUSED, f"RequestClaim: {self.address} is draining ({drain.how}) and takes no new claims")
        if slot.state == sl.OWNER:
            raise app_error(CLAIM_REFUSED, f"RequestClaim: {slot.name} is in the Owner state (START is false)")
        job = self.ads.job_for_match(JobAd)
        ad = self.ads.slot_ad(slot)
        if slot.kind == sl.STATIC:
            why = self.ads.mismatch(ad, job)
            if why:
                raise app_error(CLAIM_REFUSED, f"RequestClaim refused: {why}")
            if slot.claim is not None and ClaimId == slot.preempting_id:  # the running claim goes first
                await self._preempt(slot, slot.claim, ad, job)
                if slot.claim is not None or slot.state != sl.UNCLAIMED:
                    raise app_error(CLAIM_REFUSED, f"RequestClaim: {slot.name} was claimed by another meanwhile")
                self.table.rekey(slot, ClaimId)
            elif slot.claim is not None:
                raise app_error(CLAIM_REFUSED, f"RequestClaim: {slot.name} is claimed")
            claim = self.table.claim(slot, Schedd, float(LeaseDuration), JobAd)
        else:  # partitionable: carve a dynamic slot of the request
            retried = self._carved_for(slot, Schedd, gid)
            if retried is not None:  # the answer to the first call was lost: same answer, no new slot
                return self._granted(retried)
            try:
                req = self.table.request_of(job, ad, self.ads.defaults, slot)
            except sl.NotEnoughGPUs as exc:
                raise app_error(CLAIM_REFUSED, f"RequestClaim refused: {exc}") from None
            except ValueError as exc:
                raise invalid(f"RequestClaim: {exc}") from None
            job = {**job, "RequestCpus": req.cpus, "RequestMemory": req.memory, "RequestDisk": req.disk}
            why = self.ads.mismatch(ad, job)
            if why:
                raise app_error(CLAIM_REFUSED, f"RequestClaim refused: {why}")
            if req.cpus < 1 or req.memory < 1:
                raise app_error(CLAIM_REFUSED, "RequestClaim refused: a dynamic slot needs at least 1 cpu and 1 MiB")
            claim = self.table.claim(self.table.carve(slot, req), Schedd, float(LeaseDuration), JobAd)
        claim.requested_for = gid
        self.by_id[claim.id] = claim
        self.watch_lease(claim)
        log.info("%s claimed by %s for %s (lease %d s)", claim.slot.name, Schedd, claim.owner or "?", LeaseDuration)
        self.ads_changed(sl.ad_names(claim.slot))
        return self._granted(claim)

    async def _preempt(self, slot: sl.Slot, current: sl.Claim, ad: dict[str, Any], job: dict[str, Any]) -> None:
        """End ``current`` for a preempting claim, as HTCondor's startd does: never for a job its
        RANK likes less than the one it runs, nor before the running job's MaxJobRetirementTime
        (counted from its start) is over; then the job is vacated (evicted: its schedd runs it
        again)."""
        if current.id in self._ending or current.retiring:
            raise app_error(CLAIM_REFUSED, f"RequestClaim: the claim on {slot.name} is being ended")
        running = current.job.ad if current.job is not None else current.last_ad
        if running is not None:
            new_rank, current_rank = self.ads.rank_of(ad, job), self.ads.rank_of(ad, running)
            if new_rank < current_rank:
                raise app_error(CLAIM_REFUSED, f"RequestClaim: {slot.name}'s RANK prefers the job it runs "
                                               f"({current_rank:g}) to this one ({new_rank:g})")
        if current.job is not None:
            left = current.job.started + self.ads.retirement_of(ad, current.job.ad) - time.time()
            if left > 0:
                raise app_error(CLAIM_REFUSED, f"RequestClaim: the job on {slot.name} is retiring "
                                               f"(MaxJobRetirementTime): {math.ceil(left)} s left")
        log.info("%s: claim of %s preempted", slot.name, current.owner or "?")
        await self.end(current, graceful=True, reason="preempted")

    def _granted(self, claim: sl.Claim) -> dict:
        # ReportActivations: this startd takes the claim's next activations in the answers to its
        # JobReports calls (docs/protocols.md, "Claiming and running").
        claim.renew()
        return {"ClaimId": claim.id, "Slot": claim.slot.name, "SlotAd": self.ads.slot_ad(claim.slot),
                "ReportActivations": True}

    def _carved_for(self, pslot: sl.Slot, schedd: str, gid: str) -> sl.Claim | None:
        """The unused dynamic slot an earlier RequestClaim of the same job carved from ``pslot``."""
        if not gid:
            return None  # no identity to recognise a retry by: every request carves
        for claim in self.by_id.values():
            if (claim.slot.parent is pslot and claim.schedd == schedd and claim.requested_for == gid
                    and claim.job is None and claim.last_ad is None):
                return claim
        return None

    # ------------------------------------------------------------------ keeping
    @method("startd")
    async def Alive(self, call: Call, ClaimIds: list) -> dict:
        unknown = []
        for cid in ClaimIds:
            if not isinstance(cid, str):
                raise invalid(f"Alive: ClaimIds must be strings, got {type(cid).__name__}")
            claim = self.by_id.get(cid)
            if claim is None:
                unknown.append(cid)
            else:
                claim.renew()
        return {"Unknown": unknown}

    def answered(self, claim_ids: list[str]) -> None:
        """The schedd answered reports of these claims: they are alive."""
        for cid in claim_ids:
            claim = self.by_id.get(cid)
            if claim is not None:
                claim.renew()

    def unknown(self, claim_ids: list[str]) -> None:
        """The schedd no longer knows these claims: end them."""
        for cid in claim_ids:
            claim = self.by_id.get(cid)
            if claim is not None:
                log.warning("%s no longer knows the claim on %s: ending it", claim.schedd, claim.slot.name)
                self.spawn(self.end(claim, graceful=True, reason="unknown to the schedd"), "claim unknown")

    async def lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease_check_interval())
            now = time.monotonic()
            self._forget_ended(now)
            for claim in self.leases_run_out(now):
                log.warning("claim on %s: lease of %.0f s ran out with no word from %s; ending it",
                            claim.slot.name, claim.lease, claim.schedd)
                self.spawn(self.end(claim, graceful=True, reason="lease"), "lease expired")

    def watch_lease(self, claim: sl.Claim) -> None:
        heap = self._deadlines
        if len(heap) > 2 * len(self.by_id) + 64:
            # Mostly claims ended before their deadline came up (a claim per job, no reuse):
            # rebuilt from the live ones, so the heap stays the size of the claims.
            heap[:] = [(c.renewed + c.lease, c.id) for c in self.by_id.values() if c is not claim]
            heapq.heapify(heap)
        heapq.heappush(heap, (claim.renewed + claim.lease, claim.id))

    def leases_run_out(self, now: float) -> list[sl.Claim]:
        """The live claims whose lease ran out by ``now`` and that nobody is ending yet."""
        due: list[sl.Claim] = []
        heap = self._deadlines
        while heap and heap[0][0] < now:
            _, cid = heapq.heappop(heap)
            claim = self.by_id.get(cid)
            if claim is None:
                continue  # ended: its entry goes with it
            if claim.expired(now) and cid not in self._ending:
                due.append(claim)
            # Still live: renewed since (its new deadline is not before now), or being ended
            # (looked at again in a second, as long as the end has not removed it).
            deadline = claim.renewed + claim.lease
            heapq.heappush(heap, (deadline if deadline >= now else now + 1.0, cid))
        return due

    def _forget_ended(self, now: float) -> None:
        # Oldest first; a longer lease ahead keeps shorter ones behind it a little longer.
        while self._ended:
            cid, until = next(iter(self._ended.items()))
            if until > now:
                return
            del self._ended[cid]

    def _lease_check_interval(self) -> float:
        """Until the soonest lease could run out: at least 0.1 s, at most 1 s (the ended claims'
        report window is trimmed at the same pace)."""
        if not self._deadlines:
            return 1.0
        return max(0.1, min(1.0, self._deadlines[0][0] - time.monotonic()))

    # ------------------------------------------------------------------ ending
    @method("startd")
    async def ReleaseClaim(self, call: Call, ClaimId: str) -> dict:
        await self.end(self.get(ClaimId, "ReleaseClaim"), graceful=True, reason="release")
        return {}

    @method("startd")
    async def Vacate(self, call: Call, Slot: str, Graceful: bool) -> dict:
        if Slot and Slot not in self.table.slots:
            raise invalid(f"Vacate: {self.address} has no slot {Slot!r} (slots: {', '.join(self.table.slots)})")
        chosen = [
            c for c in self.by_id.values()
            if not Slot or c.slot.name == Slot or (c.slot.parent is not None and c.slot.parent.name == Slot)
        ]
        await asyncio.gather(*(self.end(c, graceful=Graceful, reason="vacate") for c in chosen))
        return {"Count": len(chosen)}

    async def stop_job(self, job: Job, graceful: bool, reason: str) -> None:
        """Stop a claim's job and wait until it is gone (its KillSig, SIGKILL after KILLING_TIMEOUT)."""
        deadline = (self.settings.killing_timeout if graceful else 0) + KILL_GRACE
        try:
            await asyncio.wait_for(self.starter.stop_and_wait(job, graceful, reason), deadline)
        except TimeoutError:
            log.error("job %s on %s did not die within %.0f s of SIGKILL", job_id(job.ad), job.slot, deadline)

    async def end(self, claim: sl.Claim, *, graceful: bool, reason: str) -> None:
        """Stop the claim's job (if any), then free its slot. Idempotent."""
        if claim.id in self._ending:  # someone else is ending it: wait for that
            await asyncio.shield(self._ending[claim.id])
            return
        done = asyncio.get_running_loop().create_future()
        self._ending[claim.id] = done
        self.no_more_starts(claim)
        try:
            if claim.launch is not None:  # a job being spawned is stopped like a running one, once it runs
                self.sandboxes.abort(claim.id, reason)  # (its input transfer ends now)
                await asyncio.shield(claim.launch)
            if claim.job is not None:
                claim.slot.set(sl.PREEMPTING, sl.VACATING if graceful else sl.KILLING)
                self.ads_changed(sl.ad_names(claim.slot))
                await self.stop_job(claim.job, graceful, reason)
            if claim.job is not None:
                # It outlived SIGKILL: the slot stays Preempting (its resources in use, its claim
                # id not handed out) and the claim retires, to end when the job's exit is reaped.
                claim.retiring = True
                log.error("claim on %s: its job is still there after SIGKILL; the slot is freed once it is gone",
                          claim.slot.name)
                return
            self.by_id.pop(claim.id, None)
            self._ended[claim.id] = time.monotonic() + claim.lease
            self.table.free(claim.slot)
            if self.table.drain is not None and claim.slot.kind == sl.STATIC:
                claim.slot.set(sl.DRAINED, sl.RETIRING)
            log.info("claim on %s ended (%s)", claim.slot.name, reason)
        finally:
            self._ending.pop(claim.id, None)
            done.set_result(None)
        self._check_drained()
        self.ads_changed(sl.ad_names(claim.slot))

    def retire(self, claim: sl.Claim) -> None:
        """A retiring claim (draining) whose job is done ends now."""
        if claim.retiring and claim.id not in self._ending and self.by_id.get(claim.id) is claim:
            self.spawn(self.end(claim, graceful=True, reason="drain"), "retire claim")

    # ------------------------------------------------------------------ draining
    @method("startd")
    async def Drain(self, call: Call, HowFast: str, OnCompletion: str, Reason: str) -> dict:
        how = HowFast.strip().lower()
        if how not in ("graceful", "quick", "fast"):
            raise invalid(f"Drain: HowFast must be graceful, quick or fast, not {HowFast!r}")
        on_completion = OnCompletion.strip().lower()
        if on_completion not in ("nothing", "resume"):
            raise invalid(f"Drain: OnCompletion must be nothing or resume, not {OnCompletion!r}")
        if self.table.drain is not None:
            raise app_error(CLAIM_REFUSED, f"Drain: {self.address} is already draining (request {self.table.drain.request_id}); cancel it first")
        drain = self.table.drain = sl.DrainState(secrets.token_hex(8), how, on_completion,
                                                 Reason or f"drain requested by {call.user}", time.time())
        log.info("draining (%s) at the request of %s: %s", how, call.user, drain.reason)
        for claim in list(self.by_id.values()):
            claim.retiring = True
            self.no_more_starts(claim)
            if claim.job is None and claim.launch is None:
                self.spawn(self.end(claim, graceful=True, reason="drain"), "drain idle claim")
            elif how == "graceful":
                claim.slot.set(activity=sl.RETIRING)
            else:
                self.spawn(self.end(claim, graceful=how == "quick", reason="drain"), "drain claim")
        for slot in self.table.slots.values():
            if slot.claim is None:
                slot.set(sl.DRAINED, sl.RETIRING)
        self._check_drained()
        self.ads_changed()
        return {"RequestId": drain.request_id}

    @method("startd")
    async def CancelDrain(self, call: Call, RequestId: str) -> dict:
        drain = self.table.drain
        if drain is None:
            raise app_error(CLAIM_REFUSED, f"CancelDrain: {self.address} is not draining")
        if RequestId and RequestId != drain.request_id:
            raise invalid(f"CancelDrain: the drain in effect is {drain.request_id}, not {RequestId!r}")
        self._cancel_drain()
        return {}

    def _cancel_drain(self) -> None:
        log.info("drain %s cancelled", self.table.drain.request_id if self.table.drain else "?")
        self.table.drain = None
        for slot in self.table.slots.values():
            if slot.claim is None:
                slot.set(sl.UNCLAIMED, sl.IDLE)
            else:
                slot.claim.retiring = False
                slot.set(activity=sl.BUSY if slot.claim.job is not None else sl.IDLE)
        self.ads_changed()

    def _check_drained(self) -> None:
        drain = self.table.drain
        if drain is None or self.by_id:
            return
        for slot in self.table.slots.values():
            slot.set(sl.DRAINED, sl.IDLE)
        log.info("drained")
        if drain.on_completion == "resume":
            self._cancel_drain()
        self.ads_changed()


def job_id(ad: Any) -> str:
    return f"{lookup(ad, 'ClusterId')}.{lookup(ad, 'ProcId')}"
