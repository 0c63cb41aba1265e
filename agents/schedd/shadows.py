"""The shadows: a job's life on a claim, from its activation to its exit report, and the claim's
reuse for the owner's next job.

(One module over 500 lines: a job's life on a claim, activation to exit and reuse, reads as one sequence.)

HTCondor runs a condor_shadow process per running job; here a shadow is a `Claim` record
(claims.py) and this object's coroutines on the schedd's loop. The protocol is
docs/protocols.md, "Claiming and running":

- A matched or reused claim's next job is queued for activation (`activate`) and sent in one
  ActivateClaims per startd for the whole batch, or, for a startd whose RequestClaim answered
  ReportActivations, in the answer to its JobReports call (`activations_for_answer`, no round
  trip of its own), whose outcome comes back as an ``activated`` report.
- A report (`handle_report`) applies usage and exits to the job (the job state, jobstate.py);
  on an exit the claim is reused at once for the owner's next idle job that fits the slot
  (`start_next`), until CLAIM_WORKLIFE ends; then it is released.
- A job held or removed between its match and its start does not strand its claim: the claim goes
  to the owner's next idle job or back to the startd (and a job the startd started meanwhile is
  stopped, keeping its hold). An unanswered activation is asked again, never taken for a refusal.
- Prefetch (CLAIM_PREFETCH_JOBS): a claim whose last job was short gets the owner's next jobs
  queued ahead on the startd, in the JobReports answers (`ahead_for_answer`), so the startd starts
  the next one the moment a job exits and reports both in one call. A job queued ahead stays Idle
  and reserved here until the startd's ``activated`` report (marked Ahead) says it started
  (`activation_reported`): only then is it Running on the claim, with its execute event. A job
  held, removed or edited while queued ahead is withdrawn (`WithdrawActivation`; one the startd started
  meanwhile is stopped as above). An exit with no start behind it in the same call means the
  startd holds none of them: they go back to the idle jobs and the claim is reused as before
  (`settle_awaiting`); a claim that ends returns them too (Claims.drop).

The endpoints that feed it are negotiation.py (GetResourceRequests, Match) and reports.py
(JobReports); leases.py ends the claims whose startd went silent. A self-checkpointing job's run
that exits with its checkpoint code is started again on its claim (`restart_in_place`; its
checkpoint is checkpoints.py's).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from gridbus import classad
from gridbus.agents.schedd import matchexp
from gridbus.agents.schedd.checkpoints import Checkpointing
from gridbus.agents.schedd.claims import (
    ACTIVATING,
    RUNNING_JOB,
    Claim,
    Claims,
    Spawn,
    deactivation,
)
from gridbus.agents.schedd.commits import QueueClosed
from gridbus.agents.schedd.jobattrs import JobStatus, runs_on_submit_host
from gridbus.agents.schedd.jobqueue import IDLE as IDLE_JOB
from gridbus.agents.schedd.jobqueue import Cluster, JobQueue
from gridbus.agents.schedd.limits import RunningLimit
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.rpc import CallTimeout
from gridbus.status import Status

log = logging.getLogger("gridbus.schedd.shadows")

RUNNING = int(JobStatus.RUNNING)
COMPLETED = int(JobStatus.COMPLETED)
SUSPENDED = int(JobStatus.SUSPENDED)  # still on its claim, its processes frozen

FITS_TTL = 60.0  # seconds a claim keeps whether a cluster's plain procs fit its slot
FITS_KEPT = 1000  # such answers a claim keeps at most

_USAGE_ATTRS = ("RemoteUserCpu", "RemoteSysCpu", "ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage",
                "CpusUsage")


class JobStateCalls(Protocol):
    """What the shadows tell the job state (jobstate.py) of a job's run."""

    async def job_started(self, cluster: int, proc: int, *, remote_host: str, slot: str, claim_id: str) -> None: ...
    async def job_exited(self, cluster: int, proc: int, report: dict[str, Any]) -> None: ...
    async def job_evicted(self, cluster: int, proc: int, reason: str) -> None: ...
    async def job_update(self, cluster: int, proc: int, attrs: dict[str, Any]) -> None: ...
    async def job_report_failed(self, cluster: int, proc: int, reason: str) -> None: ...
    def job_not_startable(self, cluster: int, proc: int, reason: str, code: int) -> None: ...


class Shadows:
    def __init__(self, queue: JobQueue, claims: Claims, state: JobStateCalls, spawn: Spawn,
                 settings: ScheddSettings):
        self.queue = queue
        self.claims = claims
        self.state = state
        self._spawn = spawn
        self.settings = settings
        self.running_limit = RunningLimit(settings)  # MAX_JOBS_RUNNING (Negotiation asks it too)
        self._to_activate: dict[str, list[tuple[Claim, tuple[int, int]]]] = {}
        self._activation_flush: set[str] = set()
        # Claims whose job exited with jobs queued ahead: settled once the call that reported the
        # exit is applied (a start behind the exit comes in the same call).
        self._awaiting: dict[str, Claim] = {}
        # Claims read back at a restart idle with jobs queued ahead, until their startd reports.
        self._recovering: dict[str, Claim] = {}
        # Gives activation entries their small input sandboxes (inline_sandboxes.py), if set.
        self.attach_inline: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None
        self.checkpoints: Checkpointing | None = None  # self-checkpointing jobs; set by the schedd

    # ------------------------------------------------------------------ after a restart
    async def reconcile_after_restart(self) -> None:
        """Jobs the queue says run but no claim carries go back to Idle; claims whose job is no
        longer running are freed for reuse. What the startds did while the schedd was away is
        learnt from them, never guessed: an activation that had gone out is asked again as a
        repeat (the startd answers for the job it ran rather than running it twice), and a claim
        whose job exited with jobs queued ahead waits for the startd's reports, which it sends
        again until answered (`heard`), to say whether it started one."""
        for claim in list(self.claims.by_id.values()):
            job = claim.job
            if job is None:
                continue
            status = self.queue.status(*job)
            if claim.recovered_activation and status == IDLE_JOB:
                self._ask_again_after_restart(claim, job)
            elif status != RUNNING:
                self.claims.job_ended(claim)
            elif claim.restarting:  # its restart after a checkpoint, asked again (a repeat runs it once)
                self._to_activate.setdefault(claim.startd, []).append((claim, job))
            claim.recovered_activation = ""
        for ad in list(self._running_ads()):
            key = (int(ad["ClusterId"]), int(ad["ProcId"]))  # (a queue's ad always has both)
            if key not in self.claims.by_job:
                await self.state.job_evicted(key[0], key[1], "the schedd restarted and holds no claim for the job")
        for claim in list(self.claims.by_id.values()):
            for _seq, job in list(claim.ahead):
                if self.queue.status(*job) != IDLE_JOB:
                    self.claims.withdraw_ahead(job)
        idle_claims = [c for c in self.claims.by_id.values() if c.job is None]
        for claim in idle_claims:
            if claim.ahead:
                # Its job's exit was written before the start behind it (the startd starts the
                # next one the moment a job exits, and reports both in one call, sent again
                # until answered): settled when that call comes, else as unknown.
                self._recovering[claim.claim_id] = claim
            else:
                self.start_next(claim)
        if self._recovering:
            asyncio.get_running_loop().call_later(self.settings.shadow_call_timeout, self._not_heard)
        self.flush_activations_now()

    def _ask_again_after_restart(self, claim: Claim, job: tuple[int, int]) -> None:
        """``job``'s activation went out before the restart (its claim written first), its outcome
        unknown: asked again, marked a repeat. One that rode in a JobReports answer is answered by
        the startd's next reports (the outcome, or the report the answer was for, sent again),
        and by ActivateClaims only if they do not come."""
        self.claims.reserve(job)
        claim.asked = True
        if claim.recovered_activation == "answer":
            now = time.monotonic()
            claim.reply_sent = now
            asyncio.get_running_loop().call_later(self.settings.shadow_call_timeout, self._answer_activation_lost,
                                                  claim, job, now)
        else:
            self._to_activate.setdefault(claim.startd, []).append((claim, job))

    def heard(self, claim: Claim) -> None:
        """``claim`` reported (JobReports): one read back idle with jobs queued ahead is settled
        with the call's other changes, by whether a start of one of them was among them."""
        if self._recovering.pop(claim.claim_id, None) is not None and claim.job is None and claim.ahead:
            self._awaiting[claim.claim_id] = claim

    def _not_heard(self) -> None:
        """Claims read back idle with jobs queued ahead whose startd sent no report since: what it
        does with its queue is not known, so the claim goes back (its queue with it) and those
        jobs are Idle again."""
        recovering, self._recovering = self._recovering, {}
        for claim in recovering.values():
            if self.claims.by_id.get(claim.claim_id) is claim and claim.job is None:
                log.info("no report on %s since the restart: releasing it and its %d jobs queued ahead",
                         claim.slot, len(claim.ahead))
                self.claims.release(claim)

    def _running_ads(self) -> list[dict[str, Any]]:
        out = []
        for p in self.queue.procs():
            if p.status in (RUNNING, SUSPENDED):
                out.append(self.queue.ad(p))
        return out

    # ------------------------------------------------------------------ activations
    def activate(self, claim: Claim, job: tuple[int, int]) -> None:
        """Queue ``job`` for activation on ``claim``; sent in one ActivateClaims per startd."""
        self.claims.assign(claim, job)  # on disk before the activation goes out (_send_activations)
        self._to_activate.setdefault(claim.startd, []).append((claim, job))

    def flush_activations_now(self) -> None:
        for startd in list(self._to_activate):
            if startd not in self._activation_flush:
                self._activation_flush.add(startd)
                self._spawn(self._send_activations(startd), "activate")

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
            ad = self._idle_ad_for(claim, job)
            if ad is None:
                self._job_left(claim, job)
                continue
            activations.append(self._activation_entry(claim, ad))
            live.append((claim, job))
        if not activations:
            self.settle_awaiting()
            self.flush_activations_now()  # the claims passed on to other jobs
            return
        self.claims.stats["ActivationBatches"] += 1
        # The claims as they are now (each waiting for its job's outcome) are on disk before the
        # startd may start a job: a schedd that dies after sending asks again as a repeat when
        # it comes back, rather than taking the job for Idle and running it a second time.
        pending: list[Awaitable[None]] = [self.claims.commits.now()]
        if self.attach_inline is not None:
            pending.append(self.attach_inline(activations))
        try:
            await asyncio.gather(*pending)
        except QueueClosed:
            return  # the schedd stops: nothing more starts
        except Exception as exc:  # (its disk failed): not sent, tried again
            log.warning("activations for %s not sent: the claims could not be written first (%r)", startd, exc)
            self._to_activate.setdefault(startd, []).extend(live)
            asyncio.get_running_loop().call_later(1.0, self.flush_activations_now)
            return
        result = None
        try:
            result = await self.claims.call(startd, "ActivateClaims", {"Activations": activations},
                                            timeout=self.settings.shadow_call_timeout)
        except CallTimeout:
            pass
        except Exception as exc:  # the broker is away: no answer either, asked again
            log.info("ActivateClaims to %s failed: %r", startd, exc)
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
                log.exception("activation outcome of job %d.%d on %s", *job, claim.slot)
        self.settle_awaiting()
        self.flush_activations_now()

    def _idle_ad_for(self, claim: Claim, job: tuple[int, int]) -> dict[str, Any] | None:
        """The ad ``job`` goes to ``claim``'s slot with, or None if it is no longer idle: its
        ``$$()`` expanded for that slot (matchexp.py; what was looked up is kept in the job), or,
        when one cannot be, the job held and None."""
        p = self.queue.proc(*job)
        if p is None or p.status != (RUNNING if claim.restarting else IDLE_JOB):
            return None
        ad = self.queue.ad(p)
        if not p.cluster.match_macros and not (p.attrs and matchexp.needs_expansion(p.attrs)):
            return ad
        try:
            changes = matchexp.expand(ad, claim.slot_ad)
        except matchexp.CannotExpand as exc:
            log.info("holding job %d.%d: %s (slot %s)", *job, exc.reason, claim.slot)
            self.state.job_not_startable(job[0], job[1], exc.reason, matchexp.HOLD_CODE)
            return None
        self.queue.update(p, {k: v for k, v in changes.items() if k.upper().startswith("MATCH_")})
        return {**ad, **changes}

    @staticmethod
    def _activation_entry(claim: Claim, ad: dict[str, Any]) -> dict[str, Any]:
        """claim.job's activation as ActivateClaims (or a JobReports answer) carries it. Sent again
        (its answer never came) it says ``Repeat``: the startd, whose job may have run and exited
        already, then answers as before rather than running the job a second time."""
        entry: dict[str, Any] = {"ClaimId": claim.claim_id, "JobAd": ad}
        if claim.asked:
            entry["Repeat"] = True
        claim.asked = True
        return entry

    def _activation_wanted(self, claim: Claim, job: tuple[int, int]) -> bool:
        """Whether a queued activation still stands: the claim is ours and still waits to start
        that job (an entry queued twice, or for a claim lost meanwhile, is stale)."""
        return self.claims.by_id.get(claim.claim_id) is claim and claim.state == ACTIVATING and claim.job == job

    def _job_left(self, claim: Claim, job: tuple[int, int]) -> None:
        """The job chosen for ``claim`` is no longer idle (held or removed since it was matched):
        the claim goes to the owner's next idle job, or back to the startd; never left idle."""
        self.claims.free(claim, job)
        self.start_next(claim)

    async def _activation_result(self, claim: Claim, job: tuple[int, int], status: int, text: str, *, answered: bool) -> None:
        if not self._activation_wanted(claim, job):
            return  # an outcome already had (the answer and a retry both came), or a lost claim
        if not answered:
            self._retry_activation(claim, job)
            return
        if status == 0:
            if self.queue.status(*job) != (RUNNING if claim.restarting else 1):
                await self._stop_unwanted_job(claim, job)
            else:
                await self._job_running(claim, job)
            return
        log.info("activation of job %d.%d on %s failed: %s", *job, claim.slot, text)
        if claim.restarting:  # still Running after its checkpoint: it runs again elsewhere, from it
            claim.restarting = False
            await self.state.job_evicted(job[0], job[1], f"{claim.slot} did not start it again after its checkpoint: {text}")
        self.claims.free(claim, job)
        if status == Status.FORBIDDEN:
            self.claims.drop(claim)  # the startd does not know the claim: it has ended
        else:
            self.claims.release(claim)

    def _retry_activation(self, claim: Claim, job: tuple[int, int]) -> None:
        """No answer is no refusal: the startd may have started the job and its answer been lost,
        or not have read the call yet. ActivateClaims is idempotent (the job a claim runs is "OK"
        again), so it is asked again while the claim lives; only an explicit "claim unknown" or
        the end of the claim's lease (check_leases) ends the claim, and its job goes back."""
        log.info("no answer to the activation of job %d.%d on %s; asking again",
                      *job, claim.slot)
        claim.reply_sent = 0.0
        self._to_activate.setdefault(claim.startd, []).append((claim, job))
        # The call waited its timeout already; a pause only keeps a failing broker from a busy loop.
        asyncio.get_running_loop().call_later(min(1.0, self.settings.shadow_call_timeout), self.flush_activations_now)

    async def _stop_unwanted_job(self, claim: Claim, job: tuple[int, int]) -> None:
        """The startd started a job held or removed since its activation went out: it is stopped
        as a Hold or Remove stops a running job (its exit report frees the claim for the next
        job), and the job is not marked Running."""
        log.info("job %d.%d started on %s after it left the Idle state: stopping it",
                      *job, claim.slot)
        self.claims.running(claim, job, stopping=True)
        await self._apply_buffered(claim)
        if claim.job == job and claim.state == RUNNING_JOB:
            self._spawn(self.claims.call_startd(claim.startd, "DeactivateClaim",
                                                deactivation(claim, job, graceful=True)), "stop-job")

    async def _job_running(self, claim: Claim, job: tuple[int, int]) -> None:
        self.claims.stats["Activations"] += 1
        claim.started_at = time.monotonic()
        restarted, claim.restarting = claim.restarting, False
        self.claims.running(claim, job)
        if not restarted:  # (after a checkpoint, in place: the same run, as HTCondor counts them)
            await self.state.job_started(job[0], job[1], remote_host=claim.slot, slot=claim.slot, claim_id=claim.claim_id)
        await self._apply_buffered(claim)
        self.flush_activations_now()

    async def _apply_buffered(self, claim: Claim) -> None:
        """The claim's reports that came before its activation's outcome, applied in their order
        now that it is known: its job's (execute, exit), then any start of a job queued ahead
        behind that exit (see Reports._take_report)."""
        buffered, claim.buffered = claim.buffered, []
        for report in buffered:
            if report.get("Event") == "activated":
                await self.activation_reported(claim, report)
            else:
                await self.handle_report(claim, report)

    def activations_for_answer(self, callers: set[str], resend: list[Claim]) -> list[dict[str, Any]]:
        """Claim reuse with no round trip of its own: the next activations of the calling startd's
        claims ride in its JobReports answer; the startd reports each as an ``activated`` report."""
        out: list[dict[str, Any]] = []
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        for claim in resend:
            if claim.state == ACTIVATING and claim.job is not None and claim.reply_sent:
                ad = self._idle_ad_for(claim, claim.job)
                if ad is not None:
                    out.append(self._activation_entry(claim, ad))
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
                ad = self._idle_ad_for(claim, job)
                if ad is None:
                    left.append((claim, job))
                    continue
                out.append(self._activation_entry(claim, ad))
                claim.reply_sent = now
                self.claims.stats["ActivationsInAnswers"] += 1
                # Should the answer never reach the startd, the activation goes by ActivateClaims.
                loop.call_later(self.settings.shadow_call_timeout, self._answer_activation_lost, claim, job, now)
            if rest:
                self._to_activate[startd] = rest
            else:
                del self._to_activate[startd]
            for claim, job in left:  # their claims' next jobs go by ActivateClaims (the caller flushes)
                self._job_left(claim, job)
        return out

    def _answer_activation_lost(self, claim: Claim, job: tuple[int, int], sent: float) -> None:
        if self.claims.by_id.get(claim.claim_id) is not claim or claim.state != ACTIVATING:
            return
        if claim.job != job or claim.reply_sent != sent:
            return
        log.info("no word on activation of job %d.%d on %s sent in a JobReports answer; sending ActivateClaims",
                      *job, claim.slot)
        claim.reply_sent = 0.0
        self._to_activate.setdefault(claim.startd, []).append((claim, job))
        self.flush_activations_now()

    async def activation_reported(self, claim: Claim, report: dict[str, Any]) -> None:
        """The startd's outcome of an activation sent in a JobReports answer, or of its start of
        a job queued ahead (marked Ahead)."""
        job = job_of(report)
        if report.get("Ahead") is True and job is not None:
            await self._ahead_started(claim, job, report)
            return
        if claim.state != ACTIVATING or job is None or job != claim.job:
            return  # a repeated outcome, or one of a job the claim has moved past
        claim.reply_sent = 0.0
        status = report.get("Status")
        await self._activation_result(claim, job, status if isinstance(status, int) else Status.EXCEPTION,
                                      str(report.get("Text", "")), answered=True)

    async def _ahead_started(self, claim: Claim, job: tuple[int, int], report: dict[str, Any]) -> None:
        """The startd started (or refused) ``job``, queued ahead on ``claim``, as the claim's job
        exited: it becomes the claim's job, as an activation's outcome would make it."""
        status = report.get("Status")
        status = status if isinstance(status, int) else Status.EXCEPTION
        if self.claims.ahead_of.get(job) is not claim or claim.job is not None:
            if job in claim.recent_starts or self._start_applied(claim, job):
                return  # a repeated report of a start already applied (a retried call)
            # (a job no longer in the queue: most likely ended, its start sent again after a restart)
            (log.warning if self.queue.status(*job) is not None else log.info)(
                "%s started job %d.%d on %s, which was not queued ahead there; stopping it",
                claim.startd, *job, claim.slot)
            if status == 0:
                self._spawn(self.claims.call_startd(claim.startd, "DeactivateClaim",
                                                    deactivation(claim, job, graceful=False)), "stop-job")
            return
        # The entries before it were passed over by the startd (withdrawn there): Idle again.
        while claim.ahead and claim.ahead[0][1] != job:
            _seq, skipped = claim.ahead[0]
            self.claims.unqueue(claim, skipped)
            self.claims.unreserve(skipped)
        self.claims.unqueue(claim, job)
        claim.recent_starts.append(job)
        self._awaiting.pop(claim.claim_id, None)
        self.claims.stats["AheadStarts"] += 1
        self.claims.assign(claim, job, ahead_start=True)
        await self._activation_result(claim, job, status, str(report.get("Text", "")), answered=True)

    def _start_applied(self, claim: Claim, job: tuple[int, int]) -> bool:
        """Whether a start of ``job`` reported on ``claim`` was applied already, as far as the
        queue tells (a restarted schedd knows no claim's recent starts: the startd sends again
        the reports of a call whose answer the crash took, their changes on disk already)."""
        return self.queue.status(*job) == COMPLETED or self.claims.by_job.get(job) is claim

    def settle_awaiting(self) -> None:
        """Claims whose job exited with jobs queued ahead and no start behind the exit: the startd
        holds none of them (it starts one the moment the claim is idle), so they are Idle again and
        the claim goes to the owner's next job as without a prefetch."""
        waiting, self._awaiting = self._awaiting, {}
        for claim in waiting.values():
            if self.claims.by_id.get(claim.claim_id) is not claim or claim.job is not None:
                continue
            self.claims.return_ahead(claim)
            self.start_next(claim)

    def ahead_for_answer(self, acked: dict[str, tuple[Claim, int]],
                         activated: Collection[str] = ()) -> list[dict[str, Any]]:
        """The jobs queued ahead for the claims that reported in this JobReports call (claim id ->
        (claim, the AheadSeq its reports carried)): topped up to `prefetch_depth` on a claim
        running a short job, or about to (its activation rides in this answer: ``activated``, the
        claim ids), and every entry the startd has not taken yet (a lost answer's too). (Without
        the second kind, a claim whose short jobs each started and ended between two calls was
        never found running at an answer, and ran one job per round trip for good.)"""
        limit = self.settings.claim_prefetch
        out: list[dict[str, Any]] = []
        if limit <= 0 and not self.claims.ahead_of:
            return out
        now = time.time()
        for claim, seen in acked.values():
            if self.claims.by_id.get(claim.claim_id) is not claim or not claim.in_reports:
                continue
            running = claim.state == RUNNING_JOB or (claim.state == ACTIVATING and claim.claim_id in activated)
            if (running and not claim.stopping and claim.last_runtime is not None
                    and claim.last_runtime < self.settings.claim_prefetch_max_runtime and now < claim.worklife_end):
                depth = prefetch_depth(limit, self.settings.claim_prefetch_max_runtime, claim.last_runtime)
                while len(claim.ahead) - len(claim.withdrawn) < depth:
                    job = self._next_job_for(claim)
                    if job is None:
                        break
                    self.claims.queue_ahead(claim, job)
            for seq, job in claim.ahead:
                if seq <= seen or job in claim.withdrawn:
                    continue
                ad = self._idle_ad_for(claim, job)
                if ad is None:
                    continue  # withdrawn as it left Idle (the hook); never sent
                out.append({"ClaimId": claim.claim_id, "Seq": seq, "JobAd": ad})
        return out

    def job_left_idle(self, p: Any) -> None:
        """A job left Idle (held, removed): if it is queued ahead on a claim, the startd must not
        start it."""
        self.claims.withdraw_ahead((p.cluster.id, p.id))

    async def handle_report(self, claim: Claim, report: dict[str, Any]) -> None:
        job = job_of(report)
        event = report.get("Event")
        if job is None or job != claim.job:
            return  # a repeated report of a job the claim has moved past
        if event == "usage":
            attrs = {k: report[k] for k in _USAGE_ATTRS if k in report}
            if attrs and not claim.stopping:
                await self.state.job_update(job[0], job[1], attrs)
        elif event == "exit":
            self.claims.stats["ExitReports"] += 1
            if report.get("Checkpointed"):  # (a job held or removed meanwhile: its checkpoint is dropped)
                report = await self._checkpointed(claim, job, report)
                if not report:
                    return  # started again in place
            if not claim.stopping and self.queue.status(*job) in (RUNNING, SUSPENDED):
                if report.get("Evicted"):
                    # The startd stopped the job on its own (lease, drain, vacate, shutdown): the
                    # job did not finish, it goes back to Idle to run again; never a completion.
                    why = f"evicted by {claim.startd} ({report.get('EvictReason') or 'no reason given'})"
                    await self.state.job_evicted(job[0], job[1], why)
                else:
                    await self.state.job_exited(job[0], job[1], report)
            if claim.started_at:
                claim.last_runtime = time.monotonic() - claim.started_at
            claim.started_at = 0.0
            self.claims.job_ended(claim)
            if report.get("ClaimEnded"):
                self.claims.drop(claim)  # the startd ended the claim with the job: nothing more runs on it
            elif claim.ahead:
                self._awaiting[claim.claim_id] = claim  # its start of the next comes behind this report
            else:
                self.start_next(claim)

    async def _checkpointed(self, claim: Claim, job: tuple[int, int], report: dict[str, Any]) -> dict[str, Any]:
        """A self-checkpointing job's run exited with its checkpoint code, its checkpoint sent
        (checkpoints.py keeps it): the job starts again on the claim and {} is answered; when
        the claim cannot take it (it ended with the run, or jobs are queued ahead on it), the
        report answered is an eviction: the job runs again elsewhere, from its checkpoint."""
        kept = self.checkpoints is not None and await self.checkpoints.checkpointed(job[0], job[1], claim.claim_id, report)
        if kept and not claim.stopping and not report.get("ClaimEnded") and not claim.ahead and claim.job == job:
            self.restart_in_place(claim, job)
            return {}
        return {**report, "Evicted": True, "EvictReason": "it checkpointed, and its claim cannot start it again"}

    def restart_in_place(self, claim: Claim, job: tuple[int, int]) -> None:
        """As HTCondor's starter restarts a job that exited with its checkpoint code: the claim
        runs it again at once, a new activation, the job Running throughout (no start counted,
        no execute event; `_job_running`). Its input brings its checkpoint back."""
        self.activate(claim, job)
        claim.restarting = True
        self.claims.changed(claim)
        self.flush_activations_now()

    def start_next(self, claim: Claim) -> None:
        """Claim reuse: the owner's next idle job that matches the slot, at once; else release."""
        if time.time() >= claim.worklife_end:
            self.claims.release(claim)
            return
        if not self.running_limit.room(len(self.claims.by_job)):
            self.claims.release(claim)  # MAX_JOBS_RUNNING was lowered below the jobs running
            return
        job = self._next_job_for(claim)
        if job is None:
            self.claims.release(claim)
            return
        self.claims.stats["ClaimReuses"] += 1
        self.activate(claim, job)

    def _next_job_for(self, claim: Claim) -> tuple[int, int] | None:
        """The owner's first idle job (queue order) that fits the claim's slot and is not taken
        (reserved, or on a claim). A cluster's taken procs are skipped at once through the claims'
        index of them (agents/schedd/taken.py): with thousands of claims and jobs queued ahead on
        each, most idle procs at the head of a cluster are taken, and walking past them one by one
        for every exit held a busy schedd's loop for seconds. The procs of a cluster with nothing
        of their own are its cluster ad with a ProcId: one match test answers for all of them,
        kept on the claim, so an exit costs a test per cluster and per proc with attributes of its
        own, not one per idle job."""
        queue = self.queue
        taken_index = self.claims.taken
        for c in queue.idle_clusters(claim.owner):
            taken = taken_index.procs(c.id)
            plain = self._plain_fits(claim, c)
            if plain:
                # The cluster's procs fit alike: its first free proc answers, found in its
                # ordered heads (a set difference of every idle proc, at every exit, cost a
                # cluster of 100,000 jobs milliseconds per completion).
                pid = c.first_free(taken)
                if pid is None:
                    continue
                if pid not in c.idle_own:
                    return (c.id, pid)
            if taken:
                free = c.idle.difference(taken)
                if not free:
                    continue
            else:
                free = c.idle
            # In queue order, lazily: the first free proc usually answers (a heap is made in
            # linear time; sorting a cluster of 100,000 idle procs at every exit is not).
            order = list(free if plain is not False else free.intersection(c.idle_own))
            heapq.heapify(order)
            while order:
                pid = heapq.heappop(order)
                job = (c.id, pid)
                p = c.procs.get(pid)
                if p is None:  # (taken procs are not in ``free``: the index is kept exact)
                    continue
                if p.attrs is None and plain is not None:
                    if plain:
                        return job
                    continue
                ad = queue.ad(p)
                if not runs_on_submit_host(ad) and classad.symmetric_match(ad, claim.slot_ad):
                    return job
        return None

    def _plain_fits(self, claim: Claim, c: Cluster) -> bool | None:
        """Whether the procs of ``c`` with nothing of their own fit the claim; None when that
        cannot be told for all of them at once (an expression names ProcId or GlobalJobId)."""
        if c.reads_proc_id or claim.reads_proc_id:
            return None
        now = time.monotonic()
        known = claim.fits.get(c.id)
        # An answer is kept for a while, not for ever: an expression may read the time.
        if known is not None and known[0] == c.version and now - known[2] < FITS_TTL:
            return known[1]
        ad = self.queue.plain_ad(c)
        fits = not runs_on_submit_host(ad) and classad.symmetric_match(ad, claim.slot_ad)
        if len(claim.fits) >= FITS_KEPT:  # answers of clusters long gone go too
            claim.fits.clear()
        claim.fits[c.id] = (c.version, fits, now)
        return fits



def job_of(report: dict[str, Any]) -> tuple[int, int] | None:
    c, p = report.get("ClusterId"), report.get("ProcId")
    if isinstance(c, int) and isinstance(p, int):
        return (c, p)
    return None


def prefetch_depth(limit: int, budget: float, last_runtime: float) -> int:
    """How many jobs to keep queued ahead on a claim whose last job ran ``last_runtime`` seconds:
    at most ``limit`` (CLAIM_PREFETCH_JOBS), and no more work than ``budget`` seconds
    (CLAIM_PREFETCH_MAX_RUNTIME) at that runtime, but one at least. Jobs of a few milliseconds
    need many ahead to cover the round trip that refills the queue; a one-second job needs one,
    and a deeper queue would only keep its successors from other slots."""
    if last_runtime <= 0:
        return limit
    return max(1, min(limit, int(budget / last_runtime)))
