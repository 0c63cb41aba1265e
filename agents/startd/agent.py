"""The startd agent: advertises the slots, grants and keeps claims, runs jobs through the starter.

Execution resources have the final say (seed 003): RequestClaim and every activation re-check
both Requirements. The claim protocol is in docs/protocols.md, "Claiming and running". Two rules
from HTCondor's history shape the code:

- A job's exit is reported at once and frees the claim for the next activation at once: the
  claim is idle before the exit report is even queued, and nothing (usage sampling, cleaning,
  ads) runs in front of the report (seed 000: a starter still busy talking after its job ended
  made every claim reuse wait).
- Only an explicit "claim unknown" from the schedd ends a claim early; silence ends it only when
  its lease runs out (seed 002).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gridbus.agent import Agent, Call, method
from gridbus.agents.startd import cgroups
from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.accounts import RunAsPolicy, UserMap
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.detect import detect, load_average
from gridbus.agents.startd.limits import (
    HOLD_STARTD_HELD_JOB,
    RequestUndefined,
    activation_requests,
    memory_limit,
)
from gridbus.agents.startd.reports import Reporter
from gridbus.agents.startd.settings import StartdSettings
from gridbus.agents.startd.simulated import SimulatedStarter
from gridbus.agents.startd.starter import HOLD_FAILED_TO_CREATE_PROCESS, Job, Starter, StartFailed
from gridbus.status import MethodError, Status, app_error, forbidden, invalid

# Application statuses (Status.USER + n), each answered with a sentence.
CLAIM_REFUSED = 1  # the slot will not take this job: Requirements, resources, draining
CLAIM_BUSY = 2  # the claim is running a job already

log = logging.getLogger("gridbus.startd")


@dataclass
class DrainState:
    request_id: str
    how: str  # graceful, quick, fast
    on_completion: str  # nothing, resume
    reason: str
    started: float


class Startd(Agent):
    kind = "startd"
    classes = ("startd",)
    my_type = "Machine"

    def __init__(self, name: str | None = None, url: str | None = None, *,
                 settings: StartdSettings | None = None, **kw: Any):
        super().__init__(name or socket.getfqdn(), url, **kw)
        self.settings = settings or StartdSettings()
        self.settings.validate()
        self.machine = detect(self.settings.execute, self.settings.overrides)
        self.table = sl.SlotTable(
            self.name, self.machine.cpus, self.machine.memory, self.machine.disk, self.machine.gpus,
            self.settings.num_slots, self.settings.partitionable, self.settings.slot_share,
        )
        self.claims: dict[str, sl.Claim] = {}
        self.drain: DrainState | None = None
        self.defaults = sl.Request(self.settings.default_request_cpus, self.settings.default_request_memory,
                                   self.settings.default_request_disk)
        self.cgroups = None if self.settings.simulate_jobs else self._probe_cgroups()
        self.starter: Starter | SimulatedStarter = SimulatedStarter(
            on_exit=self._on_exit, runtime=self.settings.simulated_runtime) if self.settings.simulate_jobs else Starter(
            self.settings.execute,
            RunAsPolicy(self.settings.allow_runas_owner, self.settings.unprivileged_user, self.settings.allow_root_jobs,
                        user_map=UserMap.parse(self.settings.user_map)),
            killing_timeout=self.settings.killing_timeout,
            enforce_memory=self.settings.enforce_memory,
            on_exit=self._on_exit,
            on_usage=self._on_usage,
            usage_interval=self.settings.update_interval,
            check_interval=self.settings.memory_check_interval,
            spawn_threads=self.settings.spawn_threads,
            cgroup=self.cgroups,
            memory_policy=self.settings.memory_policy.lower(),
            pids_limit=self.settings.pids_limit,
        )
        self.reporter: Reporter | None = None
        self.counters = {"JobsStarted": 0, "JobsExited": 0}
        self._ending: dict[str, asyncio.Future] = {}  # claims being ended, done when they are
        self._starting: dict[str, dict[str, Any]] = {}  # claim id -> job ad being spawned on it
        self._launches: set[asyncio.Task] = set()
        self._launch_of: dict[str, asyncio.Task] = {}  # claim id -> its job's launch
        self._exprs: dict[str, Any] | None = None
        self._machine_attrs = {**self.machine.attributes(),
                               **(self.cgroups.attributes() if self.cgroups else {"HasCgroup": False}),
                               **({"SimulatedJobs": True} if self.settings.simulate_jobs else {})}

    def _probe_cgroups(self) -> cgroups.Hierarchy | None:
        """The jobs' cgroups: ``<BASE_CGROUP>/<this startd's name>``, or None (the process scan).

        A pool on a vhost other than "/" puts its vhost between them: pools of several users on one
        machine (personal pools, tests) have startds of the same name, and a starting startd kills
        what it finds in its own groups."""
        base = self.settings.base_cgroup.strip("/")
        own = cgroups.safe_name(self.name)
        if self.url.vhost != "/":
            own = f"{cgroups.safe_name(self.url.vhost)}/{own}"
        try:
            found = cgroups.probe(f"{base}/{own}" if base else "", self.settings.cgroup_version)
        except cgroups.CgroupError as exc:
            log.warning("jobs run without cgroups (their processes are found by scanning /proc): %s", exc)
            return None
        log.info("jobs run in %s", found.describe())
        return found

    # ------------------------------------------------------------------ management object
    def object_properties(self) -> dict[str, Any]:
        return {
            **super().object_properties(),
            "Machine": self.machine.machine,
            "Draining": self.drain is not None,
            "DrainRequestId": self.drain.request_id if self.drain else "",
        }

    def object_statistics(self) -> dict[str, Any]:
        return {
            **super().object_statistics(),
            **self.counters,
            "JobsRunning": len(self.starter.running),
            "ClaimsActive": len(self.claims),
            "ReportsSent": self.reporter.sent if self.reporter else 0,
            "ReportCallsFailed": self.reporter.failures if self.reporter else 0,
        }

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        # Before the first ad: a predecessor killed without a stop left its jobs in their groups.
        if self.cgroups is not None:
            found = await asyncio.get_running_loop().run_in_executor(None, self.cgroups.clean_leftovers)
            if found:
                log.warning("killed %d process(es) a previous startd %s left running", found, self.name)

    async def on_start(self) -> None:
        self.reporter = Reporter(
            self._call_job_reports,
            timeout=self.settings.report_timeout,
            retry=self.settings.report_retry,
            is_live=lambda cid: cid in self.claims,
            on_unknown=self._on_unknown,
            on_answered=self._on_answered,
            on_activations=self._on_activations,
        )
        self.spawn(self.starter.monitor(), "starter monitor")
        self.spawn(self._lease_loop(), "claim leases")

    async def on_stop(self) -> None:
        await self.starter.shutdown()
        if self.cgroups is not None:
            self.cgroups.remove_base()
        if self.reporter is not None:
            await self.reporter.close()

    async def reconfig(self) -> list[str]:
        """Apply what can change without a restart: START, RANK, the starter's timers and policy."""
        import dataclasses

        changed = await super().reconfig()
        if self.config is None or not changed:
            return changed
        fresh = StartdSettings.from_config(self.config)
        live = {"start", "rank", "killing_timeout", "update_interval", "memory_check_interval", "enforce_memory",
                "allow_runas_owner", "unprivileged_user", "allow_root_jobs", "user_map", "report_timeout", "report_retry"}
        live |= {"memory_policy", "pids_limit"}
        self.settings = dataclasses.replace(self.settings, **{k: getattr(fresh, k) for k in live})
        self._exprs = None
        st = self.starter
        st.killing_timeout, st.enforce_memory = self.settings.killing_timeout, self.settings.enforce_memory
        st.usage_interval, st.check_interval = self.settings.update_interval, self.settings.memory_check_interval
        st.memory_policy, st.pids_limit = self.settings.memory_policy.lower(), self.settings.pids_limit
        st.policy = RunAsPolicy(self.settings.allow_runas_owner, self.settings.unprivileged_user, self.settings.allow_root_jobs,
                        user_map=UserMap.parse(self.settings.user_map))
        if self.reporter is not None:
            self.reporter.timeout, self.reporter.retry = self.settings.report_timeout, self.settings.report_retry
        self.ads_changed()
        return changed

    async def _call_job_reports(self, schedd: str, batch: list[dict[str, Any]], timeout: float) -> Any:
        return await self.client.call(schedd, "JobReports", {"Reports": batch}, timeout=timeout)

    # ------------------------------------------------------------------ ads
    def exprs(self) -> dict[str, Any]:
        if self._exprs is None:
            from gridbus.classad import ExprTree

            wrl = sl.WITHIN_RESOURCE_LIMITS + (sl.WITHIN_GPU_LIMITS if self.machine.gpus else "")
            self._exprs = {
                "Start": ExprTree(self.settings.start),
                "WithinResourceLimits": ExprTree(wrl),
                "Requirements": ExprTree(sl.REQUIREMENTS),
                "Rank": ExprTree(self.settings.rank),
            }
        return self._exprs

    def slot_ad(self, slot: sl.Slot, load: float | None = None) -> dict[str, Any]:
        ad: dict[str, Any] = {
            "MyType": "Machine",
            "TargetType": "Job",
            "Name": slot.name,
            "MyAddress": self.address,
            **self._machine_attrs,
            "SlotID": slot.slot_id,
            "SlotTypeID": 1 if slot.kind != sl.STATIC else 0,
            "SlotType": slot.kind,
            "PartitionableSlot": slot.kind == sl.PARTITIONABLE,
            "Cpus": slot.cpus,
            "Memory": slot.memory,
            "Disk": slot.disk,
            "TotalSlotCpus": slot.total_cpus if slot.kind != sl.DYNAMIC else slot.cpus,
            "TotalSlotMemory": slot.total_memory if slot.kind != sl.DYNAMIC else slot.memory,
            "TotalSlotDisk": slot.total_disk if slot.kind != sl.DYNAMIC else slot.disk,
            "TotalSlots": len(self.table.slots),
            "State": slot.state,
            "Activity": slot.activity,
            "EnteredCurrentState": slot.entered_state,
            "EnteredCurrentActivity": slot.entered_activity,
            "LoadAvg": load if load is not None else load_average(),
            "StartdName": self.name,
            **self.exprs(),
        }
        if self.machine.gpus:
            ad["GPUs"] = slot.gpus
        if slot.kind == sl.DYNAMIC:
            ad["DynamicSlot"] = True
            ad["SlotTypeID"] = -1
        if slot.kind == sl.PARTITIONABLE:
            children = sorted(slot.children.values(), key=lambda s: s.sub_id)
            ad["NumDynamicSlots"] = len(children)
            ad["ChildCpus"] = [c.cpus for c in children]
            ad["ChildMemory"] = [c.memory for c in children]
            ad["ChildName"] = [c.name for c in children]
        claim = slot.claim
        if claim is not None:
            ad["RemoteOwner"] = claim.owner
            ad["RemoteUser"] = claim.user
            ad["ClientMachine"] = claim.schedd
            if claim.job is not None:
                job_ad = claim.job.ad
                ad["JobStart"] = int(claim.job.started)
                cluster, proc = lookup(job_ad, "ClusterId"), lookup(job_ad, "ProcId")
                if cluster is not None:
                    ad["JobId"] = f"{cluster}.{proc}"
                if lookup(job_ad, "GlobalJobId") is not None:
                    ad["GlobalJobId"] = lookup(job_ad, "GlobalJobId")
        if self.drain is not None:
            ad["DrainReason"] = self.drain.reason
        return ad

    def ads(self) -> list[dict[str, Any]]:
        load = load_average()
        return [self.slot_ad(s, load) for s in self.table.slots.values()]

    def private_ads(self) -> list[dict[str, Any]]:
        # Only claim ids the negotiator may hand out: unclaimed static slots and partitionable
        # slots, and none while draining. A claimed slot's id stays between startd and schedd.
        if self.drain is not None:
            return []
        return [
            {"MyType": "Machine", "Name": s.name, "ClaimId": s.claim_id}
            for s in self.table.slots.values()
            if s.kind == sl.PARTITIONABLE or (s.kind == sl.STATIC and s.claim is None and s.state == sl.UNCLAIMED)
        ]

    # ------------------------------------------------------------------ matching
    def _job_for_match(self, job: Mapping[str, Any]) -> dict[str, Any]:
        ad = dict(job)
        for attr, value in (("RequestCpus", self.defaults.cpus), ("RequestMemory", self.defaults.memory),
                            ("RequestDisk", self.defaults.disk)):
            if lookup(ad, attr) is None:
                ad[attr] = value
        return ad

    def _mismatch(self, slot_ad: Mapping[str, Any], job: Mapping[str, Any]) -> str | None:
        """Why the slot and the job do not match (both Requirements), or None if they do."""
        from gridbus import classad

        if not classad.compile(sl.REQUIREMENTS).test(slot_ad, job):
            return (f"{slot_ad['Name']} does not accept this job: its Requirements (START && WithinResourceLimits) "
                    f"are not met (Cpus={slot_ad['Cpus']}, Memory={slot_ad['Memory']}, Disk={slot_ad['Disk']}; "
                    f"job asks RequestCpus={lookup(job, 'RequestCpus')}, RequestMemory={lookup(job, 'RequestMemory')}, "
                    f"RequestDisk={lookup(job, 'RequestDisk')})")
        req = lookup(job, "Requirements")
        if req is None or req is True:
            return None
        if req is False or isinstance(req, str):
            return f"the job's Requirements ({req!r}) are not an expression that can be true"
        if not classad.compile(str(req)).test(job, slot_ad):
            return f"the job's Requirements ({req}) are false for {slot_ad['Name']}"
        return None

    # ------------------------------------------------------------------ claim lookup
    def _claim(self, claim_id: str, what: str) -> sl.Claim:
        claim = self.claims.get(claim_id)
        if claim is None:
            slot = self.table.by_claim_id(claim_id)
            if slot is not None and slot.kind == sl.PARTITIONABLE:
                raise forbidden(f"{what}: {claim_id[:6]}... is the partitionable slot's id; RequestClaim carves a dynamic slot and gives its claim id")
            if slot is not None:
                raise forbidden(f"{what}: {slot.name} has not been claimed with this id; call RequestClaim first")
            raise forbidden(f"{what}: claim id {claim_id[:6]}... is not a claim of {self.address} (forged, or ended)")
        return claim

    # ------------------------------------------------------------------ methods: claims
    @method("startd")
    async def RequestClaim(self, call: Call, ClaimId: str, JobAd: dict, Schedd: str, LeaseDuration: int) -> dict:
        if not Schedd or "@" not in Schedd:
            raise invalid(f"RequestClaim: Schedd must be the schedd's agent address (kind@name), not {Schedd!r}")
        if LeaseDuration <= 0:
            raise invalid("RequestClaim: LeaseDuration must be a positive number of seconds")
        existing = self.claims.get(ClaimId)
        gid = str(JobAd.get("GlobalJobId") or "")
        if existing is not None:  # a retry of a call whose answer was lost: same answer
            if existing.schedd != Schedd:
                raise forbidden(f"RequestClaim: {existing.slot.name} is claimed by another schedd")
            if gid and existing.requested_for and gid != existing.requested_for:
                # Not a retry but a second match, made on an ad from before the claim: answering
                # "OK" would hand the schedd the claim of a job it already runs on this slot.
                raise app_error(CLAIM_REFUSED, f"RequestClaim: {existing.slot.name} is already claimed, for "
                                               f"job {existing.requested_for}; the match was made on an out-of-date ad")
            existing.renew()
            return {"ClaimId": existing.id, "Slot": existing.slot.name, "SlotAd": self.slot_ad(existing.slot),
                    "ReportActivations": True}
        slot = self.table.by_claim_id(ClaimId)
        if slot is None:
            raise forbidden(f"RequestClaim: claim id {ClaimId[:6]}... is not one {self.address} issued (forged or stale)")
        if self.drain is not None:
            raise app_error(CLAIM_REFUSED, f"RequestClaim: {self.address} is draining ({self.drain.how}) and takes no new claims")
        if slot.state == sl.OWNER:
            raise app_error(CLAIM_REFUSED, f"RequestClaim: {slot.name} is in the Owner state (START is false)")
        job = self._job_for_match(JobAd)
        ad = self.slot_ad(slot)
        if slot.kind == sl.STATIC:
            why = self._mismatch(ad, job)
            if why:
                raise app_error(CLAIM_REFUSED, f"RequestClaim refused: {why}")
            claim = self.table.claim(slot, Schedd, float(LeaseDuration), JobAd)
            claim.requested_for = gid
        else:  # partitionable: carve a dynamic slot of the request
            retried = self._carved_for(slot, Schedd, JobAd)
            if retried is not None:  # the answer to the first call was lost: same answer, no new slot
                retried.renew()
                return {"ClaimId": retried.id, "Slot": retried.slot.name,
                        "SlotAd": self.slot_ad(retried.slot), "ReportActivations": True}
            try:
                req = self.table.request_of(job, ad, self.defaults)
            except ValueError as exc:
                raise invalid(f"RequestClaim: {exc}") from None
            job = {**job, "RequestCpus": req.cpus, "RequestMemory": req.memory, "RequestDisk": req.disk}
            why = self._mismatch(ad, job)
            if why:
                raise app_error(CLAIM_REFUSED, f"RequestClaim refused: {why}")
            if req.cpus < 1 or req.memory < 1:
                raise app_error(CLAIM_REFUSED, "RequestClaim refused: a dynamic slot needs at least 1 cpu and 1 MiB")
            child = self.table.carve(slot, req)
            claim = self.table.claim(child, Schedd, float(LeaseDuration), JobAd)
            claim.requested_for = gid
            slot = child
        self.claims[claim.id] = claim
        log.info("%s claimed by %s for %s (lease %d s)", slot.name, Schedd, claim.owner or "?", LeaseDuration)
        self.ads_changed()
        # ReportActivations: this startd takes the claim's next activations in the answers to its
        # JobReports calls (docs/protocols.md, "Claiming and running").
        return {"ClaimId": claim.id, "Slot": slot.name, "SlotAd": self.slot_ad(slot), "ReportActivations": True}

    def _carved_for(self, pslot: sl.Slot, schedd: str, job_ad: dict) -> sl.Claim | None:
        """The unused dynamic slot an earlier RequestClaim of the same job carved from ``pslot``."""
        gid = str(job_ad.get("GlobalJobId") or "")
        if not gid:
            return None  # no identity to recognise a retry by: every request carves
        for claim in self.claims.values():
            if (claim.slot.parent is pslot and claim.schedd == schedd and claim.requested_for == gid
                    and claim.job is None and claim.last_ad is None):
                return claim
        return None

    @method("startd")
    async def ActivateClaims(self, call: Call, Activations: list) -> dict:
        results = []
        launches = []
        for i, entry in enumerate(Activations):
            cid = entry.get("ClaimId") if isinstance(entry, dict) else None
            try:
                if not isinstance(entry, dict) or not isinstance(cid, str) or not isinstance(entry.get("JobAd"), dict):
                    raise invalid(f"ActivateClaims: activation {i} must be a map with ClaimId (string) and JobAd (map)")
                launch = self._activate(cid, entry["JobAd"], repeat=entry.get("Repeat") is True)
                if launch is not None:
                    launches.append(launch)
                results.append({"ClaimId": cid, "Status": 0, "Text": "OK"})
            except MethodError as exc:
                results.append({"ClaimId": cid, "Status": exc.status, "Text": exc.text})
        # Answered once every accepted job runs (or was reported unable to start), as before.
        if launches:
            await asyncio.gather(*launches)
        return {"Results": results}

    @method("startd")
    async def ActivateClaim(self, call: Call, ClaimId: str, JobAd: dict) -> dict:
        launch = self._activate(ClaimId, JobAd)
        slot = self.claims[ClaimId].slot.name  # _activate refused unknown claims
        if launch is not None:
            await launch
        return {"Slot": slot}

    def _activate(self, claim_id: str, job_ad: dict, *, repeat: bool = False) -> asyncio.Task | None:
        """Check an activation (MethodError if refused) and launch its job on a spawner thread.

        Returns the launch's task (None for a repeat of the job the claim already runs, or, for an
        activation the schedd marks ``repeat``, of the job it ran last); the claim counts as busy
        from now on."""
        claim = self._claim(claim_id, "ActivateClaim")
        slot = claim.slot
        if claim.retiring or claim_id in self._ending:
            raise app_error(CLAIM_REFUSED, f"ActivateClaim: the claim on {slot.name} is retiring (draining or ending); no new job starts on it")
        current = claim.job.ad if claim.job is not None else self._starting.get(claim_id)
        if current is not None:
            if _same_job(current, job_ad):  # a repeated activation (its answer was lost): same answer
                return None
            raise app_error(CLAIM_BUSY, f"ActivateClaim: {slot.name} is still running job {_job_id(current)}")
        if repeat and claim.last_ad is not None and _same_job(claim.last_ad, job_ad):
            # The schedd asks again after an unanswered activation whose job ran and exited here
            # already (its exit report is on its way): the same answer, never a second run. An
            # activation not marked as a repeat (the job run again after an eviction) does run.
            return None
        claim.renew()
        ad = self.slot_ad(slot)
        # The requests as numbers, before the match test (which an undefined request would fail
        # with a reason about the slot): a request that is no number holds the job, naming it.
        held: StartFailed | None = None
        memory = slot.memory
        try:
            req = activation_requests(job_ad, ad, self.defaults)
        except RequestUndefined as exc:
            held = StartFailed(exc.reason, HOLD_STARTD_HELD_JOB)
        else:
            why = self._mismatch(ad, {**job_ad, "RequestCpus": req.cpus, "RequestMemory": req.memory,
                                      "RequestDisk": req.disk})
            if why:
                raise app_error(CLAIM_REFUSED, f"ActivateClaim refused: {why}")
            if lookup(job_ad, "RequestMemory") is not None:
                memory = memory_limit(req.memory)
        claim.last_ad = job_ad
        self._starting[claim.id] = job_ad
        task = asyncio.get_running_loop().create_task(self._launch(claim, job_ad, memory, held), name=f"launch {slot.name}")
        self._launches.add(task)
        self._launch_of[claim.id] = task
        task.add_done_callback(self._launches.discard)
        return task

    async def _launch(self, claim: sl.Claim, job_ad: dict, memory: int, held: StartFailed | None = None) -> None:
        slot = claim.slot
        try:
            if held is not None:  # refused at activation: reported as a job that could not start
                raise held
            started = await self.starter.start_async(claim.id, job_ad, slot.name, {"OMP_NUM_THREADS": str(slot.cpus)}, memory)
        except (StartFailed, OSError) as exc:
            # The protocol's one path for "it did not run": an exit report with the hold reason.
            if isinstance(exc, OSError):  # past the starter's own checks (pidfd_open, a thread): still a start failure
                exc = StartFailed(f"cannot start the job: {exc.strerror or exc}", HOLD_FAILED_TO_CREATE_PROCESS, exc.errno or 0)
            log.info("job %s could not start on %s: %s", _job_id(job_ad), slot.name, exc.reason)
            self._report(claim, job_ad, "exit", {"HoldReason": exc.reason, "HoldReasonCode": exc.code,
                                                  "HoldReasonSubCode": exc.subcode})
            if claim.retiring and claim.id not in self._ending and self.claims.get(claim.id) is claim:
                self.spawn(self._end_claim(claim, graceful=True, reason="drain"), "retire claim")  # drained meanwhile
            return
        finally:
            self._starting.pop(claim.id, None)
            self._launch_of.pop(claim.id, None)
        claim.job = started
        self.counters["JobsStarted"] += 1
        if self.claims.get(claim.id) is not claim:  # _end_claim waits for launches: not expected
            log.warning("claim on %s is gone while job %s was starting; stopping the job", slot.name, _job_id(job_ad))
            self.starter.stop(started, graceful=False, reason="release")
            return
        # A claim being ended or drained meanwhile stops or retires this job like a running one.
        if not claim.retiring and claim.id not in self._ending:
            slot.set(activity=sl.BUSY)
        self._report(claim, job_ad, "execute", {"Slot": slot.name, "RemoteHost": slot.name})
        self.ads_changed()

    @method("startd")
    async def DeactivateClaim(self, call: Call, ClaimId: str, Graceful: bool) -> dict:
        claim = self._claim(ClaimId, "DeactivateClaim")
        claim.renew()
        job = claim.job
        if job is not None:
            await self._stop_job(job, Graceful, "deactivate")
        return {}

    def _running_claim(self, claim_id: str, method_name: str, verb: str) -> sl.Claim:
        """The claim (renewed) whose job a freezer method acts on; refused if it runs none."""
        claim = self._claim(claim_id, method_name)
        claim.renew()
        if claim.job is None:
            raise app_error(CLAIM_REFUSED, f"{method_name}: {claim.slot.name} runs no job to {verb}")
        return claim

    @method("startd")
    async def SuspendClaim(self, call: Call, ClaimId: str) -> dict:
        """Suspend the claim's job where it is (the freezer); the slot's activity is Suspended."""
        claim = self._running_claim(ClaimId, "SuspendClaim", "suspend")
        count = self.starter.suspend(claim.job)
        claim.slot.set(activity=sl.SUSPENDED)
        self.ads_changed()
        return {"Processes": count}

    @method("startd")
    async def ContinueClaim(self, call: Call, ClaimId: str) -> dict:
        claim = self._running_claim(ClaimId, "ContinueClaim", "continue")
        self.starter.resume(claim.job)
        if claim.slot.activity == sl.SUSPENDED:
            claim.slot.set(activity=sl.BUSY)
        self.ads_changed()
        return {}

    @method("startd")
    async def ReleaseClaim(self, call: Call, ClaimId: str) -> dict:
        claim = self._claim(ClaimId, "ReleaseClaim")
        await self._end_claim(claim, graceful=True, reason="release")
        return {}

    @method("startd")
    async def Alive(self, call: Call, ClaimIds: list) -> dict:
        unknown = []
        for cid in ClaimIds:
            if not isinstance(cid, str):
                raise invalid(f"Alive: ClaimIds must be strings, got {type(cid).__name__}")
            claim = self.claims.get(cid)
            if claim is None:
                unknown.append(cid)
            else:
                claim.renew()
        return {"Unknown": unknown}

    @method("startd")
    async def GetSlots(self, call: Call) -> dict:
        return {"Slots": self.ads()}

    # ------------------------------------------------------------------ methods: drain, vacate
    @method("startd")
    async def Drain(self, call: Call, HowFast: str, OnCompletion: str, Reason: str) -> dict:
        how = HowFast.strip().lower()
        if how not in ("graceful", "quick", "fast"):
            raise invalid(f"Drain: HowFast must be graceful, quick or fast, not {HowFast!r}")
        on_completion = OnCompletion.strip().lower()
        if on_completion not in ("nothing", "resume"):
            raise invalid(f"Drain: OnCompletion must be nothing or resume, not {OnCompletion!r}")
        if self.drain is not None:
            raise app_error(CLAIM_REFUSED, f"Drain: {self.address} is already draining (request {self.drain.request_id}); cancel it first")
        self.drain = DrainState(secrets.token_hex(8), how, on_completion, Reason or f"drain requested by {call.user}", time.time())
        log.info("draining (%s) at the request of %s: %s", how, call.user, self.drain.reason)
        for claim in list(self.claims.values()):
            claim.retiring = True
            if claim.job is None and claim.id not in self._starting:
                self.spawn(self._end_claim(claim, graceful=True, reason="drain"), "drain idle claim")
            elif how == "graceful":
                claim.slot.set(activity=sl.RETIRING)
            else:
                self.spawn(self._end_claim(claim, graceful=how == "quick", reason="drain"), "drain claim")
        for slot in self.table.slots.values():
            if slot.claim is None:
                slot.set(sl.DRAINED, sl.RETIRING)
        self._check_drained()
        self.ads_changed()
        return {"RequestId": self.drain.request_id}

    @method("startd")
    async def CancelDrain(self, call: Call, RequestId: str) -> dict:
        if self.drain is None:
            raise app_error(CLAIM_REFUSED, f"CancelDrain: {self.address} is not draining")
        if RequestId and RequestId != self.drain.request_id:
            raise invalid(f"CancelDrain: the drain in effect is {self.drain.request_id}, not {RequestId!r}")
        self._cancel_drain()
        return {}

    def _cancel_drain(self) -> None:
        log.info("drain %s cancelled", self.drain.request_id if self.drain else "?")
        self.drain = None
        for slot in self.table.slots.values():
            if slot.claim is None:
                slot.set(sl.UNCLAIMED, sl.IDLE)
            else:
                slot.claim.retiring = False
                slot.set(activity=sl.BUSY if slot.claim.job is not None else sl.IDLE)
        self.ads_changed()

    def _check_drained(self) -> None:
        if self.drain is None or self.claims:
            return
        for slot in self.table.slots.values():
            slot.set(sl.DRAINED, sl.IDLE)
        log.info("drained")
        if self.drain.on_completion == "resume":
            self._cancel_drain()
        self.ads_changed()

    @method("startd")
    async def Vacate(self, call: Call, Slot: str, Graceful: bool) -> dict:
        if Slot and Slot not in self.table.slots:
            raise invalid(f"Vacate: {self.address} has no slot {Slot!r} (slots: {', '.join(self.table.slots)})")
        chosen = [
            c for c in self.claims.values()
            if not Slot or c.slot.name == Slot or (c.slot.parent is not None and c.slot.parent.name == Slot)
        ]
        await asyncio.gather(*(self._end_claim(c, graceful=Graceful, reason="vacate") for c in chosen))
        return {"Count": len(chosen)}

    # ------------------------------------------------------------------ ending claims
    async def _stop_job(self, job: Job, graceful: bool, reason: str) -> None:
        deadline = (self.settings.killing_timeout if graceful else 0) + 10
        try:
            await asyncio.wait_for(self.starter.stop_and_wait(job, graceful, reason), deadline)
        except TimeoutError:
            log.error("job %s on %s did not die within %.0f s of SIGKILL", _job_id(job.ad), job.slot, deadline)

    async def _end_claim(self, claim: sl.Claim, *, graceful: bool, reason: str) -> None:
        """Stop the claim's job (if any), then free its slot. Idempotent."""
        if claim.id in self._ending:  # someone else is ending it: wait for that
            await asyncio.shield(self._ending[claim.id])
            return
        done = asyncio.get_running_loop().create_future()
        self._ending[claim.id] = done
        try:
            launch = self._launch_of.get(claim.id)
            if launch is not None:  # a job being spawned is stopped like a running one, once it runs
                await asyncio.shield(launch)
            if claim.job is not None:
                claim.slot.set(sl.PREEMPTING, sl.VACATING if graceful else sl.KILLING)
                self.ads_changed()
                await self._stop_job(claim.job, graceful, reason)
            self.claims.pop(claim.id, None)
            self.table.free(claim.slot)
            if self.drain is not None and claim.slot.kind == sl.STATIC:
                claim.slot.set(sl.DRAINED, sl.RETIRING)
            log.info("claim on %s ended (%s)", claim.slot.name, reason)
        finally:
            self._ending.pop(claim.id, None)
            done.set_result(None)
        self._check_drained()
        self.ads_changed()

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease_check_interval())
            now = time.monotonic()
            for claim in list(self.claims.values()):
                if claim.id not in self._ending and claim.expired(now):
                    log.warning("claim on %s: lease of %.0f s ran out with no word from %s; ending it",
                                claim.slot.name, claim.lease, claim.schedd)
                    self.spawn(self._end_claim(claim, graceful=True, reason="lease"), "lease expired")

    def _lease_check_interval(self) -> float:
        leases = [c.lease for c in self.claims.values()]
        return max(0.1, min([1.0, *(lease / 10 for lease in leases)]))

    # ------------------------------------------------------------------ reports
    def _report(self, claim: sl.Claim, job_ad: Mapping[str, Any], event: str, extra: dict[str, Any]) -> None:
        report = {
            "ClaimId": claim.id,
            "GlobalJobId": lookup(job_ad, "GlobalJobId"),
            "ClusterId": lookup(job_ad, "ClusterId"),
            "ProcId": lookup(job_ad, "ProcId"),
            "Event": event,
            "Time": time.time(),
            **extra,
        }
        assert self.reporter is not None
        self.reporter.add(claim.schedd, report)

    def _on_exit(self, job: Job) -> None:
        """The starter reaped a job: free the claim for the next job, then report, at once."""
        self.counters["JobsExited"] += 1
        claim = self.claims.get(job.key)
        if claim is None or claim.job is not job:
            log.info("job %s exited after its claim ended; nobody to report to", _job_id(job.ad))
            return
        claim.job = None
        extra = dict(job.exit or {})
        if job.stop_reason and job.stop_reason != "memory":
            extra["Evicted"] = True
            extra["EvictReason"] = job.stop_reason
        ending = claim.retiring or claim.id in self._ending
        if ending:
            extra["ClaimEnded"] = True
        self._report(claim, job.ad, "exit", extra)
        if not ending:
            claim.slot.set(activity=sl.IDLE)
        elif claim.id not in self._ending:  # graceful drain: the retired claim ends now
            self.spawn(self._end_claim(claim, graceful=True, reason="drain"), "retire claim")
        self.ads_changed()

    def _on_usage(self, jobs: list[Job]) -> None:
        for job in jobs:
            claim = self.claims.get(job.key)
            if claim is not None and claim.job is job:
                self._report(claim, job.ad, "usage", job.usage())

    def _on_answered(self, claim_ids: list[str]) -> None:
        for cid in claim_ids:
            claim = self.claims.get(cid)
            if claim is not None:
                claim.renew()

    def _on_activations(self, schedd: str, activations: list[Any]) -> None:
        """Activations a schedd put in its answer to JobReports (claim reuse without a round trip of
        its own): each is started as ActivateClaims would, and its outcome is an ``activated``
        report (Status, Text) in the next JobReports call."""
        for i, entry in enumerate(activations):
            cid = entry.get("ClaimId") if isinstance(entry, dict) else None
            job_ad = entry.get("JobAd") if isinstance(entry, dict) else None
            if not isinstance(cid, str) or not isinstance(job_ad, dict):
                log.warning("%s answered JobReports with a malformed activation %d (needs ClaimId and JobAd)", schedd, i)
                continue
            claim = self.claims.get(cid)
            if claim is None or claim.schedd != schedd:
                log.warning("%s sent an activation for claim %s..., which it does not hold here", schedd, cid[:6])
                continue
            try:
                launch = self._activate(cid, job_ad, repeat=entry.get("Repeat") is True)
            except MethodError as exc:
                self._report(claim, job_ad, "activated", {"Status": exc.status, "Text": exc.text})
                continue
            if launch is None:
                self._report(claim, job_ad, "activated", {"Status": 0, "Text": "OK"})
            else:
                launch.add_done_callback(lambda _t, c=claim, a=job_ad: self._report(c, a, "activated", {"Status": 0, "Text": "OK"}))

    def _on_unknown(self, claim_ids: list[str]) -> None:
        for cid in claim_ids:
            claim = self.claims.get(cid)
            if claim is not None:
                log.warning("%s no longer knows the claim on %s: ending it", claim.schedd, claim.slot.name)
                self.spawn(self._end_claim(claim, graceful=True, reason="unknown to the schedd"), "claim unknown")


def _same_job(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(lookup(a, k) == lookup(b, k) for k in ("GlobalJobId", "ClusterId", "ProcId"))


def _job_id(ad: Mapping[str, Any]) -> str:
    return f"{lookup(ad, 'ClusterId')}.{lookup(ad, 'ProcId')}"


__all__ = ["CLAIM_BUSY", "CLAIM_REFUSED", "Startd", "Status"]
