"""The negotiator's side of the schedd (docs/protocols.md, "Negotiation"): GetResourceRequests
answers one request per autocluster of an owner's idle jobs; Match takes the negotiator's matches,
reserves one idle job per match, claims the slots in the background (RequestClaim), and hands
each claim to the shadows (shadows.py) to activate."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd.claims import Claim, Claims, Spawn
from gridbus.agents.schedd.jobattrs import runs_on_submit_host
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import Shadows
from gridbus.autocluster import AutoClusters, JobRun
from gridbus.rpc import CallTimeout
from gridbus.status import invalid

log = logging.getLogger("gridbus.schedd.negotiation")

IDLE_STATUS = 1
# What differs between the full ads of a cluster's procs that have no attribute of their own.
_PER_PROC = frozenset({"procid", "globaljobid"})


class Negotiation:
    def __init__(self, address: str, queue: JobQueue, claims: Claims, shadows: Shadows, autoclusters: AutoClusters,
                 spawn: Spawn, settings: ScheddSettings):
        self.address = address
        self.queue = queue
        self.claims = claims
        self.shadows = shadows
        self.autoclusters = autoclusters
        self._spawn = spawn
        self.settings = settings
        # Per owner: the autoclusters of the last full grouping (GetResourceRequests pages are cut
        # from it) and, per autocluster, the job ids a Match takes from.
        self._ac_snapshot: dict[str, dict[int, deque[tuple[int, int]]]] = {}
        self._ac_pages: dict[str, list[tuple[int, dict[str, Any], list[tuple[int, int]]]]] = {}
        # Matches whose RequestClaim waits for one of the MAX_PENDING_STARTD_CONTACTS places, and
        # the calls in flight (HTCondor's schedd queues its startd contacts the same way).
        self._waiting: deque[tuple[dict[str, Any], tuple[int, int]]] = deque()
        self._contacts = 0

    @property
    def claims_waiting(self) -> int:
        """Matches accepted whose RequestClaim has not been sent yet."""
        return len(self._waiting)

    def jobs_on_claims(self) -> int:
        """What MAX_JOBS_RUNNING counts (HTCondor's shadows): jobs on claims, and matches accepted
        whose claim is being requested or waits its turn."""
        return len(self.claims.by_job) + len(self._waiting) + self._contacts

    @property
    def owners_paged(self) -> set[str]:
        """The owners whose request pages are held."""
        return set(self._ac_pages)

    @method("scheduler")
    async def GetResourceRequests(self, call: Call, Owner: str, Limit: int, After: int,
                                  AutoClusterAttrs: list, WholeAds: bool) -> dict[str, Any]:
        if not Owner:
            raise invalid("GetResourceRequests: Owner must name the submitter whose requests are wanted")
        if Limit < 1:
            raise invalid(f"GetResourceRequests: Limit must be at least 1, got {Limit}")
        bad = next((a for a in AutoClusterAttrs if not isinstance(a, str) or not a), None)
        if bad is not None:
            raise invalid(f"GetResourceRequests: AutoClusterAttrs must be attribute names, got {bad!r}")
        if not self.shadows.running_limit.room(self.jobs_on_claims()):
            return {"Requests": []}  # MAX_JOBS_RUNNING: nothing more can run, so nothing is asked for
        groups = self._ac_pages.get(Owner)
        if After < 0 or groups is None:
            # The pool's slots read these job attributes: the requests carry them (a page after
            # the first keeps the grouping the first page was cut from).
            self.autoclusters.set_pool_attrs(None if WholeAds else AutoClusterAttrs)
            groups = self.autoclusters.group(self._idle_runs(Owner), owner=Owner)
            self._ac_pages[Owner] = groups
            self._ac_snapshot[Owner] = {acid: deque(ids) for acid, _ad, ids in groups}
            self._prune_autoclusters()
        return {"Requests": self.autoclusters.page(groups, Limit, After)}

    def _idle_runs(self, owner: str) -> Iterator[dict[str, Any] | JobRun]:
        """The owner's idle jobs not reserved by a match, in the negotiator's order, a cluster's
        consecutive procs as one run: they share the cluster ad, so when none of what decides the
        autocluster differs between them (their ProcId, GlobalJobId and their own attributes,
        such as a requeued job's LastJobStatus) the run is grouped once, from one ad."""
        queue, reserved = self.queue, self.claims.reserved
        run: list[Proc] = []

        def flush() -> Iterator[dict[str, Any] | JobRun]:
            procs = list(run)
            run.clear()
            varying = set(_PER_PROC)
            for p in procs:
                if p.attrs:
                    varying.update(k.lower() for k in p.attrs)
            if "jobuniverse" in varying:  # some may run on the submit host: each on its own
                for p in procs:
                    ad = queue.ad(p)
                    if not runs_on_submit_host(ad):
                        yield ad
                return
            ad = queue.ad(procs[0])
            if not runs_on_submit_host(ad):
                yield JobRun(ad, [p.key for p in procs], lambda: (queue.ad(p) for p in procs), frozenset(varying))

        for p in queue.idle_procs(owner):
            if (p.cluster.id, p.id) in reserved:
                continue
            if run and run[0].cluster is not p.cluster:
                yield from flush()
            run.append(p)
        if run:
            yield from flush()

    def _prune_autoclusters(self) -> None:
        """Forget the autoclusters, attribute lists and request pages of owners with no idle job
        (the negotiator asks only owners that have some: theirs would never be dropped)."""
        idle = {o for o, counts in self.queue.counts.items() if counts[IDLE_STATUS] > 0}
        self.autoclusters.retain(idle)
        for owner in [o for o in self._ac_pages if o not in idle]:
            del self._ac_pages[owner]
            self._ac_snapshot.pop(owner, None)

    @method("scheduler")
    async def Match(self, call: Call, Matches: list) -> dict[str, Any]:
        checked = []
        for i, m in enumerate(Matches):
            if not isinstance(m, dict):
                raise invalid(f"Match: Matches[{i}] must be a map, got {type(m).__name__}")
            for key, kind in (("AutoClusterId", int), ("ClaimId", str), ("Slot", str), ("Startd", str)):
                if not isinstance(m.get(key), kind):
                    raise invalid(f"Match: Matches[{i}] needs {key} ({kind.__name__})")
            if not isinstance(m.get("SlotAd", {}), dict):
                raise invalid(f"Match: Matches[{i}].SlotAd, when given, must be the slot's ad (a map)")
            checked.append(m)
        accepted = 0
        room = self.shadows.running_limit.room(self.jobs_on_claims())  # MAX_JOBS_RUNNING
        for m in checked:
            if accepted >= room:
                break  # the negotiator's further matches are not accepted: their slots stay unclaimed
            job = self._take_matched_job(m["AutoClusterId"])
            if job is None:
                continue
            accepted += 1
            self.claims.reserve(job)
            self.claims.stats["Matches"] += 1
            self._waiting.append((m, job))
        self._start_claims()
        return {"Accepted": accepted}

    def _start_claims(self) -> None:
        """Send the waiting RequestClaims, at most MAX_PENDING_STARTD_CONTACTS in flight: a
        Match of 2,000 slots must not put 2,000 calls, then 2,000 answers, ahead of a Query on
        the schedd's one event loop. Each call that ends starts the next."""
        limit = self.settings.max_pending_contacts
        while self._waiting and (limit <= 0 or self._contacts < limit):
            match, job = self._waiting.popleft()
            self._contacts += 1
            self._spawn(self._contact(match, job), "claim")

    async def _contact(self, match: dict[str, Any], job: tuple[int, int]) -> None:
        try:
            await self._claim_and_run(match, job)
        except asyncio.CancelledError:  # the schedd stops: nothing new is started
            self._contacts -= 1
            raise
        except Exception:
            log.exception("claiming %s for job %d.%d failed", match.get("Slot"), *job)
        self._contacts -= 1
        self._start_claims()

    def _take_matched_job(self, acid: int) -> tuple[int, int] | None:
        for members in self._ac_snapshot.values():
            ids = members.get(acid)
            while ids:
                job = ids.popleft()
                if job in self.claims.reserved or job in self.claims.by_job:
                    continue
                p = self.queue.proc(*job)
                if p is not None and p.status == IDLE_STATUS:
                    return job
        return None

    async def _claim_and_run(self, match: dict[str, Any], job: tuple[int, int]) -> None:
        ad = self.queue.get(*job)
        if ad is None or ad.get("JobStatus") != 1:
            self.claims.unreserve(job)
            return
        self.claims.stats["ClaimsRequested"] += 1
        args = {"ClaimId": match["ClaimId"], "JobAd": ad, "Schedd": self.address,
                "LeaseDuration": int(self.settings.lease_duration)}
        try:
            result = await self.claims.call(match["Startd"], "RequestClaim", args, timeout=self.settings.shadow_call_timeout)
        except CallTimeout:
            result = None
            # The startd may still grant the claim after we stopped waiting: release whatever it
            # grants, so the slot is never left Claimed by a schedd that forgot it.
            self._spawn(self._release_late_claim(match, args), "release a late claim")
        if result is None or not result.ok:
            self.claims.stats["ClaimsRefused"] += 1
            self.claims.unreserve(job)
            why = "no answer" if result is None else f"{result.text} (status {result.status})"
            log.info("claim of %s for job %d.%d refused: %s", match["Slot"], *job, why)
            return
        out = result.outArgs
        claim = Claim(
            claim_id=str(out.get("ClaimId") or match["ClaimId"]),
            startd=match["Startd"],
            slot=str(out.get("Slot") or match["Slot"]),
            owner=str(ad.get("Owner", "")),
            slot_ad=slot_ad if isinstance(slot_ad := out.get("SlotAd"), dict) else match.get("SlotAd") or {},
            worklife_end=time.time() + self.settings.claim_worklife,
            in_reports=out.get("ReportActivations") is True,
        )
        self.claims.by_id[claim.claim_id] = claim
        self.claims.changed(claim)
        self.shadows.activate(claim, job)
        self.shadows.flush_activations_now()

    async def _release_late_claim(self, match: dict[str, Any], args: dict[str, Any]) -> None:
        """Release the claim a timed-out RequestClaim may have made.

        RequestClaim is idempotent (the same claim id, or the same job on a partitionable slot,
        gets the same claim back), so asking again, patiently, names the claim the first call
        made, or makes one that is released just the same; ReleaseClaim of an ended claim is
        refused harmlessly. Tried for as long as the startd would keep the claim (the lease).
        """
        deadline = time.monotonic() + self.settings.lease_duration
        while time.monotonic() < deadline:
            try:
                result = await self.claims.call(match["Startd"], "RequestClaim", args,
                                                timeout=max(self.settings.shadow_call_timeout, 60.0))
            except CallTimeout:
                continue
            except Exception:  # the broker is away: try again shortly
                await asyncio.sleep(1)
                continue
            if not result.ok:
                return  # refused: no claim was made (or it ended)
            claim_id = str(result.outArgs.get("ClaimId") or match["ClaimId"])
            if claim_id in self.claims.by_id:
                return  # claimed again meanwhile for another job of ours: in use, not stranded
            self.claims.stats["ClaimsReleased"] += 1
            log.info("releasing the claim on %s granted after its request timed out",
                          result.outArgs.get("Slot") or match["Slot"])
            await self.claims.call_startd(match["Startd"], "ReleaseClaim", {"ClaimId": claim_id})
            return

