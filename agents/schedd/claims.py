"""The schedd's claims: one `Claim` per claimed slot, by id and by the job it runs, kept in memory
and in a table of their own (``shadow_claims``) in the job queue's SQLite file, so a restarted
schedd reconnects to its running jobs inside the lease; and the calls to the startds that hold
them (ReleaseClaim, DeactivateClaim for a Hold or Remove, Suspend/Continue/Vacate on a claim).

A claim change is written by the next commit of the job queue (commits.py), in the same
transaction as the job changes of that moment: a job and its claim agree on disk, and the last
commit at the stop carries the last claim change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from gridbus import wire
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobqueue import JobQueue, reads_proc_id
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.taken import TakenDict, TakenIndex, TakenSet
from gridbus.rpc import CallTimeout, MethodResult

log = logging.getLogger("gridbus.schedd.claims")

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

# How the schedd calls a daemon: (address, method, arguments, timeout) -> its answer.
DaemonCall = Callable[[str, str, dict[str, Any], float], Awaitable[MethodResult]]
Spawn = Callable[..., Any]


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
    asked: bool = False  # claim.job's activation went out already: a further one is a repeat
    restarting: bool = False  # claim.job, Running, starts again after its checkpoint (shadows.restart_in_place)
    # A claim read back at a restart whose job's activation had gone out, its outcome not yet
    # known: "answer" (it rode in a JobReports answer) or "call" (ActivateClaims); "" otherwise.
    recovered_activation: str = field(default="", repr=False)
    # Calls on the claim's job waiting for its restart in place to be under way (`until_running`).
    run_waiters: list[asyncio.Future[None]] = field(default_factory=list, repr=False)
    # Prefetch (CLAIM_PREFETCH_JOBS): the owner's next jobs queued ahead on the startd, (Seq, job)
    # in order; reserved, still Idle. ahead_seq is the last Seq given; withdrawn the entries held
    # or removed since, which the startd was asked to drop (kept until it says so or passes them).
    ahead: list[tuple[int, tuple[int, int]]] = field(default_factory=list)
    ahead_seq: int = 0
    withdrawn: set[tuple[int, int]] = field(default_factory=set, repr=False)
    started_at: float = 0.0  # monotonic time claim.job started running
    # The jobs last started here from the queue ahead: a retried report of such a start (its
    # call's answer was lost) is a repeat, not a start of a job the claim never had.
    recent_starts: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=64), repr=False)
    last_runtime: float | None = None  # seconds claim's last job ran (None: none finished here)
    _slot_ad_wire: bytes | None = field(default=None, repr=False)  # slot_ad encoded once: it never changes
    # Claim reuse: whether the procs of a cluster with nothing of their own fit this slot, by
    # cluster id: (the cluster ad's version when tested, the answer, time.monotonic() then).
    fits: dict[int, tuple[int, bool, float]] = field(default_factory=dict, repr=False)
    reads_proc_id: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.reads_proc_id = reads_proc_id(self.slot_ad)

    def record(self) -> bytes:
        # Written at every job start and end: the slot ad, the bulk of it, is encoded only once.
        if self._slot_ad_wire is None:
            self._slot_ad_wire = wire.encode(self.slot_ad)
        return msgpack.packb(
            {
                "claim_id": self.claim_id, "startd": self.startd, "slot": self.slot, "owner": self.owner,
                "slot_ad": self._slot_ad_wire, "worklife_end": self.worklife_end,
                "job": list(self.job) if self.job else None, "jobs_run": self.jobs_run,
                "in_reports": self.in_reports, "ahead": [[seq, list(job)] for seq, job in self.ahead],
                "ahead_seq": self.ahead_seq, "restarting": self.restarting,
                "activating": self._activation_path(),
                # Reports that came before the activation's outcome were answered (the startd
                # forgets them): kept with the claim until applied, or a crash would lose them.
                # (Only a claim awaiting an outcome has any: applying it or freeing the job empties it.)
                "buffered": self.buffered,
            }
        )

    def _activation_path(self) -> str | None:
        """How claim.job's activation went out, while its outcome is awaited (written with the
        claim, before the activation is sent: a restarted schedd asks again, as a repeat,
        rather than taking the job for Idle and starting it a second time)."""
        if self.state != ACTIVATING or self.job is None or self.restarting:
            return None
        return "answer" if self.reply_sent else "call"

    @classmethod
    def from_record(cls, blob: bytes) -> Claim:
        raw = msgpack.unpackb(blob)
        claim = cls(raw["claim_id"], raw["startd"], raw["slot"], raw["owner"], wire.decode(raw["slot_ad"]),
                    float(raw["worklife_end"]), jobs_run=int(raw.get("jobs_run", 0)),
                    in_reports=bool(raw.get("in_reports", False)))
        if raw.get("job"):
            claim.job = (int(raw["job"][0]), int(raw["job"][1]))
            claim.state = RUNNING_JOB
            if raw.get("restarting"):  # its in-place restart after a checkpoint was not answered yet
                claim.state, claim.restarting = ACTIVATING, True
            elif raw.get("activating") in ("answer", "call"):  # sent; its outcome not known yet
                claim.state, claim.asked = ACTIVATING, True
                claim.recovered_activation = raw["activating"]
            if claim.state == ACTIVATING:
                claim.buffered = [r for r in raw.get("buffered") or [] if isinstance(r, dict)]
        claim.ahead = [(int(seq), (int(job[0]), int(job[1]))) for seq, job in raw.get("ahead") or []]
        claim.ahead_seq = int(raw.get("ahead_seq", 0))
        return claim


def deactivation(claim: Claim, job: tuple[int, int], *, graceful: bool) -> dict[str, Any]:
    """DeactivateClaim's arguments to stop ``job`` on ``claim``, the job named: with jobs queued
    ahead the startd may have started the next one behind its exit, which is not to be stopped."""
    return {"ClaimId": claim.claim_id, "Graceful": graceful, "ClusterId": job[0], "ProcId": job[1]}


class Claims:
    def __init__(self, queue: JobQueue, commits: Commits, call: DaemonCall, spawn: Spawn,
                 settings: ScheddSettings):
        self.queue = queue
        self.commits = commits
        self._call = call
        self._spawn = spawn
        self.settings = settings
        self.by_id: dict[str, Claim] = {}
        # Both counted by cluster in ``taken`` (claim reuse skips a cluster's taken procs at once).
        self.taken = TakenIndex(on_free=queue.untaken)
        self.by_job: dict[tuple[int, int], Claim] = TakenDict(self.taken)
        self.reserved: set[tuple[int, int]] = TakenSet(self.taken)  # matched jobs not running yet
        self.ahead_of: dict[tuple[int, int], Claim] = {}  # jobs queued ahead -> their claim
        self._dirty: set[str] = set()
        self.stats = {"Matches": 0, "ClaimsRequested": 0, "ClaimsRefused": 0, "Activations": 0,
                      "ActivationBatches": 0, "ClaimReuses": 0, "ClaimsReleased": 0, "ClaimsLost": 0,
                      "ExitReports": 0, "ActivationsInAnswers": 0, "JobsQueuedAhead": 0,
                      "AheadStarts": 0, "AheadWithdrawn": 0, "AheadReturned": 0}
        commits.before.append(self._put_writes)
        self._load()

    # ------------------------------------------------------------------ persistence
    def _load(self) -> None:
        db = self.queue.store.db
        db.execute(_CLAIMS_TABLE)
        for cid, blob in db.execute("SELECT claim_id, record FROM shadow_claims").fetchall():
            try:
                claim = Claim.from_record(blob)
            except Exception:
                log.warning("dropping an unreadable claim record %s", cid)
                continue
            self.add(claim)

    def add(self, claim: Claim) -> None:
        self.by_id[claim.claim_id] = claim
        if claim.job:
            self.by_job[claim.job] = claim
        for _seq, job in claim.ahead:
            self.reserved.add(job)
            self.ahead_of[job] = claim

    # ------------------------------------------------------------------ a claim's job
    # The claim invariant lives here, and only here: a job is on one claim at most (``by_job``),
    # reserved from its match (or its queueing ahead) until it runs or goes back, and
    # ``claim.state`` says where the claim's job is. Every change is written by the next commit.
    def reserve(self, job: tuple[int, int]) -> None:
        """``job`` is matched (its claim being requested, or queued ahead): no other claim takes it."""
        self.reserved.add(job)

    def unreserve(self, job: tuple[int, int]) -> None:
        """``job`` is Idle for any claim again (its claim was refused, or it left the queue ahead)."""
        self.reserved.discard(job)

    def assign(self, claim: Claim, job: tuple[int, int], *, ahead_start: bool = False) -> None:
        """``job`` becomes ``claim``'s job, its start awaited: an activation about to go out, or
        (``ahead_start``) a start from the queue ahead the startd has reported."""
        claim.job, claim.state, claim.stopping = job, ACTIVATING, False
        claim.asked, claim.restarting, claim.reply_sent = ahead_start, False, 0.0
        self.reserved.add(job)
        self.by_job[job] = claim
        self.changed(claim)

    def running(self, claim: Claim, job: tuple[int, int], *, stopping: bool = False) -> None:
        """``claim``'s job runs (``stopping``: a job no longer Idle that the startd started, being
        stopped): no longer reserved, counted among the claim's runs."""
        claim.state, claim.stopping = RUNNING_JOB, stopping
        claim.jobs_run += 1
        self.reserved.discard(job)
        self.changed(claim)
        _wake(claim)

    def job_ended(self, claim: Claim) -> None:
        """``claim``'s job is gone from it (exited, or no longer the queue's Running job): idle."""
        if claim.job is not None and self.by_job.get(claim.job) is claim:
            del self.by_job[claim.job]
        claim.job, claim.state, claim.stopping = None, IDLE, False
        self.changed(claim)
        _wake(claim)

    # ------------------------------------------------------------------ jobs queued ahead
    def queue_ahead(self, claim: Claim, job: tuple[int, int]) -> None:
        """Queue ``job`` ahead on ``claim`` (reserved, still Idle); written by the next commit,
        which the JobReports answer that carries it waits for."""
        claim.ahead_seq += 1
        claim.ahead.append((claim.ahead_seq, job))
        self.reserved.add(job)
        self.ahead_of[job] = claim
        self.stats["JobsQueuedAhead"] += 1
        self.changed(claim)

    def unqueue(self, claim: Claim, job: tuple[int, int]) -> None:
        """``job`` is no longer queued ahead on ``claim`` (it started there, or goes back to the
        queue's idle jobs); the caller says which by whether it keeps the reservation."""
        claim.ahead = [(seq, j) for seq, j in claim.ahead if j != job]
        claim.withdrawn.discard(job)
        if self.ahead_of.get(job) is claim:
            del self.ahead_of[job]
        self.changed(claim)

    def withdraw_ahead(self, job: tuple[int, int]) -> None:
        """Take ``job`` back from the claim it is queued ahead on, if any (held, removed or edited
        since): WithdrawActivation; it leaves the queue once the startd says it will not run it.
        One the startd started before the call came is stopped on its activated report if it is
        no longer Idle (an edit that raced the start is not seen by that run, as with any start)."""
        claim = self.ahead_of.get(job)
        if claim is None or job in claim.withdrawn:
            return
        claim.withdrawn.add(job)
        self._spawn(self._withdraw(claim, job), "withdraw")

    async def _withdraw(self, claim: Claim, job: tuple[int, int]) -> None:
        result = await self.call_startd(claim.startd, "WithdrawActivation",
                                        {"ClaimId": claim.claim_id, "ClusterId": job[0], "ProcId": job[1]})
        if result is None or not result.ok or result.outArgs.get("Withdrawn") is not True:
            # Not queued there (started: its activated report tells; or never received: it goes
            # back with the others at the claim's next exit), or no answer (likewise).
            return
        if self.ahead_of.get(job) is claim and job in claim.withdrawn:
            self.unqueue(claim, job)
            self.reserved.discard(job)
            self.stats["AheadWithdrawn"] += 1

    def return_ahead(self, claim: Claim) -> None:
        """Every job queued ahead on ``claim`` back to the idle jobs (the claim ended, or the
        startd holds none of them any more)."""
        for _seq, job in claim.ahead:
            self.reserved.discard(job)
            if self.ahead_of.get(job) is claim:
                del self.ahead_of[job]
            self.stats["AheadReturned"] += 1
        claim.ahead.clear()
        claim.withdrawn.clear()
        self.changed(claim)

    def owners_starting(self) -> set[str]:
        """The owners of claims whose job is being started (its activation not yet answered): an
        input transfer through the owner's shadow may be done already, and the job not Running."""
        return {c.owner for c in self.by_id.values() if c.state == ACTIVATING}

    def changed(self, claim: Claim) -> None:
        """``claim`` changed: written by the next commit, one for every change of this moment."""
        self._dirty.add(claim.claim_id)
        self.commits.soon()

    def take_writes(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The claim rows changed since the last call, as (SQL, rows) for the job queue's commit
        (JobQueue.add_writes); a failed commit keeps them for its next attempt."""
        if not self._dirty:
            return []
        dirty, self._dirty = self._dirty, set()
        upserts = [(cid, self.by_id[cid].record()) for cid in dirty if cid in self.by_id]
        deletes = [(cid,) for cid in dirty if cid not in self.by_id]
        writes: list[tuple[str, list[tuple[Any, ...]]]] = []
        if upserts:
            writes.append(("INSERT OR REPLACE INTO shadow_claims (claim_id, record) VALUES (?, ?)", upserts))
        if deletes:
            writes.append(("DELETE FROM shadow_claims WHERE claim_id = ?", deletes))
        return writes

    def _put_writes(self) -> None:
        self.queue.add_writes(self.take_writes())

    # ------------------------------------------------------------------ ending claims
    def drop(self, claim: Claim) -> None:
        """Forget ``claim`` (it ended)."""
        self.by_id.pop(claim.claim_id, None)
        if claim.job is not None and self.by_job.get(claim.job) is claim:
            del self.by_job[claim.job]
        if claim.ahead:  # the startd drops its queue with the claim: those jobs are Idle again
            self.return_ahead(claim)
        self.changed(claim)
        _wake(claim)

    def release(self, claim: Claim) -> None:
        """Give ``claim`` back to its startd."""
        self.drop(claim)
        self.stats["ClaimsReleased"] += 1
        self._spawn(self.call_startd(claim.startd, "ReleaseClaim", {"ClaimId": claim.claim_id}), "release")

    def free(self, claim: Claim, job: tuple[int, int]) -> None:
        """``claim`` no longer waits to run ``job`` (nor is ``job`` reserved)."""
        self.reserved.discard(job)
        if self.by_job.get(job) is claim:
            del self.by_job[job]
        if claim.job == job:
            claim.job, claim.state = None, IDLE
            claim.buffered.clear()

    # ------------------------------------------------------------------ calls to startds
    async def call_startd(self, startd: str, method_name: str, args: dict[str, Any]) -> MethodResult | None:
        """A startd's answer, or None when it gave none within SHADOW_CALL_TIMEOUT."""
        try:
            result = await self._call(startd, method_name, args, self.settings.shadow_call_timeout)
        except CallTimeout:
            log.info("%s did not answer %s", startd, method_name)
            return None
        if not result.ok:
            log.info("%s refused %s: %s", startd, method_name, result.text)
        return result

    async def call(self, startd: str, method_name: str, args: dict[str, Any], timeout: float) -> MethodResult:
        """The daemon call itself (raises CallTimeout): for callers that handle no answer themselves."""
        return await self._call(startd, method_name, args, timeout)

    async def stop_running_job(self, cluster: int, proc: int) -> bool:
        """Stop a running job for a Hold or Remove: deactivate its claim (the claim stays, and is
        reused when the startd reports the job gone). Returns False if no claim runs the job."""
        claim = self.by_job.get((cluster, proc))
        if claim is None:
            return False
        claim.stopping = True
        if claim.state == ACTIVATING:
            # The activation's outcome finds the job no longer idle: the claim passes to the next
            # job, or, should the startd have started it, the job is stopped (Shadows.stop_unwanted_job).
            return True
        await self.call_startd(claim.startd, "DeactivateClaim", deactivation(claim, (cluster, proc), graceful=True))
        return True

    async def call_job_claim(self, cluster: int, proc: int, method_name: str,
                             args: dict[str, Any] | None = None) -> MethodResult | None:
        """Call a startd method on the claim that runs a job (SuspendClaim, ContinueClaim,
        DeactivateClaim for Suspend, Continue, Vacate); None if no claim runs it."""
        claim = self.by_job.get((cluster, proc))
        if claim is not None and claim.state == ACTIVATING and claim.restarting:
            await self._until_running(claim)
        if claim is None or claim.state != RUNNING_JOB or self.by_job.get((cluster, proc)) is not claim:
            return None
        if method_name == "DeactivateClaim":  # (the job named: see `deactivation`)
            args = deactivation(claim, (cluster, proc), graceful=bool((args or {}).get("Graceful", True)))
            return await self.call_startd(claim.startd, method_name, args)
        return await self.call_startd(claim.startd, method_name, {"ClaimId": claim.claim_id, **(args or {})})

    async def _until_running(self, claim: Claim) -> None:
        """Wait (SHADOW_CALL_TIMEOUT at most) until the job restarting in place on ``claim`` (its
        checkpoint taken) runs again, or the claim has moved on: a Vacate that came in between
        was dropped, and the job ran on to its end where it was."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        claim.run_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, self.settings.shadow_call_timeout)
        except TimeoutError:
            pass
        finally:
            if waiter in claim.run_waiters:
                claim.run_waiters.remove(waiter)

    def statistics(self) -> dict[str, Any]:
        return {**self.stats, "Claims": len(self.by_id), "JobsRunningOnClaims": len(self.by_job),
                "JobsAhead": len(self.ahead_of)}


def _wake(claim: Claim) -> None:
    """The calls waiting for ``claim``'s job to run again go on (it runs, or the claim moved on)."""
    waiters, claim.run_waiters = claim.run_waiters, []
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
