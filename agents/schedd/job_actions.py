"""Job actions: Hold, Release, Remove and SetAttribute (condor_hold/release/rm/qedit), on the
scheduler (by Ids or Constraint) and on job objects; Suspend, Continue, Vacate and VacateFast
(condor_suspend/continue/vacate_job) on the scheduler; answered with htcondor2's totals ad.

Suspend and Continue act on the job's claim (the startd freezes or thaws the job's processes) and
the job's status follows the startd's answer, as HTCondor's does the starter's: Suspended (7) and
user-log event 010 with the number of processes suspended, Running and event 011. Vacate stops the
job on its claim (gracefully, or with SIGKILL for VacateFast); the startd's exit report, an
eviction, puts it back to Idle with event 004."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd.actions import Totals, parse_value
from gridbus.agents.schedd.claims import Claims, Spawn
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobattrs import (
    ATTR_NAME,
    COMPLETED,
    HELD,
    IDLE,
    REMOVED,
    RESERVED_WORDS,
    RUNNING,
    SCHEDD_OWNED,
    SUSPENDED,
    HoldCode,
    parse_job_id,
)
from gridbus.agents.schedd.jobevents import JobEvents
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.jobstate import JobState
from gridbus.agents.schedd.policy_loop import PeriodicPolicy
from gridbus.agents.schedd.queries import compile_constraint
from gridbus.agents.schedd.users import Users
from gridbus.eventlog import writer
from gridbus.status import MethodError, Status, forbidden, invalid

log = logging.getLogger("gridbus.schedd.actions")

# Actions carried out on the job's claim, after the queue's commit: (startd method, its arguments).
CLAIM_ACTIONS = {
    "Suspend": ("SuspendClaim", {}),
    "Continue": ("ContinueClaim", {}),
    "Vacate": ("DeactivateClaim", {"Graceful": True}),
    "VacateFast": ("DeactivateClaim", {"Graceful": False}),
}


class JobActions:
    def __init__(self, queue: JobQueue, state: JobState, claims: Claims, events: JobEvents, users: Users,
                 policy: PeriodicPolicy, commits: Commits, spawn: Spawn, ads_changed: Callable[[], None]):
        self.queue = queue
        self.state = state
        self.claims = claims
        self.events = events
        self.users = users
        self.policy = policy
        self.commits = commits
        self._spawn = spawn
        self._ads_changed = ads_changed

    @method("scheduler")
    async def Hold(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "Hold", Ids, Constraint, Reason)

    @method("scheduler")
    async def Release(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "Release", Ids, Constraint, Reason)

    @method("scheduler")
    async def Remove(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "Remove", Ids, Constraint, Reason)

    @method("scheduler")
    async def Suspend(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "Suspend", Ids, Constraint, Reason)

    @method("scheduler")
    async def Continue(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "Continue", Ids, Constraint, Reason)

    @method("scheduler")
    async def Vacate(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "Vacate", Ids, Constraint, Reason)

    @method("scheduler")
    async def VacateFast(self, call: Call, Ids: list, Constraint: Any, Reason: str) -> dict:
        return await self._act(call, "VacateFast", Ids, Constraint, Reason)

    @method("scheduler")
    async def SetAttribute(self, call: Call, Ids: list, Constraint: Any, Name: str, Value: Any) -> dict:
        name = _check_attr_name(Name)
        return await self._act(call, "SetAttribute", Ids, Constraint, "", (name, parse_value(Value, name)))

    # ---- the same on job objects (named by GlobalJobId or "c.p")
    @method("job", "Hold")
    async def JobHold(self, call: Call, Reason: str) -> dict:
        return await self._act(call, "Hold", [call.object], "", Reason)

    @method("job", "Release")
    async def JobRelease(self, call: Call, Reason: str) -> dict:
        return await self._act(call, "Release", [call.object], "", Reason)

    @method("job", "Remove")
    async def JobRemove(self, call: Call, Reason: str) -> dict:
        return await self._act(call, "Remove", [call.object], "", Reason)

    @method("job", "SetAttribute")
    async def JobSetAttribute(self, call: Call, Name: str, Value: Any) -> dict:
        name = _check_attr_name(Name)
        return await self._act(call, "SetAttribute", [call.object], "", "", (name, parse_value(Value, name)))

    # ------------------------------------------------------------------ the work
    def _select(self, ids: list, constraint: Any, totals: Totals, *, for_remove: bool = False) -> list[Proc]:
        if not ids and not (isinstance(constraint, str) and constraint.strip()) and type(constraint).__name__ != "ExprTree":
            raise invalid("name the jobs to act on: give Ids ('c.p' or 'c') or a Constraint")
        out: list[Proc] = []
        seen: set[tuple[int, int]] = set()
        for raw in ids:
            try:
                cid, pid = parse_job_id(raw)
            except ValueError as exc:
                raise invalid(str(exc)) from None
            c = self.queue.clusters.get(cid)
            if pid is None:
                if c is None:
                    totals.not_found += 1
                    continue
                procs = [c.procs[k] for k in sorted(c.procs)]
                if not procs:
                    totals.not_found += 1
                out.extend(p for p in procs if p.key not in seen)
                seen.update(p.key for p in procs)
                if for_remove:
                    totals.factories.append(c)
                continue
            p = c.procs.get(pid) if c else None
            if p is None:
                totals.not_found += 1
            elif p.key not in seen:
                seen.add(p.key)
                out.append(p)
        if constraint is not None and str(constraint).strip():
            test = compile_constraint(constraint)
            for p in self.queue.procs():
                if p.key not in seen and test(self.queue.ad(p)):
                    seen.add(p.key)
                    out.append(p)
        return out

    async def _act(self, call: Call, action: str, ids: list, constraint: Any, reason: str,
             attr: tuple[str, Any] | None = None) -> dict[str, Any]:
        user = call.require_user()
        totals = Totals()
        procs = self._select(ids, constraint, totals, for_remove=action == "Remove")
        totals.job_ads = len(procs)
        reason = reason or f"via gridbus {action.lower()}"
        full_reason = f"{reason} (by user {user})"
        stops: list[Proc] = []
        on_claims: list[Proc] = []  # Suspend, Continue, Vacate: done on the job's claim after the commit
        now = time.time()
        # A cluster removed whole stops materializing first, or each removal would make a new proc.
        for c in totals.factories:
            if c.owner == user or self.users.is_super(user):
                self.queue.stop_factory(c)
        for p in procs:
            if not self.users.may_act(user, p):
                totals.denied += 1
                totals.denials.append(f"{p.cluster.id}.{p.id} (owner {p.cluster.owner})")
                continue
            try:
                if action in CLAIM_ACTIONS:
                    outcome = self._claim_outcome(action, p, now)
                    if outcome == "success":
                        on_claims.append(p)
                else:
                    outcome = self._apply(action, p, full_reason, attr, now, stops)
            except MethodError:
                raise
            except Exception:
                log.exception("%s of %d.%d failed", action, p.cluster.id, p.id)
                totals.error += 1
                continue
            totals.add(outcome)
        await self.state.commit_and_stop(stops)
        for p in on_claims:
            self._spawn(self._on_claim(action, p), f"{action.lower()}-job")
        if totals.changed:
            self._ads_changed()
        result = totals.as_ad()
        if totals.denied and not totals.success:
            who = ", ".join(totals.denials[:5]) + (" ..." if len(totals.denials) > 5 else "")
            raise MethodError(
                Status.FORBIDDEN,
                f"{user} may not {action.lower() if action != 'SetAttribute' else 'edit'} job(s) {who}: "
                "only a job's owner or a queue super user (QUEUE_SUPER_USERS) may change a job",
                {"Totals": result},
            )
        return {"Totals": result}

    def _claim_outcome(self, action: str, p: Proc, now: float) -> str:
        """Whether a Suspend, Continue or Vacate applies to the job: 'success', 'bad_status' or
        'already_done'."""
        if action == "Suspend":
            return "already_done" if p.status == SUSPENDED else "success" if p.status == RUNNING else "bad_status"
        if action == "Continue":
            return "already_done" if p.status == RUNNING else "success" if p.status == SUSPENDED else "bad_status"
        if p.status == SUSPENDED:
            # The startd thaws a suspended job before it stops it: it runs until its eviction.
            self.queue.set_status(p, RUNNING, when=now)
            self.events.emit("unsuspended", self.queue.ad(p), writer.unsuspended(p.cluster.id, p.id, now))
            return "success"
        return "success" if p.status == RUNNING else "bad_status"

    async def _on_claim(self, action: str, p: Proc) -> None:
        """Carry out a Suspend, Continue or Vacate on the job's claim; the status follows the answer."""
        method_name, args = CLAIM_ACTIONS[action]
        result = await self.claims.call_job_claim(p.cluster.id, p.id, method_name, args)
        if result is None or not result.ok:
            why = "no claim runs it" if result is None else result.text
            log.info("%s of job %d.%d not carried out: %s", action, p.cluster.id, p.id, why)
            return
        if self.queue.proc(p.cluster.id, p.id) is not p:
            return
        now = time.time()
        if action == "Suspend" and p.status == RUNNING:
            self.queue.set_status(p, SUSPENDED, {"TotalSuspensions": int(p.get("TotalSuspensions", 0)) + 1}, when=now)
            count = result.outArgs.get("Processes", 0)
            self.events.emit("suspended", self.queue.ad(p),
                             writer.suspended(p.cluster.id, p.id, now, count if isinstance(count, int) else 0))
        elif action == "Continue" and p.status == SUSPENDED:
            self.queue.set_status(p, RUNNING, when=now)
            self.events.emit("unsuspended", self.queue.ad(p), writer.unsuspended(p.cluster.id, p.id, now))
        else:
            return
        self.commits.soon()
        self._ads_changed()

    def _apply(self, action: str, p: Proc, reason: str, attr: tuple[str, Any] | None, now: float,
               stops: list[Proc]) -> str:
        """Apply one action to one job; returns 'success', 'bad_status' or 'already_done'."""
        if action == "Hold":
            if p.status == HELD:
                return "already_done"
            if p.status in (REMOVED, COMPLETED):
                return "bad_status"
            self.state.hold_job(p, reason, int(HoldCode.USER_REQUEST), 0, now, stops)
            return "success"
        if action == "Release":
            if p.status != HELD:
                return "bad_status"
            self.state.release_job(p, reason, now)
            return "success"
        if action == "Remove":
            if p.status == REMOVED:
                return "already_done"
            self.state.remove_job(p, reason, now, stops)
            return "success"
        if action == "SetAttribute":
            assert attr is not None
            name, value = attr
            if p.status in (REMOVED, COMPLETED):
                return "bad_status"
            self.queue.update(p, {name: value})
            self.policy.attribute_set(p.cluster.id, name)
            if p.status == IDLE:
                self.claims.withdraw_ahead(p.key)  # queued ahead with its old ad: it goes back
            return "success"
        raise invalid(f"unknown action {action}")


def _check_attr_name(name: str) -> str:
    if not ATTR_NAME.fullmatch(name or "") or name.lower() in RESERVED_WORDS:
        raise invalid(f"SetAttribute: {name!r} is not a valid attribute name (letters, digits and _, not a reserved word)")
    if name.lower() in SCHEDD_OWNED:
        raise forbidden(f"SetAttribute may not change {name}: the schedd keeps it "
                        "(use Hold, Release or Remove to change a job's status)")
    return name
