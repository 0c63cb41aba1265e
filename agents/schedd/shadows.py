"""The schedd's shadows: claims, activations, exit reports, claim reuse and leases.

HTCondor runs a condor_shadow process per running job; here a shadow is a `Claim` record and a few
coroutines on the schedd's loop. The schedd class is ``class Schedd(ShadowMixin, Agent)``; it
provides the job-state API this module calls (``queue``, ``job_started``, ``job_exited``,
``job_evicted``, ``job_update``, ``commit_soon``) and calls ``stop_running_job`` on Hold and Remove.

The protocol is docs/protocols.md, "Negotiation" and "Claiming and running":

- ``GetResourceRequests`` answers one request per autocluster of an owner's idle jobs; ``Match``
  takes the negotiator's matches, reserves one idle job per match and claims the slots in the
  background (``RequestClaim``), then activates them, batched per startd (``ActivateClaims``).
- ``JobReports`` from the startds: usage updates, and exits. On an exit the claim is reused at
  once for the owner's next idle job that matches the slot, in the same handler turn, until
  CLAIM_WORKLIFE ends; then it is released. For a startd whose RequestClaim answered
  ReportActivations the next jobs go in the answer to that very JobReports call (no round trip of
  their own) and come back as ``activated`` reports; other claims get one ActivateClaims call per
  startd for the whole batch. Under load the startd has one JobReports call in flight, so one call
  carries the reports of several jobs and its answer their successors: about one message pair
  per several jobs.
- Leases: ``Alive`` every lease/3 per startd for all its claims. Only an explicit "unknown" ends a
  claim at once; an unanswered startd loses its claims when the lease runs out, and their jobs
  go back to Idle to be matched elsewhere.
- Claims are persisted in a table of their own in the schedd's SQLite file (``shadow_claims``),
  so a restarted schedd reconnects to its running jobs inside the lease. A claim change asks for
  the schedd's write-behind commit (``commit_soon``), whose transaction takes the changed claim
  rows (``take_claim_writes``) with the job queue's: a job and its claim agree on disk, and the
  schedd's last commit at stop carries the last claim change.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import msgpack

from gridbus import bus, classad, wire
from gridbus.agent import Call, method
from gridbus.agents.schedd.autocluster import AutoClusters
from gridbus.agents.schedd.scheduniv import runs_on_submit_host
from gridbus.config import Config, knob
from gridbus.rpc import CallTimeout
from gridbus.status import Status, invalid

RUNNING = 2
SUSPENDED = 7  # still on its claim, its processes frozen

knob("CLAIM_WORKLIFE", 1200.0, "seconds a claim may be reused for further jobs; then it is released")
knob("JOB_LEASE_DURATION", 2400.0, "seconds a claim lives without word from its startd (Alive); also the lease given to RequestClaim")
knob("SHADOW_CALL_TIMEOUT", 10.0, "seconds the schedd waits for a startd's answer to RequestClaim, ActivateClaims, Alive")

# Claim states.
CLAIMING = "claiming"  # RequestClaim sent
ACTIVATING = "activating"  # ActivateClaims sent for claim.job
RUNNING_JOB = "running"  # claim.job runs
IDLE = "idle"  # claimed, no job (between jobs, or after a deactivation)

_CLAIMS_TABLE = """
CREATE TABLE IF NOT EXISTS shadow_claims (
    claim_id TEXT PRIMARY KEY,
    record BLOB NOT NULL
)
"""

_USAGE_ATTRS = ("RemoteUserCpu", "RemoteSysCpu", "ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage",
                "CpusUsage")


@dataclass
class Claim:
    """One claimed slot and the job on it: the shadow's state."""

    claim_id: str
    startd: str
    slot: str
    owner: str
    slot_ad: dict[str, Any]
    worklife_end: float  # time.time() after which the claim is not reused
    state: str = IDLE
    job: tuple[int, int] | None = None
    stopping: bool = False  # the job is being stopped for a Hold or Remove
    last_alive: float = field(default_factory=time.monotonic)  # last time the startd vouched for it
    buffered: list[dict[str, Any]] = field(default_factory=list)  # reports that beat the activation
    jobs_run: int = 0
    in_reports: bool = False  # the startd takes this claim's next activations in JobReports answers
    reply_sent: float = 0.0  # monotonic time claim.job's activation went out in a JobReports answer
    _slot_ad_wire: bytes | None = field(default=None, repr=False)  # slot_ad encoded once: it never changes

    def record(self) -> bytes:
        # Written at every job start and end: the slot ad, the bulk of it, is encoded only once.
        if self._slot_ad_wire is None:
            self._slot_ad_wire = wire.encode(self.slot_ad)
        return msgpack.packb(
            {
                "claim_id": self.claim_id, "startd": self.startd, "slot": self.slot, "owner": self.owner,
                "slot_ad": self._slot_ad_wire, "worklife_end": self.worklife_end,
                "job": list(self.job) if self.job else None, "jobs_run": self.jobs_run,
                "in_reports": self.in_reports,
            }
        )

    @classmethod
    def from_record(cls, blob: bytes) -> Claim:
        raw = msgpack.unpackb(blob)
        claim = cls(raw["claim_id"], raw["startd"], raw["slot"], raw["owner"], wire.decode(raw["slot_ad"]),
                    float(raw["worklife_end"]), jobs_run=int(raw.get("jobs_run", 0)),
                    in_reports=bool(raw.get("in_reports", False)))
        if raw.get("job"):
            claim.job = (int(raw["job"][0]), int(raw["job"][1]))
            claim.state = RUNNING_JOB
        return claim


class ShadowMixin:
    """The schedd's side of matching and running. Mixed in before `Agent`."""

    # Set by the schedd (configuration); these are the defaults.
    claim_worklife: float = 1200.0  # CLAIM_WORKLIFE
    lease_duration: float = 2400.0  # JOB_LEASE_DURATION: the claim lease given to RequestClaim
    shadow_call_timeout: float = 10.0

    # ------------------------------------------------------------------ state
    def _shadow_init(self) -> None:
        if getattr(self, "_claims", None) is not None:
            return
        # Knobs, unless the instance was given its own values (tests, in-process pools).
        cfg = Config.load(daemon="schedd")
        for attr, name in (("claim_worklife", "CLAIM_WORKLIFE"), ("lease_duration", "JOB_LEASE_DURATION"),
                           ("shadow_call_timeout", "SHADOW_CALL_TIMEOUT")):
            if attr not in vars(self):
                setattr(self, attr, float(cfg.get(name)))
        self._claims: dict[str, Claim] = {}
        self._by_job: dict[tuple[int, int], Claim] = {}
        self._reserved: set[tuple[int, int]] = set()  # matched jobs not running yet
        self._autoclusters = AutoClusters()
        self._ac_snapshot: dict[str, dict[int, deque[tuple[int, int]]]] = {}
        self._ac_pages: dict[str, list[tuple[int, dict[str, Any], list[tuple[int, int]]]]] = {}
        self._to_activate: dict[str, list[tuple[Claim, tuple[int, int]]]] = {}
        self._activation_flush: set[str] = set()
        self._claims_dirty: set[str] = set()
        self.shadow_stats = {"Matches": 0, "ClaimsRequested": 0, "ClaimsRefused": 0, "Activations": 0,
                             "ActivationBatches": 0, "ClaimReuses": 0, "ClaimsReleased": 0, "ClaimsLost": 0,
                             "ExitReports": 0, "ActivationsInAnswers": 0}

    # ------------------------------------------------------------------ lifecycle hooks
    async def setup(self) -> None:
        await super().setup()  # type: ignore[misc]
        self._shadow_init()
        self._load_claims()
        # A startd that restarts knows none of its predecessor's claims: hear its start event and
        # ask it about ours at once, so their jobs are requeued now rather than at the next round.
        channel = self._channel  # type: ignore[attr-defined]
        if channel is None:  # set up without a broker (unit tests)
            return
        starts = await channel.declare_queue(f"gridbus.starts.{self.address}", exclusive=True,  # type: ignore[attr-defined]
                                             arguments={"x-max-length": 1000, "x-overflow": "drop-head"})
        await starts.bind(bus.EVENTS, bus.event_key("daemon", "start", "startd"))
        await starts.consume(self._on_daemon_start, no_ack=True)

    async def _on_daemon_start(self, message: Any) -> None:
        try:
            body = wire.decode(message.body, message.content_type)
        except wire.DecodeError:
            return
        startd = body.get("address") if isinstance(body, dict) else None
        if not isinstance(startd, str) or startd == self.address:  # type: ignore[attr-defined]
            return
        if any(c.startd == startd and c.state != CLAIMING for c in self._claims.values()):
            self.log.info("%s restarted: asking it about our claims now", startd)  # type: ignore[attr-defined]
            self.spawn(self.check_leases(only=startd), "claims of a restarted startd")  # type: ignore[attr-defined]

    async def on_start(self) -> None:
        await super().on_start()  # type: ignore[misc]
        self._shadow_init()
        await self._reconcile_after_restart()
        self.spawn(self._alive_loop(), "claim-leases")  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ persistence
    def _db(self) -> Any:
        return self.queue.store.db  # type: ignore[attr-defined]

    def _load_claims(self) -> None:
        db = self._db()
        db.execute(_CLAIMS_TABLE)
        for cid, blob in db.execute("SELECT claim_id, record FROM shadow_claims").fetchall():
            try:
                claim = Claim.from_record(blob)
            except Exception:
                self.log.warning("dropping an unreadable claim record %s", cid)  # type: ignore[attr-defined]
                continue
            self._claims[claim.claim_id] = claim
            if claim.job:
                self._by_job[claim.job] = claim

    def _claim_changed(self, claim: Claim) -> None:
        self._claims_dirty.add(claim.claim_id)
        # One transaction for every change of this moment (an exit batch, a match batch), the job
        # queue's included.
        self.commit_soon()  # type: ignore[attr-defined]

    def take_claim_writes(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The claim rows changed since the last call, as (SQL, rows) for the schedd's commit
        (JobQueue.add_writes); a failed commit keeps them for its next attempt."""
        dirty = getattr(self, "_claims_dirty", None)
        if not dirty:
            return []
        self._claims_dirty = set()
        upserts = [(cid, self._claims[cid].record()) for cid in dirty if cid in self._claims]
        deletes = [(cid,) for cid in dirty if cid not in self._claims]
        writes: list[tuple[str, list[tuple[Any, ...]]]] = []
        if upserts:
            writes.append(("INSERT OR REPLACE INTO shadow_claims (claim_id, record) VALUES (?, ?)", upserts))
        if deletes:
            writes.append(("DELETE FROM shadow_claims WHERE claim_id = ?", deletes))
        return writes

    async def _reconcile_after_restart(self) -> None:
        """Jobs the queue says run but no claim carries go back to Idle; claims whose job is no
        longer running are freed for reuse."""
        for claim in list(self._claims.values()):
            job = claim.job
            if job is None:
                continue
            ad = self.queue.get(*job)  # type: ignore[attr-defined]
            if ad is None or ad.get("JobStatus") != RUNNING:
                self._by_job.pop(job, None)
                claim.job, claim.state = None, IDLE
                self._claim_changed(claim)
        for ad in list(self._running_ads()):
            key = (ad.get("ClusterId"), ad.get("ProcId"))
            if key not in self._by_job:
                await self.job_evicted(key[0], key[1], "the schedd restarted and holds no claim for the job")  # type: ignore[attr-defined]
        idle_claims = [c for c in self._claims.values() if c.job is None]
        for claim in idle_claims:
            self._start_next(claim)
        self._flush_activations_now()

    def _running_ads(self) -> list[dict[str, Any]]:
        out = []
        for p in self.queue.procs():  # type: ignore[attr-defined]
            if p.status in (RUNNING, SUSPENDED):
                out.append(self.queue.ad(p))  # type: ignore[attr-defined]
        return out

    # ------------------------------------------------------------------ negotiator -> schedd
    @method("scheduler")
    async def GetResourceRequests(self, call: Call, Owner: str, Limit: int, After: int,
                                  AutoClusterAttrs: list, WholeAds: bool) -> dict[str, Any]:
        self._shadow_init()
        if not Owner:
            raise invalid("GetResourceRequests: Owner must name the submitter whose requests are wanted")
        if Limit < 1:
            raise invalid(f"GetResourceRequests: Limit must be at least 1, got {Limit}")
        bad = next((a for a in AutoClusterAttrs if not isinstance(a, str) or not a), None)
        if bad is not None:
            raise invalid(f"GetResourceRequests: AutoClusterAttrs must be attribute names, got {bad!r}")
        groups = self._ac_pages.get(Owner)
        if After < 0 or groups is None:
            # The pool's slots read these job attributes: the requests carry them (a page after
            # the first keeps the grouping the first page was cut from).
            self._autoclusters.set_pool_attrs(None if WholeAds else AutoClusterAttrs)
            jobs = (j for j in self.queue.idle_jobs(Owner)  # type: ignore[attr-defined]
                    if (j.get("ClusterId"), j.get("ProcId")) not in self._reserved and not runs_on_submit_host(j))
            groups = self._autoclusters.group(jobs, owner=Owner)
            self._ac_pages[Owner] = groups
            self._ac_snapshot[Owner] = {acid: deque(ids) for acid, _ad, ids in groups}
        return {"Requests": self._autoclusters.page(groups, Limit, After)}

    @method("scheduler")
    async def Match(self, call: Call, Matches: list) -> dict[str, Any]:
        self._shadow_init()
        checked = []
        for i, m in enumerate(Matches):
            if not isinstance(m, dict):
                raise invalid(f"Match: Matches[{i}] must be a map, got {type(m).__name__}")
            for key, kind in (("AutoClusterId", int), ("ClaimId", str), ("Slot", str), ("Startd", str), ("SlotAd", dict)):
                if not isinstance(m.get(key), kind):
                    raise invalid(f"Match: Matches[{i}] needs {key} ({kind.__name__})")
            checked.append(m)
        accepted = 0
        for m in checked:
            job = self._take_matched_job(m["AutoClusterId"])
            if job is None:
                continue
            accepted += 1
            self._reserved.add(job)
            self.shadow_stats["Matches"] += 1
            self.spawn(self._claim_and_run(m, job), "claim")  # type: ignore[attr-defined]
        return {"Accepted": accepted}

    def _take_matched_job(self, acid: int) -> tuple[int, int] | None:
        for members in self._ac_snapshot.values():
            ids = members.get(acid)
            while ids:
                job = ids.popleft()
                if job in self._reserved or job in self._by_job:
                    continue
                ad = self.queue.get(*job)  # type: ignore[attr-defined]
                if ad is not None and ad.get("JobStatus") == 1:
                    return job
        return None

    async def _claim_and_run(self, match: dict[str, Any], job: tuple[int, int]) -> None:
        ad = self.queue.get(*job)  # type: ignore[attr-defined]
        if ad is None or ad.get("JobStatus") != 1:
            self._reserved.discard(job)
            return
        self.shadow_stats["ClaimsRequested"] += 1
        args = {"ClaimId": match["ClaimId"], "JobAd": ad, "Schedd": self.address,  # type: ignore[attr-defined]
                "LeaseDuration": int(self.lease_duration)}
        try:
            result = await self.client.call(match["Startd"], "RequestClaim", args, timeout=self.shadow_call_timeout)  # type: ignore[attr-defined]
        except CallTimeout:
            result = None
            # The startd may still grant the claim after we stopped waiting: release whatever it
            # grants, so the slot is never left Claimed by a schedd that forgot it.
            self.spawn(self._release_late_claim(match, args), "release a late claim")  # type: ignore[attr-defined]
        if result is None or not result.ok:
            self.shadow_stats["ClaimsRefused"] += 1
            self._reserved.discard(job)
            why = "no answer" if result is None else f"{result.text} (status {result.status})"
            self.log.info("claim of %s for job %d.%d refused: %s", match["Slot"], *job, why)  # type: ignore[attr-defined]
            return
        out = result.outArgs
        claim = Claim(
            claim_id=str(out.get("ClaimId") or match["ClaimId"]),
            startd=match["Startd"],
            slot=str(out.get("Slot") or match["Slot"]),
            owner=str(ad.get("Owner", "")),
            slot_ad=out.get("SlotAd") if isinstance(out.get("SlotAd"), dict) else match["SlotAd"],
            worklife_end=time.time() + self.claim_worklife,
            in_reports=out.get("ReportActivations") is True,
        )
        self._claims[claim.claim_id] = claim
        self._claim_changed(claim)
        self._activate(claim, job)
        self._flush_activations_now()

    async def _release_late_claim(self, match: dict[str, Any], args: dict[str, Any]) -> None:
        """Release the claim a timed-out RequestClaim may have made.

        RequestClaim is idempotent (the same claim id, or the same job on a partitionable slot,
        gets the same claim back), so asking again, patiently, names the claim the first call
        made, or makes one that is released just the same; ReleaseClaim of an ended claim is
        refused harmlessly. Tried for as long as the startd would keep the claim (the lease).
        """
        deadline = time.monotonic() + self.lease_duration
        while time.monotonic() < deadline:
            try:
                result = await self.client.call(match["Startd"], "RequestClaim", args,  # type: ignore[attr-defined]
                                                timeout=max(self.shadow_call_timeout, 60.0))
            except CallTimeout:
                continue
            except Exception:  # the broker is away: try again shortly
                await asyncio.sleep(1)
                continue
            if not result.ok:
                return  # refused: no claim was made (or it ended)
            claim_id = str(result.outArgs.get("ClaimId") or match["ClaimId"])
            if claim_id in self._claims:
                return  # claimed again meanwhile for another job of ours: in use, not stranded
            self.shadow_stats["ClaimsReleased"] += 1
            self.log.info("releasing the claim on %s granted after its request timed out",  # type: ignore[attr-defined]
                          result.outArgs.get("Slot") or match["Slot"])
            await self._call_startd(match["Startd"], "ReleaseClaim", {"ClaimId": claim_id})
            return

    # ------------------------------------------------------------------ activations
    def _activate(self, claim: Claim, job: tuple[int, int]) -> None:
        """Queue ``job`` for activation on ``claim``; sent in one ActivateClaims per startd."""
        claim.job, claim.state, claim.stopping = job, ACTIVATING, False
        self._reserved.add(job)
        self._by_job[job] = claim
        self._to_activate.setdefault(claim.startd, []).append((claim, job))

    def _flush_activations_now(self) -> None:
        for startd in list(self._to_activate):
            if startd not in self._activation_flush:
                self._activation_flush.add(startd)
                self.spawn(self._send_activations(startd), "activate")  # type: ignore[attr-defined]

    async def _send_activations(self, startd: str) -> None:
        self._activation_flush.discard(startd)
        batch = self._to_activate.pop(startd, [])
        if not batch:
            return
        activations = []
        live = []
        for claim, job in batch:
            if not self._activation_wanted(claim, job):
                continue
            ad = self.queue.get(*job)  # type: ignore[attr-defined]
            if ad is None or ad.get("JobStatus") != 1:
                self._job_left(claim, job)
                continue
            activations.append({"ClaimId": claim.claim_id, "JobAd": ad})
            live.append((claim, job))
        if not activations:
            self._flush_activations_now()  # the claims passed on to other jobs
            return
        self.shadow_stats["ActivationBatches"] += 1
        result = None
        try:
            result = await self.client.call(startd, "ActivateClaims", {"Activations": activations},  # type: ignore[attr-defined]
                                            timeout=self.shadow_call_timeout)
        except CallTimeout:
            pass
        except Exception as exc:  # the broker is away: no answer either, asked again
            self.log.info("ActivateClaims to %s failed: %r", startd, exc)  # type: ignore[attr-defined]
        statuses: dict[str, tuple[int, str]] = {}
        if result is not None and result.ok:
            for r in result.outArgs.get("Results", []):
                if isinstance(r, dict) and isinstance(r.get("ClaimId"), str):
                    statuses[r["ClaimId"]] = (int(r.get("Status", 7)), str(r.get("Text", "")))
        for claim, job in live:
            status, text = statuses.get(claim.claim_id, (7, "no answer" if result is None else result.text))
            try:
                await self._activation_result(claim, job, status, text, answered=result is not None)
            except Exception:
                # One job's bookkeeping failing must not leave the batch's other claims waiting
                # for an outcome that was already given.
                self.log.exception("activation outcome of job %d.%d on %s", *job, claim.slot)  # type: ignore[attr-defined]
        self._flush_activations_now()

    def _activation_wanted(self, claim: Claim, job: tuple[int, int]) -> bool:
        """Whether a queued activation still stands: the claim is ours and still waits to start
        that job (an entry queued twice, or for a claim lost meanwhile, is stale)."""
        return self._claims.get(claim.claim_id) is claim and claim.state == ACTIVATING and claim.job == job

    def _job_left(self, claim: Claim, job: tuple[int, int]) -> None:
        """The job chosen for ``claim`` is no longer idle (held or removed since it was matched):
        the claim goes to the owner's next idle job, or back to the startd; never left idle."""
        self._unreserve(claim, job)
        self._start_next(claim)

    async def _activation_result(self, claim: Claim, job: tuple[int, int], status: int, text: str, *, answered: bool) -> None:
        if not self._activation_wanted(claim, job):
            return  # an outcome already had (the answer and a retry both came), or a lost claim
        if not answered:
            self._retry_activation(claim, job)
            return
        if status == 0:
            ad = self.queue.get(*job)  # type: ignore[attr-defined]
            if ad is None or ad.get("JobStatus") != 1:
                await self._stop_unwanted_job(claim, job)
            else:
                await self._job_running(claim, job)
            return
        self.log.info("activation of job %d.%d on %s failed: %s", *job, claim.slot, text)  # type: ignore[attr-defined]
        self._unreserve(claim, job)
        if status == Status.FORBIDDEN:
            self._drop_claim(claim)  # the startd does not know the claim: it has ended
        else:
            self._release(claim)

    def _retry_activation(self, claim: Claim, job: tuple[int, int]) -> None:
        """No answer is no refusal: the startd may have started the job and its answer been lost,
        or not have read the call yet. ActivateClaims is idempotent (the job a claim runs is "OK"
        again), so it is asked again while the claim lives; only an explicit "claim unknown" or
        the end of the claim's lease (check_leases) ends the claim, and its job goes back."""
        self.log.info("no answer to the activation of job %d.%d on %s; asking again",  # type: ignore[attr-defined]
                      *job, claim.slot)
        claim.reply_sent = 0.0
        self._to_activate.setdefault(claim.startd, []).append((claim, job))
        # The call waited its timeout already; a pause only keeps a failing broker from a busy loop.
        asyncio.get_running_loop().call_later(min(1.0, self.shadow_call_timeout), self._flush_activations_now)

    async def _stop_unwanted_job(self, claim: Claim, job: tuple[int, int]) -> None:
        """The startd started a job held or removed since its activation went out: it is stopped
        as a Hold or Remove stops a running job (its exit report frees the claim for the next
        job), and the job is not marked Running."""
        self.log.info("job %d.%d started on %s after it left the Idle state: stopping it",  # type: ignore[attr-defined]
                      *job, claim.slot)
        self._reserved.discard(job)
        claim.state, claim.stopping = RUNNING_JOB, True
        claim.jobs_run += 1
        self._claim_changed(claim)
        buffered, claim.buffered = claim.buffered, []
        for report in buffered:
            await self._handle_report(claim, report)
        if claim.job == job and claim.state == RUNNING_JOB:
            self.spawn(self._call_startd(claim.startd, "DeactivateClaim",  # type: ignore[attr-defined]
                                         {"ClaimId": claim.claim_id, "Graceful": True}), "stop-job")

    def _unreserve(self, claim: Claim, job: tuple[int, int]) -> None:
        self._reserved.discard(job)
        if self._by_job.get(job) is claim:
            del self._by_job[job]
        if claim.job == job:
            claim.job, claim.state = None, IDLE
            claim.buffered.clear()

    async def _job_running(self, claim: Claim, job: tuple[int, int]) -> None:
        self.shadow_stats["Activations"] += 1
        claim.state = RUNNING_JOB
        claim.jobs_run += 1
        self._reserved.discard(job)
        await self.job_started(job[0], job[1], remote_host=claim.slot, slot=claim.slot, claim_id=claim.claim_id)  # type: ignore[attr-defined]
        self._claim_changed(claim)
        buffered, claim.buffered = claim.buffered, []
        for report in buffered:
            await self._handle_report(claim, report)
        self._flush_activations_now()

    # ------------------------------------------------------------------ startd -> schedd
    @method("scheduler")
    async def JobReports(self, call: Call, Reports: list) -> dict[str, Any]:
        self._shadow_init()
        unknown: list[str] = []
        for i, report in enumerate(Reports):
            if not isinstance(report, dict) or not isinstance(report.get("ClaimId"), str):
                raise invalid(f"JobReports: Reports[{i}] must be a map with a ClaimId")
        now = time.monotonic()
        callers: set[str] = set()  # startds that take activations in this answer
        resend: list[Claim] = []
        for report in Reports:
            claim = self._claims.get(report["ClaimId"])
            if claim is None:
                unknown.append(report["ClaimId"])
                continue
            claim.last_alive = now
            if claim.in_reports:
                callers.add(claim.startd)
            job = _job_of(report)
            if report.get("Event") == "activated":
                await self._activation_reported(claim, report)
                continue
            if claim.state == ACTIVATING and job == claim.job:
                claim.buffered.append(report)  # the activation's answer is still on its way
                continue
            if claim.state == ACTIVATING and claim.reply_sent and report.get("Event") == "exit" and job != claim.job:
                # A repeated exit report of the claim's previous job: the startd never got the
                # answer that carried the next activation, so it goes again in this one.
                resend.append(claim)
            await self._handle_report(claim, report)
        out: dict[str, Any] = {"Unknown": unknown}
        activations = self._activations_for_answer(callers, resend)
        if activations:
            out["Activations"] = activations
        # The rest of the next jobs chosen for this batch go out in one ActivateClaims per startd.
        self._flush_activations_now()
        return out

    def _activations_for_answer(self, callers: set[str], resend: list[Claim]) -> list[dict[str, Any]]:
        """Claim reuse with no round trip of its own: the next activations of the calling startd's
        claims ride in its JobReports answer; the startd reports each as an ``activated`` report."""
        out: list[dict[str, Any]] = []
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        for claim in resend:
            if claim.state == ACTIVATING and claim.job is not None and claim.reply_sent:
                ad = self.queue.get(*claim.job)  # type: ignore[attr-defined]
                if ad is not None and ad.get("JobStatus") == 1:
                    out.append({"ClaimId": claim.claim_id, "JobAd": ad})
        for startd in callers:
            batch = self._to_activate.get(startd)
            if not batch:
                continue
            rest = []
            left = []
            for claim, job in batch:
                if not claim.in_reports:
                    rest.append((claim, job))
                    continue
                if not self._activation_wanted(claim, job):
                    continue
                ad = self.queue.get(*job)  # type: ignore[attr-defined]
                if ad is None or ad.get("JobStatus") != 1:
                    left.append((claim, job))
                    continue
                out.append({"ClaimId": claim.claim_id, "JobAd": ad})
                claim.reply_sent = now
                self.shadow_stats["ActivationsInAnswers"] += 1
                # Should the answer never reach the startd, the activation goes by ActivateClaims.
                loop.call_later(self.shadow_call_timeout, self._answer_activation_lost, claim, job, now)
            if rest:
                self._to_activate[startd] = rest
            else:
                del self._to_activate[startd]
            for claim, job in left:  # their claims' next jobs go by ActivateClaims (the caller flushes)
                self._job_left(claim, job)
        return out

    def _answer_activation_lost(self, claim: Claim, job: tuple[int, int], sent: float) -> None:
        if self._claims.get(claim.claim_id) is not claim or claim.state != ACTIVATING:
            return
        if claim.job != job or claim.reply_sent != sent:
            return
        self.log.info("no word on activation of job %d.%d on %s sent in a JobReports answer; sending ActivateClaims",  # type: ignore[attr-defined]
                      *job, claim.slot)
        claim.reply_sent = 0.0
        self._to_activate.setdefault(claim.startd, []).append((claim, job))
        self._flush_activations_now()

    async def _activation_reported(self, claim: Claim, report: dict[str, Any]) -> None:
        """The startd's outcome of an activation sent in a JobReports answer."""
        job = _job_of(report)
        if claim.state != ACTIVATING or job is None or job != claim.job:
            return  # a repeated outcome, or one of a job the claim has moved past
        claim.reply_sent = 0.0
        status = report.get("Status")
        await self._activation_result(claim, job, status if isinstance(status, int) else Status.EXCEPTION,
                                      str(report.get("Text", "")), answered=True)

    async def _handle_report(self, claim: Claim, report: dict[str, Any]) -> None:
        job = _job_of(report)
        event = report.get("Event")
        if job is None or job != claim.job:
            return  # a repeated report of a job the claim has moved past
        if event == "usage":
            attrs = {k: report[k] for k in _USAGE_ATTRS if k in report}
            if attrs and not claim.stopping:
                await self.job_update(job[0], job[1], attrs)  # type: ignore[attr-defined]
        elif event == "exit":
            self.shadow_stats["ExitReports"] += 1
            ad = self.queue.get(*job)  # type: ignore[attr-defined]
            if not claim.stopping and ad is not None and ad.get("JobStatus") in (RUNNING, SUSPENDED):
                if report.get("Evicted"):
                    # The startd stopped the job on its own (lease, drain, vacate, shutdown): the
                    # job did not finish, it goes back to Idle to run again; never a completion.
                    why = f"evicted by {claim.startd} ({report.get('EvictReason') or 'no reason given'})"
                    await self.job_evicted(job[0], job[1], why)  # type: ignore[attr-defined]
                else:
                    await self.job_exited(job[0], job[1], report)  # type: ignore[attr-defined]
            self._by_job.pop(job, None)
            claim.job, claim.state, claim.stopping = None, IDLE, False
            self._claim_changed(claim)
            if report.get("ClaimEnded"):
                self._drop_claim(claim)  # the startd ended the claim with the job: nothing more runs on it
            else:
                self._start_next(claim)

    def _start_next(self, claim: Claim) -> None:
        """Claim reuse: the owner's next idle job that matches the slot, at once; else release."""
        if time.time() >= claim.worklife_end:
            self._release(claim)
            return
        for ad in self.queue.idle_jobs(claim.owner):  # type: ignore[attr-defined]
            job = (ad.get("ClusterId"), ad.get("ProcId"))
            if job in self._reserved or job in self._by_job or runs_on_submit_host(ad):
                continue
            if classad.symmetric_match(ad, claim.slot_ad):
                self.shadow_stats["ClaimReuses"] += 1
                self._activate(claim, job)  # type: ignore[arg-type]
                return
        self._release(claim)

    def _release(self, claim: Claim) -> None:
        self._drop_claim(claim)
        self.shadow_stats["ClaimsReleased"] += 1
        self.spawn(self._call_startd(claim.startd, "ReleaseClaim", {"ClaimId": claim.claim_id}), "release")  # type: ignore[attr-defined]

    def _drop_claim(self, claim: Claim) -> None:
        self._claims.pop(claim.claim_id, None)
        if claim.job is not None and self._by_job.get(claim.job) is claim:
            del self._by_job[claim.job]
        self._claim_changed(claim)

    async def _call_startd(self, startd: str, method_name: str, args: dict[str, Any]) -> Any:
        try:
            result = await self.client.call(startd, method_name, args, timeout=self.shadow_call_timeout)  # type: ignore[attr-defined]
        except CallTimeout:
            self.log.info("%s did not answer %s", startd, method_name)  # type: ignore[attr-defined]
            return None
        if not result.ok:
            self.log.info("%s refused %s: %s", startd, method_name, result.text)  # type: ignore[attr-defined]
        return result

    # ------------------------------------------------------------------ Hold / Remove
    async def stop_running_job(self, cluster: int, proc: int) -> bool:
        """Stop a running job for a Hold or Remove: deactivate its claim (the claim stays, and is
        reused when the startd reports the job gone). Returns False if no claim runs the job."""
        self._shadow_init()
        claim = self._by_job.get((cluster, proc))
        if claim is None:
            return False
        claim.stopping = True
        if claim.state == ACTIVATING:
            # The activation's outcome finds the job no longer idle: the claim passes to the next
            # job, or, should the startd have started it, the job is stopped (_stop_unwanted_job).
            return True
        await self._call_startd(claim.startd, "DeactivateClaim", {"ClaimId": claim.claim_id, "Graceful": True})
        return True

    async def call_job_claim(self, cluster: int, proc: int, method_name: str, args: dict[str, Any] | None = None) -> Any:
        """Call a startd method on the claim that runs a job (SuspendClaim, ContinueClaim,
        DeactivateClaim for Suspend, Continue, Vacate); None if no claim runs it."""
        self._shadow_init()
        claim = self._by_job.get((cluster, proc))
        if claim is None or claim.state != RUNNING_JOB:
            return None
        return await self._call_startd(claim.startd, method_name, {"ClaimId": claim.claim_id, **(args or {})})

    # ------------------------------------------------------------------ leases
    async def _alive_loop(self) -> None:
        while True:
            await asyncio.sleep(max(0.2, self.lease_duration / 3))
            try:
                await self.check_leases()
            except Exception:
                self.log.exception("lease check failed")  # type: ignore[attr-defined]

    async def check_leases(self, only: str | None = None) -> None:
        """One round of Alive calls (one per startd, or to ``only``), then drop the claims whose
        lease ran out."""
        by_startd: dict[str, list[Claim]] = {}
        for claim in self._claims.values():
            if claim.state != CLAIMING and only in (None, claim.startd):
                by_startd.setdefault(claim.startd, []).append(claim)
        answers = await asyncio.gather(
            *(self._call_startd(s, "Alive", {"ClaimIds": [c.claim_id for c in cs]}) for s, cs in by_startd.items())
        )
        now = time.monotonic()
        for (_startd, claims), result in zip(by_startd.items(), answers, strict=True):
            if result is None or not result.ok:
                continue
            unknown = set(result.outArgs.get("Unknown", []))
            for claim in claims:
                if claim.claim_id in unknown:
                    await self._claim_lost(claim, "the startd no longer knows the claim")
                else:
                    claim.last_alive = now
        for claim in list(self._claims.values()):
            if now - claim.last_alive > self.lease_duration:
                await self._claim_lost(claim, f"the claim lease ({self.lease_duration:g} s) ran out")

    async def _claim_lost(self, claim: Claim, why: str) -> None:
        if self._claims.get(claim.claim_id) is not claim:
            return
        self.shadow_stats["ClaimsLost"] += 1
        job = claim.job
        self._drop_claim(claim)
        if job is None:
            return
        self._reserved.discard(job)
        ad = self.queue.get(*job)  # type: ignore[attr-defined]
        if ad is not None and ad.get("JobStatus") in (RUNNING, SUSPENDED):
            await self.job_evicted(job[0], job[1], f"claim on {claim.slot} lost: {why}")  # type: ignore[attr-defined]

    def shadow_statistics(self) -> dict[str, Any]:
        self._shadow_init()
        return {**self.shadow_stats, "Claims": len(self._claims), "JobsRunningOnClaims": len(self._by_job)}


def _job_of(report: dict[str, Any]) -> tuple[int, int] | None:
    c, p = report.get("ClusterId"), report.get("ProcId")
    if isinstance(c, int) and isinstance(p, int):
        return (c, p)
    return None
