"""The slot ads, and the match test a claim or an activation makes against them.

A slot's ad is the machine's attributes, the slot's resources, state and activity, its claim and
job, and the START, WithinResourceLimits, Requirements and Rank expressions; it is what the
collector advertises, what RequestClaim answers, and what both Requirements are tested on
(execution resources have the final say: RequestClaim and every activation test them again).
Private ads carry the claim ids the negotiator may hand out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gridbus import classad
from gridbus.accounting import group_member
from gridbus.agent import Call, method
from gridbus.agents.startd import gpus as gpu
from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.detect import load_average
from gridbus.agents.startd.settings import StartdSettings

# The slot's Requirements (sl.REQUIREMENTS) with START spelled as the slot ad spells it: a name
# found as written spares the evaluation a lower-case copy of the slot ad at every activation.
_SLOT_TEST = sl.REQUIREMENTS.replace("START", "Start")


class SlotAds:
    def __init__(self, name: str, address: str, table: sl.SlotTable, machine_attrs: dict[str, Any],
                 gpu_devices: tuple[gpu.Gpu, ...], settings: StartdSettings):
        self.name = name
        self.address = address
        self.table = table
        self.machine_attrs = machine_attrs
        self.gpus = len(gpu_devices)
        self.gpu_devices = {d.id: d for d in gpu_devices}
        # What the admin adds (cron.py): STARTD_ATTRS, then the cron jobs' reports (kept in place
        # by the cron, which replaces them as the jobs report).
        self.configured: dict[str, Any] = {}
        self.cron_attrs: dict[str, Any] = {}
        # The startd's own counters (requests, their runtime, reconnects, transfers): HTCondor's
        # startd publishes its daemon statistics in its slot ads; here only the first slot's ad
        # carries them, so a startd of 10,000 slots does not send them 10,000 times a round.
        self.daemon_stats: Callable[[], dict[str, Any]] = dict
        self.reconfigure(settings)

    def reconfigure(self, settings: StartdSettings) -> None:
        """START, RANK and the default requests as ``settings`` has them now."""
        wrl = sl.WITHIN_RESOURCE_LIMITS + (sl.WITHIN_GPU_LIMITS if self.gpus else "")
        self.exprs = {
            "Start": classad.ExprTree(settings.start),
            "WithinResourceLimits": classad.ExprTree(wrl),
            "Requirements": classad.ExprTree(sl.REQUIREMENTS),
            "Rank": classad.ExprTree(settings.rank),
        }
        self.retirement = classad.compile(settings.max_job_retirement_time)
        self.rank = classad.compile(settings.rank)
        self.defaults = sl.Request(settings.default_request_cpus, settings.default_request_memory,
                                   settings.default_request_disk)
        self.configured = dict(settings.startd_attrs)

    # ------------------------------------------------------------------ ads
    def slot_ad(self, slot: sl.Slot, load: float | None = None, with_job: bool = True) -> dict[str, Any]:
        """The slot's ad; ``with_job`` false: without its running job's attributes (as the claim's
        next job finds the slot), which are then not computed at all (RANK, retirement)."""
        ad: dict[str, Any] = {
            "MyType": "Machine",
            "TargetType": "Job",
            "Name": slot.name,
            "MyAddress": self.address,
            **self.machine_attrs,
            # After the machine's attributes, before the slot's own: an admin's attribute may
            # stand for a machine one, never rename a slot or change its resources or state.
            **self.configured,
            **self.cron_attrs,
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
            **self.exprs,
        }
        if self.gpus:
            ad["GPUs"] = slot.gpus
            ad["TotalSlotGPUs"] = slot.total_gpus if slot.kind != sl.DYNAMIC else len(slot.gpu_ids)
            held = [self.gpu_devices[i] for i in slot.gpu_ids if i in self.gpu_devices]
            ad.update(gpu.slot_attributes(held, slot.free_gpu_ids()))
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
            if claim.job is not None and with_job:
                job_ad = claim.job.ad
                ad["JobStart"] = int(claim.job.started)
                cluster, proc = lookup(job_ad, "ClusterId"), lookup(job_ad, "ProcId")
                if cluster is not None:
                    ad["JobId"] = f"{cluster}.{proc}"
                if lookup(job_ad, "GlobalJobId") is not None:
                    ad["GlobalJobId"] = lookup(job_ad, "GlobalJobId")
                # For a negotiator weighing preemption (HTCondor's attributes): the RANK of the
                # job it runs, and the seconds it may run on once preempted.
                ad["CurrentRank"] = self.rank_of(ad, job_ad)
                ad["MaxJobRetirementTime"] = self.retirement_of(ad, job_ad)
                member = group_member(job_ad, claim.owner, lookup)
                if member:  # HTCondor's slot attribute: whom the negotiator charges the running job to
                    ad["AccountingGroup"] = member
            if with_job and "AccountingGroup" not in ad and claim.accounting_group:
                ad["AccountingGroup"] = claim.accounting_group  # claimed, its job not started yet
        if self.table.drain is not None:
            ad["DrainReason"] = self.table.drain.reason
        return ad

    def next_start_ad(self, slot: sl.Slot) -> dict[str, Any]:
        """The slot's ad as the claim's next job finds it at its start: the job before it gone,
        the claim Idle (a successor is checked while that job still runs)."""
        ad = self.slot_ad(slot, with_job=False)
        ad["Activity"] = sl.IDLE
        ad["EnteredCurrentActivity"] = int(time.time())
        return ad

    def ads(self) -> list[dict[str, Any]]:
        load = load_average()
        ads = [self.slot_ad(s, load) for s in self.table.slots.values()]
        if ads:
            ads[0].update(self.daemon_stats())
        return ads

    def _first_slot(self) -> str | None:
        return next(iter(self.table.slots), None)

    @method("startd")
    async def GetSlots(self, call: Call) -> dict:
        return {"Slots": self.ads()}

    def private_ads(self, slots: Iterable[sl.Slot] | None = None) -> list[dict[str, Any]]:
        # Only claim ids the negotiator may hand out: unclaimed static slots, partitionable
        # slots, and the preempting claim id of a claimed static slot; none while draining.
        if self.table.drain is not None:
            return []
        out = []
        for s in self.table.slots.values() if slots is None else slots:
            if s.kind == sl.PARTITIONABLE or (s.kind == sl.STATIC and s.claim is None and s.state == sl.UNCLAIMED):
                out.append({"MyType": "Machine", "Name": s.name, "ClaimId": s.claim_id})
            elif s.kind == sl.STATIC and s.claim is not None and s.preempting_id and not s.claim.retiring:
                # ClaimId as the collector already had it (the claim's own, from before the
                # claim), and the id a negotiator may hand out to preempt the claim.
                out.append({"MyType": "Machine", "Name": s.name, "ClaimId": s.claim_id,
                            "PreemptingClaimId": s.preempting_id})
        return out

    def rank_of(self, slot_ad: Mapping[str, Any], job: Mapping[str, Any]) -> float:
        """The slot's RANK of ``job`` (0 when it is not a number)."""
        return _number(self.rank.eval(slot_ad, job))

    def retirement_of(self, slot_ad: Mapping[str, Any], job: Mapping[str, Any]) -> float:
        """Seconds a preempted job may run on: MAXJOBRETIREMENTTIME, or the job's own
        MaxJobRetirementTime when that is shorter (HTCondor takes the smaller)."""
        machine = _number(self.retirement.eval(slot_ad, job))
        own = lookup(job, "MaxJobRetirementTime")
        if own is None:
            return machine
        if not isinstance(own, int | float) or isinstance(own, bool):
            own = classad.compile(str(own)).eval(job, slot_ad)
        return min(machine, _number(own))

    def ads_named(self, names: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The public and private ads of the slots named, for a round of only the slots that
        changed (a name without a slot now is one gone: the advertiser invalidates it)."""
        slots = [self.table.slots[n] for n in names if n in self.table.slots]
        load = load_average()
        ads = [self.slot_ad(s, load) for s in slots]
        first = self._first_slot()
        for ad in ads:
            if ad["Name"] == first:
                ad.update(self.daemon_stats())
        return ads, self.private_ads(slots)

    # ------------------------------------------------------------------ matching
    def job_for_match(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """The job ad with the default requests for what it leaves out."""
        ad = dict(job)
        for attr, value in (("RequestCpus", self.defaults.cpus), ("RequestMemory", self.defaults.memory),
                            ("RequestDisk", self.defaults.disk)):
            if lookup(ad, attr) is None:
                ad[attr] = value
        return ad

    def mismatch(self, slot_ad: Mapping[str, Any], job: Mapping[str, Any]) -> str | None:
        """Why the slot and the job do not match (both Requirements), or None if they do."""
        if not classad.compile(_SLOT_TEST).test(slot_ad, job):
            return (f"{slot_ad['Name']} does not accept this job: its Requirements (START && WithinResourceLimits) "
                    f"are not met (Cpus={slot_ad['Cpus']}, Memory={slot_ad['Memory']}, Disk={slot_ad['Disk']}; "
                    f"job asks RequestCpus={lookup(job, 'RequestCpus')}, RequestMemory={lookup(job, 'RequestMemory')}, "
                    f"RequestDisk={lookup(job, 'RequestDisk')})")
        req = lookup(job, "Requirements")
        if req is None or req is True:
            return None
        if req is False or isinstance(req, str):
            return f"the job's Requirements ({req!r}) are not an expression that can be true"
        try:
            compiled = classad.compile(str(req))
        except classad.ClassAdException as exc:  # a list or a map sent as the Requirements
            return f"the job's Requirements ({req!r}) are not an expression: {exc}"
        if not compiled.test(job, slot_ad):
            return f"the job's Requirements ({req}) are false for {slot_ad['Name']}"
        return None


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else 0.0
