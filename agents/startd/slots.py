"""Slots and claims: how a startd divides its machine, and who holds which part.

Static slots share the machine in fixed parts (NUM_SLOTS). A partitionable slot holds the whole
machine (or its slot type's share) and is carved, claim by claim, into dynamic slots of the
request's RequestCpus, RequestMemory, RequestDisk and RequestGPUs; a dynamic slot that goes away
gives its resources back. GPUs are handed out by device id, as cpus are by count: a slot's
``gpu_ids`` are the devices it holds (a partitionable slot's, all of its share; which of them are
free is what its dynamic slots do not hold). Which devices a request gets is ``gpus.pick``'s
choice, made from the slot ad's device properties. Names follow HTCondor: ``slotN@name`` and ``slotN_M@name``.

A claim id is a random secret. An unclaimed static slot and a partitionable slot each have one,
published only in the private ad, for the negotiator to hand to the schedd it matches. A claimed
slot's id is known only to the startd and the claiming schedd; when a claim ends, the slot gets a
fresh id so the old one is stale (status 6) from then on.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gridbus.accounting import group_member
from gridbus.agents.startd import gpus as gpu
from gridbus.agents.startd.arguments import lookup
from gridbus.classad.values import is_number

if TYPE_CHECKING:
    from gridbus.agents.startd.starter import Beside, Job

STATIC, PARTITIONABLE, DYNAMIC = "Static", "Partitionable", "Dynamic"

# HTCondor's states and activities (machine-attrs: State, Activity).
UNCLAIMED, CLAIMED, OWNER, PREEMPTING, DRAINED = "Unclaimed", "Claimed", "Owner", "Preempting", "Drained"
IDLE, BUSY, RETIRING, VACATING, KILLING = "Idle", "Busy", "Retiring", "Vacating", "Killing"
SUSPENDED = "Suspended"

# Reqexp.cpp: a slot takes a job only when the job's requests fit what the slot has.
WITHIN_RESOURCE_LIMITS = (
    "MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory "
    "&& MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk"
)
WITHIN_GPU_LIMITS = " && (TARGET.RequestGPUs =?= undefined || TARGET.RequestGPUs <= MY.GPUs)"
REQUIREMENTS = "START && WithinResourceLimits"


def new_claim_id() -> str:
    return secrets.token_urlsafe(24)


@dataclass
class DrainState:
    """A drain in effect (Drain): no new claim, and the claims retire as ``how`` says."""

    request_id: str
    how: str  # graceful, quick, fast
    on_completion: str  # nothing, resume
    reason: str
    started: float


@dataclass
class Successor:
    """A claim's next job queued ahead, checked and spawned while the claim's job runs: its child
    is ready (groups, streams, directory, account) and execs the moment that job exits."""

    seq: int
    ad: dict[str, Any]
    beside: Beside
    memory: int  # MiB, its limit


@dataclass
class Claim:
    id: str
    slot: Slot
    schedd: str  # the address reports go to
    lease: float  # seconds
    owner: str
    user: str
    renewed: float = field(default_factory=time.monotonic)
    since: float = field(default_factory=time.time)
    job: Job | None = None
    last_ad: Mapping[str, Any] | None = None  # the job ad of the current or last activation
    retiring: bool = False  # draining: no new activation; released when idle
    requested_for: str = ""  # GlobalJobId of the RequestClaim that made the claim (tells retries from re-matches)
    # Whom the claim is charged to (<AcctGroup>.<user>) from the job it was requested for: the slot
    # says so from the claim on, not from the job's start only, or a negotiator cycle between the
    # two would count the slot to the user and not to the group, and give the group more.
    accounting_group: str = ""
    launch: asyncio.Future[None] | None = None  # the job being spawned on the claim (its ad is last_ad)
    # Jobs the schedd queued ahead on the claim (CLAIM_PREFETCH_JOBS): (Seq, job ad), started in
    # order the moment the claim's job exits; ahead_seq is the highest Seq taken (a resent entry
    # is taken once).
    ahead: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    ahead_seq: int = 0
    ahead_peak: int = 0  # the most jobs queued ahead at once (how deep the schedd keeps the queue)
    successor: Successor | None = None  # the first of them, spawned already (STARTER_SPAWN_AHEAD)

    def renew(self) -> None:
        self.renewed = time.monotonic()

    def expired(self, now: float) -> bool:
        # The same sum as the lease heap's deadline (claims.py), so both agree to the last bit.
        return now > self.renewed + self.lease


@dataclass
class Slot:
    name: str
    slot_id: int
    kind: str
    cpus: int
    memory: int  # MiB
    disk: int  # KiB
    gpus: int = 0  # free devices: all it holds, less a partitionable slot's dynamic slots'
    gpu_ids: tuple[str, ...] = ()  # the devices it holds (AssignedGPUs)
    sub_id: int = 0
    parent: Slot | None = None
    children: dict[str, Slot] = field(default_factory=dict)
    total_cpus: int = 0  # a partitionable slot's whole share
    total_memory: int = 0
    total_disk: int = 0
    total_gpus: int = 0
    machine_gpus: int = 0  # the machine's: a job given none on a machine with some is told so
    next_child: int = 1
    claim_id: str = field(default_factory=new_claim_id)
    # A claimed static slot's preempting claim id: what a negotiator hands out to preempt its claim.
    preempting_id: str = ""
    claim: Claim | None = None
    state: str = UNCLAIMED
    activity: str = IDLE
    entered_state: int = field(default_factory=lambda: int(time.time()))
    entered_activity: int = field(default_factory=lambda: int(time.time()))

    def set(self, state: str | None = None, activity: str | None = None) -> bool:
        """Change state and/or activity, stamping the times; True if anything changed."""
        now = int(time.time())
        changed = False
        if state is not None and state != self.state:
            self.state, self.entered_state, changed = state, now, True
            if activity is None:
                activity = self.activity
            self.entered_activity = now
        if activity is not None and activity != self.activity:
            self.activity, self.entered_activity, changed = activity, now, True
        return changed

    @property
    def short(self) -> str:
        return self.name.split("@", 1)[0]

    def free_gpu_ids(self) -> tuple[str, ...]:
        """The devices not handed to a dynamic slot (a partitionable slot's; any other's, all)."""
        if not self.children:
            return self.gpu_ids
        held = {g for c in self.children.values() for g in c.gpu_ids}
        return tuple(g for g in self.gpu_ids if g not in held)

    def machine_has_gpus(self) -> bool:
        return self.machine_gpus > 0


@dataclass(frozen=True)
class Request:
    """What a job asks of a slot, evaluated against it (defaults for what the job leaves out)."""

    cpus: int
    memory: int
    disk: int
    gpus: int = 0
    gpu_ids: tuple[str, ...] = ()  # the devices chosen for it (len == gpus)


class SlotTable:
    """All slots of one startd, the index of claim ids, and the drain in effect."""

    def __init__(self, startd_name: str, total_cpus: int, total_memory: int, total_disk: int,
                 gpu_ids: Sequence[str], num_slots: int, partitionable: bool, share: Any = None):
        self.startd_name = startd_name
        self.slots: dict[str, Slot] = {}
        self._by_claim: dict[str, Slot] = {}
        self.drain: DrainState | None = None
        if partitionable:
            cpus = _part(total_cpus, getattr(share, "cpus", 1.0))
            memory = _part(total_memory, getattr(share, "memory", 1.0))
            disk = _part(total_disk, getattr(share, "disk", 1.0))
            ids = tuple(gpu_ids)
            slot = Slot(f"slot1@{startd_name}", 1, PARTITIONABLE, cpus, memory, disk, len(ids), ids,
                        total_cpus=cpus, total_memory=memory, total_disk=disk, total_gpus=len(ids),
                        machine_gpus=len(ids))
            self._add(slot)
        else:
            n = num_slots or total_cpus
            total_gpus = len(gpu_ids)
            given = 0
            for i in range(1, n + 1):
                # HTCondor divides cpus, memory and disk evenly among static slots.
                cpus = max(1, total_cpus // n)
                memory = max(1, total_memory // n)
                disk = max(1, total_disk // n)
                gpus = total_gpus // n if total_gpus >= n else (1 if i <= total_gpus else 0)
                ids = tuple(gpu_ids[given:given + gpus])
                given += gpus
                self._add(Slot(f"slot{i}@{startd_name}", i, STATIC, cpus, memory, disk, gpus, ids,
                               total_cpus=cpus, total_memory=memory, total_disk=disk, total_gpus=gpus,
                               machine_gpus=total_gpus))

    def _add(self, slot: Slot) -> None:
        self.slots[slot.name] = slot
        self._by_claim[slot.claim_id] = slot

    def by_claim_id(self, claim_id: str) -> Slot | None:
        return self._by_claim.get(claim_id)

    def claims(self) -> list[Claim]:
        return [s.claim for s in self.slots.values() if s.claim is not None]

    def rekey(self, slot: Slot, claim_id: str = "") -> None:
        """Give a slot a fresh claim id (``claim_id``: the preempting claim's, taking the slot its
        preemption freed); the old ones are stale from now on."""
        self._by_claim.pop(slot.claim_id, None)
        if slot.preempting_id and slot.preempting_id != claim_id:
            self._by_claim.pop(slot.preempting_id, None)
        slot.preempting_id = ""
        slot.claim_id = claim_id or new_claim_id()
        self._by_claim[slot.claim_id] = slot

    def claim(self, slot: Slot, schedd: str, lease: float, job_ad: Mapping[str, Any]) -> Claim:
        claim = Claim(slot.claim_id, slot, schedd, lease, str(lookup(job_ad, "Owner") or ""),
                      str(lookup(job_ad, "User") or lookup(job_ad, "Owner") or ""))
        claim.accounting_group = group_member(job_ad, claim.owner, lookup) or ""
        slot.claim = claim
        slot.set(CLAIMED, IDLE)
        if slot.kind == STATIC:
            # A second id, the preempting claim's, which a negotiator hands out to preempt the
            # claim. The slot's claim id stays the claim's own: an ad of the slot from before the
            # claim, still in the collector, offers only that one, which RequestClaim refuses.
            slot.preempting_id = new_claim_id()
            self._by_claim[slot.preempting_id] = slot
        return claim

    def carve(self, parent: Slot, req: Request) -> Slot:
        """A dynamic slot of ``req`` out of a partitionable slot (the caller checked it fits)."""
        sub = parent.next_child
        parent.next_child += 1
        child = Slot(f"slot{parent.slot_id}_{sub}@{self.startd_name}", parent.slot_id, DYNAMIC,
                     req.cpus, req.memory, req.disk, req.gpus, req.gpu_ids, sub_id=sub, parent=parent,
                     total_cpus=parent.total_cpus, total_memory=parent.total_memory,
                     total_disk=parent.total_disk, total_gpus=parent.total_gpus, machine_gpus=parent.machine_gpus)
        parent.cpus -= req.cpus
        parent.memory -= req.memory
        parent.disk -= req.disk
        parent.gpus -= req.gpus
        parent.children[child.name] = child
        self._add(child)
        return child

    def free(self, slot: Slot) -> None:
        """End a slot's claim: a dynamic slot goes away (its resources return), a static one is
        unclaimed again with a fresh claim id."""
        slot.claim = None
        if slot.kind == DYNAMIC and slot.parent is not None:
            parent = slot.parent
            parent.cpus += slot.cpus
            parent.memory += slot.memory
            parent.disk += slot.disk
            parent.gpus += slot.gpus
            parent.children.pop(slot.name, None)
            self.slots.pop(slot.name, None)
            self._by_claim.pop(slot.claim_id, None)
            return
        self.rekey(slot)
        slot.set(UNCLAIMED, IDLE)

    def request_of(self, job_ad: Mapping[str, Any], slot_ad: Mapping[str, Any], defaults: Request,
                   slot: Slot | None = None) -> Request:
        """The job's RequestCpus/Memory/Disk/GPUs, evaluated with the slot as TARGET, and the
        devices of ``slot`` it would get (ValueError when too few of them qualify)."""
        gpus = _requested(job_ad, "RequestGPUs", slot_ad, 0)
        ids: tuple[str, ...] = ()
        if gpus and slot is not None:
            picked = gpu.pick(slot_ad, slot.free_gpu_ids(), gpus, job_ad, lookup(job_ad, "RequireGPUs"))
            if picked is None:
                raise NotEnoughGPUs(f"RequestGPUs = {gpus}: {slot.name} has {len(slot.free_gpu_ids())} free GPU(s), "
                                 f"fewer that satisfy RequireGPUs ({lookup(job_ad, 'RequireGPUs')})"
                                 if lookup(job_ad, "RequireGPUs") is not None else
                                 f"RequestGPUs = {gpus}: {slot.name} has only {len(slot.free_gpu_ids())} free GPU(s)")
            ids = picked
        return Request(
            cpus=_requested(job_ad, "RequestCpus", slot_ad, defaults.cpus),
            memory=_requested(job_ad, "RequestMemory", slot_ad, defaults.memory),
            disk=_requested(job_ad, "RequestDisk", slot_ad, defaults.disk),
            gpus=gpus,
            gpu_ids=ids,
        )


class NotEnoughGPUs(ValueError):
    """A request for more of a slot's free GPUs than there are (that satisfy its RequireGPUs):
    not a bad request, a slot that cannot take it now."""


def _part(total: int, share: float | int) -> int:
    if isinstance(share, float) and share <= 1.0:
        return max(1, int(total * share))
    return max(1, min(total, int(share)))


def _requested(job_ad: Mapping[str, Any], attr: str, slot_ad: Mapping[str, Any], default: int) -> int:
    value = lookup(job_ad, attr)
    if value is None:
        return default
    if isinstance(value, str):
        raise ValueError(f"{attr} is a string ({value!r}), not a number or an expression")
    if not is_number(value):
        from gridbus import classad

        value = classad.compile(str(value)).eval(job_ad, slot_ad)
    if not is_number(value):
        raise ValueError(f"{attr} does not evaluate to a number (got {value!r})")
    if value < 0:
        raise ValueError(f"{attr} is negative ({value})")
    return int(math.ceil(value))


def ad_names(slot: Slot) -> list[str]:
    """The ads a change of ``slot`` touches: its own, and its partitionable parent's (whose free
    resources a dynamic slot holds), so a round of named changes re-sends only those."""
    return [slot.name] if slot.parent is None else [slot.name, slot.parent.name]
