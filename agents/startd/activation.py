"""Activation: the jobs on the claims, started, suspended, stopped through the starter, and what
becomes of them (execute, usage and exit reports).

(One module over 500 lines: a claim's job from its check to its launch and its reports reads as one sequence.)

Every activation re-checks both Requirements against the slot (execution resources have the final
say), evaluates the job's requests (`limits.py`) and launches the job; an activation refused or
failed answers for itself, never for the others of its call. A job's exit is reported at once and
frees the claim for the next activation at once: the claim is idle before the exit report is even
queued, and nothing (usage sampling, cleaning, ads) runs in front of the report. A job whose
sandbox travels (sandbox.py) has its input brought in before it is spawned, and its output sent
back before its exit is reported: a completion is never reported with part of its output.

Prefetch: a schedd may queue a claim's next jobs ahead (``Ahead`` in its JobReports answers,
CLAIM_PREFETCH_JOBS): they wait on the claim and the first starts the moment the claim's job
exits (or at once, on an idle claim), with no round trip to the schedd; each start is an
``activated`` report marked ``Ahead``, queued right behind the exit report it follows. A claim
that ends, retires or refuses one drops what is queued (the schedd puts those jobs back to Idle),
and the schedd withdraws a queued job it holds or removes (`WithdrawActivation`). While the
claim's job runs, the first of them is spawned already as its successor (STARTER_SPAWN_AHEAD,
`spawn_successor`): ready, it execs the moment that job exits; anything the startd does to the
job or the claim first takes it back.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.startd import gpus
from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.ads import SlotAds
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.claims import CLAIM_BUSY, CLAIM_REFUSED, Claims, job_id
from gridbus.agents.startd.jobstarter import JobStarter
from gridbus.agents.startd.limits import (
    HOLD_STARTD_HELD_JOB,
    RequestUndefined,
    activation_requests,
    memory_limit,
)
from gridbus.agents.startd.reports import Reporter
from gridbus.agents.startd.sandbox import Sandboxes, TransferLost
from gridbus.agents.startd.starter import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    Beside,
    Job,
    StartFailed,
)
from gridbus.status import MethodError, Status, app_error, invalid
from gridbus.transfer import spec

log = logging.getLogger("gridbus.startd")

LAUNCH_WAIT = 30.0  # seconds a stopping startd waits for the launches under way


class Activation:
    def __init__(self, address: str, claims: Claims, ads: SlotAds, starter: JobStarter,
                 reports: Reporter, sandboxes: Sandboxes, *, ads_changed: Callable[..., None]):
        self.address = address
        self.claims = claims
        self.ads = ads
        self.starter = starter
        self.reports = reports
        self.sandboxes = sandboxes
        self.ads_changed = ads_changed
        self.counters = {"JobsStarted": 0, "JobsExited": 0}
        self.shutting_down = False  # set when the startd stops: no job starts any more
        claims.no_more_starts = self._drop_successor

    async def shut_down(self) -> None:
        """Start no job any more, and wait for the launches under way: their jobs are the
        starter's to stop with the others, not left running unwatched. An input transfer under
        way ends now (its job is reported evicted and runs again elsewhere)."""
        self.shutting_down = True
        for claim in self.claims.by_id.values():
            self._drop_successor(claim)
        launching = [c for c in self.claims.by_id.values() if c.launch is not None]
        for claim in launching:
            self.sandboxes.abort(claim.id, "the startd is stopping")
        launches = [c.launch for c in launching if c.launch is not None]
        if launches:  # a spawn takes milliseconds; one stuck past this (a hung Iwd) is not waited for
            await asyncio.wait(launches, timeout=LAUNCH_WAIT)

    # ------------------------------------------------------------------ starting
    @method("startd")
    async def ActivateClaims(self, call: Call, Activations: list) -> dict:
        results = []
        launches = []
        for i, entry in enumerate(Activations):
            cid = entry.get("ClaimId") if isinstance(entry, dict) else None
            try:
                if not isinstance(entry, dict) or not isinstance(cid, str) or not isinstance(entry.get("JobAd"), dict):
                    raise invalid(f"ActivateClaims: activation {i} must be a map with ClaimId (string) and JobAd (map)")
                self.sandboxes.keep_inline(cid, entry)  # a small input sandbox rides in the activation
                launch = self.activate(cid, entry["JobAd"], repeat=entry.get("Repeat") is True)
                if launch is not None:
                    launches.append(launch)
                results.append({"ClaimId": cid, "Status": 0, "Text": "OK"})
            except Exception as exc:  # one entry's failure is its own: the others may have started
                error = _activation_error(exc, cid)
                results.append({"ClaimId": cid, "Status": error.status, "Text": error.text})
        # Answered once every accepted job runs (or was reported unable to start), as before.
        if launches:
            await asyncio.gather(*launches)
        return {"Results": results}

    @method("startd")
    async def ActivateClaim(self, call: Call, ClaimId: str, JobAd: dict) -> dict:
        launch = self.activate(ClaimId, JobAd)
        slot = self.claims.get(ClaimId, "ActivateClaim").slot.name  # activate refused unknown claims
        if launch is not None:
            await launch
        return {"Slot": slot}

    def in_answer(self, schedd: str, activations: list[Any], ahead: list[Any] | None = None) -> None:
        """Activations a schedd put in its answer to JobReports (claim reuse without a round trip of
        its own): each is started as ActivateClaims would, and its outcome is an ``activated``
        report (Status, Text) in the next JobReports call. Then the jobs queued ahead (`queue_ahead`)."""
        refused: set[str] = set()
        for i, entry in enumerate(activations):
            cid = entry.get("ClaimId") if isinstance(entry, dict) else None
            job_ad = entry.get("JobAd") if isinstance(entry, dict) else None
            if not isinstance(cid, str) or not isinstance(job_ad, dict):
                log.warning("%s answered JobReports with a malformed activation %d (needs ClaimId and JobAd)", schedd, i)
                continue
            claim = self.claims.by_id.get(cid)
            if claim is None or claim.schedd != schedd:
                log.warning("%s sent an activation for claim %s..., which it does not hold here", schedd, cid[:6])
                continue
            self.sandboxes.keep_inline(cid, entry)
            try:
                launch = self.activate(cid, job_ad, repeat=entry.get("Repeat") is True)
            except Exception as exc:  # reported for this activation; the next ones still start
                error = _activation_error(exc, cid)
                self.reports.report(claim, job_ad, "activated", {"Status": error.status, "Text": error.text})
                refused.add(cid)
                continue
            if launch is None:
                self._activated_ok(claim, job_ad)
            else:  # (bound now: the loop's claim and job_ad move on before the launch is done)
                launch.add_done_callback(functools.partial(self._activated_ok, claim, job_ad))
        if ahead:
            self.queue_ahead(schedd, ahead, refused)

    def _activated_ok(self, claim: sl.Claim, job_ad: dict[str, Any], _launch: object = None) -> None:
        """An activation in an answer was accepted (and its launch, if any, is over): reported OK."""
        self.reports.report(claim, job_ad, "activated", {"Status": 0, "Text": "OK"})

    def queue_ahead(self, schedd: str, entries: list[Any], refused: AbstractSet[str] = frozenset()) -> None:
        """Jobs a schedd queued ahead on its claims ({ClaimId, Seq, JobAd}): kept in order on the
        claim, each taken once (by Seq), and started when the claim is idle. A claim whose
        activation in the same answer was refused takes none (the schedd ends it), nor does one
        retiring or ending (its exit report says ClaimEnded; the schedd puts them back)."""
        touched: list[sl.Claim] = []
        for i, entry in enumerate(entries):
            cid = entry.get("ClaimId") if isinstance(entry, dict) else None
            seq = entry.get("Seq") if isinstance(entry, dict) else None
            job_ad = entry.get("JobAd") if isinstance(entry, dict) else None
            if not isinstance(cid, str) or not isinstance(seq, int) or not isinstance(job_ad, dict):
                log.warning("%s answered JobReports with a malformed job ahead %d (needs ClaimId, Seq, JobAd)", schedd, i)
                continue
            claim = self.claims.by_id.get(cid)
            if claim is None or claim.schedd != schedd:
                continue  # ended meanwhile: the schedd learns it from the claim's reports
            if seq <= claim.ahead_seq:
                continue  # sent again (the answer that carried it was taken for lost)
            claim.ahead_seq = seq
            if cid in refused or self._runs_no_more(claim):
                continue
            self.sandboxes.keep_inline(cid, entry)  # its input moves now, while the claim's job runs
            claim.ahead.append((seq, job_ad))
            claim.ahead_peak = max(claim.ahead_peak, len(claim.ahead))
            if claim not in touched:
                touched.append(claim)
        for claim in touched:
            if claim.job is None and claim.launch is None:
                self.start_ahead(claim)  # its job exited before this answer came
            else:
                self.spawn_successor(claim)

    def _runs_no_more(self, claim: sl.Claim) -> bool:
        """The claim starts no further job: it retires, it is being ended, or the startd stops
        (a stopping startd's claims end with their jobs, as HTCondor's startd vacates its claims
        at shutdown; the exit report says ClaimEnded and the schedd puts the claim's queue back)."""
        return claim.retiring or self.claims.is_ending(claim) or self.shutting_down

    def start_ahead(self, claim: sl.Claim) -> None:
        """Start the claim's next job queued ahead, if any: the claim is idle. Its outcome is an
        ``activated`` report marked Ahead; a refusal drops the rest of the queue (the schedd
        ends the claim on it). The next job spawned ahead as a successor has exec'd already (or
        is exec'ing): it is taken as started here, its checks done when it was spawned."""
        self._requeue_cancelled(claim)
        successor, claim.successor = claim.successor, None
        if (not claim.ahead and successor is None) or self.claims.by_id.get(claim.id) is not claim:
            return
        if self._runs_no_more(claim):
            if successor is not None:
                self.starter.cancel(successor.beside)
            claim.ahead.clear()
            return
        job_ad = successor.ad if successor is not None else claim.ahead.pop(0)[1]
        try:
            self.activate(claim.id, job_ad, successor=successor)
        except Exception as exc:
            if successor is not None:
                self.starter.cancel(successor.beside)
            error = _activation_error(exc, claim.id)
            claim.ahead.clear()
            self.reports.report(claim, job_ad, "activated", {"Status": error.status, "Text": error.text, "Ahead": True})
            return
        # Accepted: a launch that fails from here is an exit report with its hold reason.
        self.reports.report(claim, job_ad, "activated", {"Status": 0, "Text": "OK", "Ahead": True})

    def spawn_successor(self, claim: sl.Claim) -> None:
        """Spawn the claim's next job queued ahead while the claim's job runs (STARTER_SPAWN_AHEAD):
        checked now as it will be at its start, ready to exec the moment that job exits, woken by
        the kernel without a turn of this loop (`Starter.begin_beside` with ``after``). Nothing
        is spawned where the start could not be taken back or would differ: a job that is
        refused, held or whose sandbox travels, one that writes the running job's output files
        (it opens them now), a claim that runs no more jobs. Such a job starts at the exit, as
        without this, where its refusal or hold is reported in order."""
        self._requeue_cancelled(claim)
        job = claim.job
        if (not self.starter.spawns_ahead or job is None or not claim.ahead or claim.successor is not None
                or job.exit is not None or job.successor is not None or job.suspended or job.stop_reason
                or self._runs_no_more(claim) or self.sandboxes.holds(claim.id)
                or self.claims.by_id.get(claim.id) is not claim):
            return
        seq, job_ad = claim.ahead[0]
        if (self.sandboxes.wanted(job_ad) or self.starter.shares_output(job.ad, job_ad)
                or not self.starter.starts_now(job_ad)):
            return
        try:
            memory, held = self._checked(claim.slot, job_ad, self.ads.next_start_ad(claim.slot))
        except MethodError:
            return
        if held is not None:
            return
        try:
            beside = self.starter.begin_beside(job_ad, claim.slot.name, _job_env(claim.slot), memory, after=job)
        except (StartFailed, OSError):
            return
        claim.ahead.pop(0)
        claim.successor = sl.Successor(seq, job_ad, beside, memory)

    @staticmethod
    def _requeue_cancelled(claim: sl.Claim) -> None:
        """A successor the starter cancelled (its predecessor was stopped or suspended) goes back
        to the head of the queue, to start anew."""
        successor = claim.successor
        if successor is not None and successor.beside.cancelled:
            claim.successor = None
            claim.ahead.insert(0, (successor.seq, successor.ad))

    def _drop_successor(self, claim: sl.Claim) -> None:
        """The claim's successor is stopped before its exec (it ends, retires, is suspended, the
        startd stops, or its job is withdrawn), and its job goes back to the head of the queue
        (which a claim's end drops; the schedd puts those jobs back)."""
        if claim.successor is None:
            return
        if claim.job is not None:
            self.starter.cancel_successor(claim.job)  # (the claim's successor, while that job runs)
        self.starter.cancel(claim.successor.beside)  # (done already if it was)
        self._requeue_cancelled(claim)

    @method("startd")
    async def WithdrawActivation(self, call: Call, ClaimId: str, ClusterId: int, ProcId: int) -> dict:
        """The schedd takes back a job it queued ahead on the claim (held or removed meanwhile):
        Withdrawn true if it was still queued (it will not run here), false if it is not queued
        (started already: the schedd stops it on its activated report; or never received)."""
        claim = self.claims.get(ClaimId, "WithdrawActivation")
        claim.renew()
        if claim.successor is not None and _job_key(claim.successor.ad) == (ClusterId, ProcId):
            self._drop_successor(claim)  # (stopped before its exec; back at the head of the queue, taken out below)
        before = len(claim.ahead)
        claim.ahead = [(seq, ad) for seq, ad in claim.ahead if _job_key(ad) != (ClusterId, ProcId)]
        return {"Withdrawn": len(claim.ahead) < before}

    def activate(self, claim_id: str, job_ad: dict, *, repeat: bool = False,
                 successor: sl.Successor | None = None) -> asyncio.Future[None] | None:
        """Check an activation (MethodError if refused) and launch its job.

        Returns the launch, done when the job runs or is reported unable to start (None for a
        repeat of the job the claim already runs, or, for an activation the schedd marks
        ``repeat``, of the job it ran last); the claim counts as busy from now on. ``successor``: the job spawned ahead (`spawn_successor`), checked then."""
        claim = self.claims.get(claim_id, "ActivateClaim")
        slot = claim.slot
        if self.shutting_down:
            raise app_error(CLAIM_REFUSED, f"ActivateClaim: {self.address} is shutting down; no new job starts")
        if claim.retiring or self.claims.is_ending(claim):
            raise app_error(CLAIM_REFUSED, f"ActivateClaim: the claim on {slot.name} is retiring (draining or ending); no new job starts on it")
        current = claim.job.ad if claim.job is not None else (claim.last_ad if claim.launch is not None else None)
        if current is not None:
            if _same_job(current, job_ad):  # a repeated activation (its answer was lost): same answer
                return None
            raise app_error(CLAIM_BUSY, f"ActivateClaim: {slot.name} is still running job {job_id(current)}")
        if repeat and claim.last_ad is not None and _same_job(claim.last_ad, job_ad):
            # The schedd asks again after an unanswered activation whose job ran and exited here
            # already (its exit report is on its way): the same answer, never a second run. An
            # activation not marked as a repeat (the job run again after an eviction) does run.
            return None
        claim.renew()
        held: StartFailed | OSError | None = None  # what the launch reports instead of starting the job
        if successor is not None:
            memory, beside = successor.memory, successor.beside
        else:
            memory, held = self._checked(slot, job_ad, self.ads.slot_ad(slot))
            beside = None
        claim.last_ad = job_ad
        run_ad: dict = job_ad  # the ad the job runs with (in its sandbox, when its files travel)
        inline = self.sandboxes.wanted(job_ad) and self.sandboxes.inline_ready(claim.id, job_ad)
        if (beside is None and held is None and self.starter.spawns_beside
                and (inline or not self.sandboxes.wanted(job_ad)) and self.starter.starts_now(job_ad)):
            # Spawned now, not on the launch task's first turn of the loop: a slot freed by an
            # exit starts its next job before anything else the loop has to do. A job whose
            # input came inline with its activation has its sandbox filled first, as quickly.
            try:
                sandbox = None
                if inline:
                    run_ad, sandbox = self.sandboxes.fill_inline(claim, job_ad)
                beside = self.starter.begin_beside(run_ad, slot.name, _job_env(slot), memory, sandbox)
            except (StartFailed, OSError) as exc:  # reported by the task, after the activation's answer
                self.sandboxes.discard(claim.id)  # (a sandbox filled for a spawn that failed)
                held = exc
        loop = asyncio.get_running_loop()
        if beside is not None:
            # Finished by a callback where the child's pipe says it exec'd (`Starter.when_known`),
            # not by a task: a task's first step, its wake-up behind a shield and its done
            # callbacks were three more turns of the loop per job. ``launch`` is done then.
            launch: asyncio.Future[None] = loop.create_future()
            self.starter.when_known(beside, lambda: self._launched_beside(claim, job_ad, memory, beside, launch,
                                                                          run_ad))
        else:
            launch = loop.create_task(self._launch(claim, job_ad, memory, held), name=f"launch {slot.name}")
        claim.launch = launch
        return launch

    def _checked(self, slot: sl.Slot, job_ad: Mapping[str, Any], ad: dict[str, Any]) -> tuple[int, StartFailed | None]:
        """An activation's checks against the slot's ``ad``: both Requirements (MethodError if
        they refuse it) and the requests. Returns the job's memory limit (MiB) and, for a request
        that is no number, the hold that starts nothing."""
        # The requests as numbers, before the match test (which an undefined request would fail
        # with a reason about the slot): a request that is no number holds the job, naming it.
        memory = slot.memory
        try:
            req = activation_requests(job_ad, ad, self.ads.defaults)
        except RequestUndefined as exc:
            return memory, StartFailed(exc.reason, HOLD_STARTD_HELD_JOB)
        why = self.ads.mismatch(ad, {**job_ad, "RequestCpus": req.cpus, "RequestMemory": req.memory,
                                     "RequestDisk": req.disk})
        if why:
            raise app_error(CLAIM_REFUSED, f"ActivateClaim refused: {why}")
        if lookup(job_ad, "RequestMemory") is not None:
            memory = memory_limit(req.memory)
        return memory, None

    async def _launch(self, claim: sl.Claim, job_ad: dict, memory: int, held: StartFailed | OSError | None = None) -> None:
        """A start that is not spawned beside the loop (`_launched_beside` finishes those): refused or
        held at activation, an input sandbox fetched first, or the spawn waited for on a thread."""
        slot = claim.slot
        try:
            if held is not None:  # refused at activation, or failed to spawn: a job that could not start
                raise held
            if self.sandboxes.wanted(job_ad):  # the input comes over the bus into a sandbox first
                run_ad, sandbox = await self.sandboxes.fetch_input(claim, job_ad)
                started = await self.starter.start_async(claim.id, run_ad, slot.name, _job_env(slot), memory,
                                                         sandbox=sandbox)
            else:
                started = await self.starter.start_async(claim.id, job_ad, slot.name, _job_env(slot), memory)
        except (StartFailed, OSError) as exc:
            claim.launch = None
            self._not_started(claim, job_ad, exc)
            return
        finally:
            claim.launch = None
        self._started(claim, job_ad, started)

    def _launched_beside(self, claim: sl.Claim, job_ad: dict, memory: int, beside: Beside,
                         launch: asyncio.Future, run_ad: dict | None = None) -> None:
        """A start spawned beside the loop (`activate`), once its child's outcome is known. The
        launch is over when this returns (or raises), unless the start was made anew. ``run_ad``:
        the ad the job runs with, if not ``job_ad`` (in the sandbox its input came into)."""
        again = False
        try:
            done = self.starter.finish_known(claim.id, run_ad or job_ad, claim.slot.name, memory, beside)
            if isinstance(done, Beside):  # a successor started anew: finished in its turn
                again = True
                self.starter.when_known(done, lambda: self._launched_beside(claim, job_ad, memory, done, launch,
                                                                            run_ad))
                return
            done.sandbox = run_ad is not None and run_ad is not job_ad  # (its directory is the sandbox's to remove)
            claim.launch = None
            self._started(claim, job_ad, done)
        except (StartFailed, OSError) as exc:
            claim.launch = None
            self._not_started(claim, job_ad, exc)
        finally:
            if not again:
                if claim.launch is launch:  # (an unexpected error: the waiters go on, and it is logged)
                    claim.launch = None
                if not launch.done():  # (done: cancelled by a waiter that was)
                    launch.set_result(None)

    def _not_started(self, claim: sl.Claim, job_ad: dict, exc: StartFailed | OSError) -> None:
        """The protocol's one path for "it did not run": an exit report with the hold reason (or,
        for an input transfer cut off, an eviction: the job runs again elsewhere)."""
        self.sandboxes.forget(claim.id)
        if isinstance(exc, OSError):  # past the starter's own checks (pidfd_open, a thread): still a start failure
            exc = StartFailed(f"cannot start the job: {exc.strerror or exc}", HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0)
        log.info("job %s could not start on %s: %s", job_id(job_ad), claim.slot.name, exc.reason)
        self.reports.report(claim, job_ad, "exit", {"Evicted": True, "EvictReason": exc.reason}
                            if isinstance(exc, TransferLost)
                            else {"HoldReason": exc.reason, "HoldReasonCode": exc.code,
                                  "HoldReasonSubCode": exc.subcode})
        self.claims.retire(claim)  # drained meanwhile
        self.start_ahead(claim)

    def _started(self, claim: sl.Claim, job_ad: dict, started: Job) -> None:
        slot = claim.slot
        claim.job = started
        self.counters["JobsStarted"] += 1
        if self.claims.by_id.get(claim.id) is not claim:  # ending a claim waits for its launch: not expected
            log.warning("claim on %s is gone while job %s was starting; stopping the job", slot.name, job_id(job_ad))
            self.starter.stop(started, graceful=False, reason="release")
            return
        # A claim being ended or drained meanwhile stops or retires this job like a running one.
        if not claim.retiring and not self.claims.is_ending(claim):
            slot.set(activity=sl.BUSY)
        self.reports.report(claim, job_ad, "execute", {"Slot": slot.name, "RemoteHost": slot.name})
        self.ads_changed(sl.ad_names(slot))
        self.spawn_successor(claim)

    # ------------------------------------------------------------------ the running job
    @method("startd")
    async def DeactivateClaim(self, call: Call, ClaimId: str, Graceful: bool, ClusterId: int = -1,
                              ProcId: int = -1) -> dict:
        """Stop the claim's job. A job named (ClusterId, ProcId) is stopped only if it is the one
        the claim runs or starts: with jobs queued ahead, the schedd's stop of a job that has
        exited meanwhile must not take the next job, started behind that exit (it would be
        evicted, and run again, for a hold or removal of another job)."""
        claim = self.claims.get(ClaimId, "DeactivateClaim")
        claim.renew()
        named = (ClusterId, ProcId) if ClusterId >= 0 else None
        if named is not None and not self._runs_or_starts(claim, named):
            return {"Stopped": False}
        self.sandboxes.abort(claim.id, "the claim was deactivated")  # an input or output transfer ends now
        if claim.launch is not None:  # a job being spawned is stopped like a running one, once it runs
            await asyncio.shield(claim.launch)
        job = claim.job
        if job is None or (named is not None and _job_key(job.ad) != named):
            return {"Stopped": False}
        await self.claims.stop_job(job, Graceful, "deactivate")
        return {"Stopped": True}

    @staticmethod
    def _runs_or_starts(claim: sl.Claim, key: tuple[int, int]) -> bool:
        """Whether ``key`` is the job the claim runs, or is starting (or, with none, whose output
        goes back now: the claim is idle between a job's exit and the end of its transfer)."""
        if claim.job is not None:
            return _job_key(claim.job.ad) == key
        if claim.launch is not None or claim.last_ad is not None:
            return claim.last_ad is not None and _job_key(claim.last_ad) == key
        return True

    def _running_claim(self, claim_id: str, method_name: str, verb: str) -> tuple[sl.Claim, Job]:
        """The claim (renewed) whose job a freezer method acts on, and the job; refused if it runs none."""
        claim = self.claims.get(claim_id, method_name)
        claim.renew()
        if claim.job is None:
            raise app_error(CLAIM_REFUSED, f"{method_name}: {claim.slot.name} runs no job to {verb}")
        return claim, claim.job

    @method("startd")
    async def SuspendClaim(self, call: Call, ClaimId: str) -> dict:
        """Suspend the claim's job where it is (the freezer); the slot's activity is Suspended."""
        claim, job = self._running_claim(ClaimId, "SuspendClaim", "suspend")
        self._drop_successor(claim)  # (respawned when the job continues)
        count = self.starter.suspend(job)
        claim.slot.set(activity=sl.SUSPENDED)
        self.ads_changed(sl.ad_names(claim.slot))
        return {"Processes": count}

    @method("startd")
    async def ContinueClaim(self, call: Call, ClaimId: str) -> dict:
        claim, job = self._running_claim(ClaimId, "ContinueClaim", "continue")
        self.starter.resume(job)
        if claim.slot.activity == sl.SUSPENDED:
            claim.slot.set(activity=sl.BUSY)
        self.ads_changed(sl.ad_names(claim.slot))
        self.spawn_successor(claim)  # (its suspension cancelled the one it had)
        return {}

    def exited(self, job: Job) -> None:
        """The starter reaped a job: free the claim for the next job, then report, at once (a job
        whose sandbox travels: once its output is back)."""
        self.counters["JobsExited"] += 1
        claim = self.claims.by_id.get(job.key)
        if claim is None or claim.job is not job:
            log.info("job %s exited after its claim ended; nobody to report to", job_id(job.ad))
            self.sandboxes.discard(job.key)
            return
        claim.job = None
        extra = dict(job.exit or {})
        if job.stop_reason and job.stop_reason != "memory":
            extra["Evicted"] = True
            extra["EvictReason"] = job.stop_reason
        elif not extra.get("HoldReason") and spec.wants_checkpoint(job.ad, extra):
            # A self-checkpointing job's checkpoint: its files go to the schedd's spool (with a
            # transferred sandbox), and the schedd starts it again (agents/schedd/checkpoints.py).
            extra["Checkpointed"] = True
        if self.sandboxes.holds(claim.id):  # the output goes back before the exit is reported
            self.sandboxes.return_output(claim, job, extra, lambda extra: self._exit_reported(claim, job, extra))
        else:
            self._exit_reported(claim, job, extra)

    def _exit_reported(self, claim: sl.Claim, job: Job, extra: dict[str, Any]) -> None:
        if self.claims.by_id.get(claim.id) is not claim:  # ended while the output went back: its slot is freed
            self.reports.report(claim, job.ad, "exit", {**extra, "ClaimEnded": True})
            return
        ending = self._runs_no_more(claim)
        if ending:
            extra["ClaimEnded"] = True
        # With the queue ahead at least a quarter as deep as the schedd keeps it, nothing waits
        # on this exit: it lingers for company like other reports. Else it leaves at once, so
        # that the schedd's answer brings the claim's next jobs before the queue runs dry (short
        # jobs go through a queue of 16-32 in tens of milliseconds: topped up only when one was
        # left, a claim in twenty-five waited idle for the answer, 5 ms on average; from half
        # the queue on, most exits of /bin/true jobs at two slots made a call of their own).
        low = len(claim.ahead) + (claim.successor is not None) < max(2, claim.ahead_peak // 4)
        self.reports.report(claim, job.ad, "exit", extra, hurry=ending or low)
        if not ending:
            claim.slot.set(activity=sl.IDLE)
            # The next job queued ahead starts now; its activated report goes right behind this
            # exit report, in the same call.
            self.start_ahead(claim)
        else:  # graceful drain: the retired claim ends now
            self._drop_successor(claim)
            claim.ahead.clear()
            self.claims.retire(claim)
        self.ads_changed(sl.ad_names(claim.slot))

    def usage(self, jobs: list[Job]) -> None:
        """The starter sampled running jobs whose usage report is due."""
        for job in jobs:
            claim = self.claims.by_id.get(job.key)
            if claim is not None and claim.job is job:
                self.reports.report(claim, job.ad, "usage", job.usage())


def _activation_error(exc: Exception, claim_id: Any) -> MethodError:
    """The answer to one activation that failed: its own refusal, or the failure as a sentence."""
    if isinstance(exc, MethodError):
        return exc
    log.error("activation on claim %s... failed", str(claim_id)[:6], exc_info=exc)
    return MethodError(Status.EXCEPTION, f"ActivateClaim failed: {type(exc).__name__}: {exc}")


def _job_env(slot: sl.Slot) -> dict[str, str]:
    """What the startd adds to every job's environment on ``slot``: its cpus, and its GPUs."""
    return {"OMP_NUM_THREADS": str(slot.cpus), **gpus.job_environment(slot.gpu_ids, slot.machine_has_gpus())}


def _job_key(ad: Mapping[str, Any]) -> tuple[Any, Any]:
    return lookup(ad, "ClusterId"), lookup(ad, "ProcId")


def _same_job(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(lookup(a, k) == lookup(b, k) for k in ("GlobalJobId", "ClusterId", "ProcId"))
