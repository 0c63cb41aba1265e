"""The negotiator agent: a negotiation cycle every NEGOTIATOR_INTERVAL, and soon after new idle jobs.

A cycle (docs/protocols.md, "Negotiation"): fetch the Machine ads with their claim ids and the
Submitter ads from the collector; charge usage to the accountant; order the submitters by effective
user priority; give each its fair share of the pool in the first round and what is left in later
rounds; ask each submitter's schedd for resource requests (NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE
per round trip, one per autocluster); match them; send each batch's matches in one Match call.

The negotiator also listens on ``gridbus.ads`` for Submitter ads, and starts a cycle (no sooner than
NEGOTIATOR_CYCLE_DELAY after the previous one) when a submitter shows more idle jobs than before.

Matchmaking runs on a thread of its own (``_off_loop``), not on the event loop: how long it takes
is decided by the expressions users send (each evaluation is bounded, but a cycle evaluates many),
and the negotiator must keep answering its calls meanwhile. A request the matchmaker finds hostile
(``REJECT_HOSTILE``) is rejected for the cycle with a sentence in the log; a submitter with
HOSTILE_REQUESTS such requests in one cycle is skipped for the rest of it.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from gridbus import bus, wire
from gridbus.adrefs import SlotRefs, lowered, slot_job_refs
from gridbus.agent import Agent, Call, method
from gridbus.agents.negotiator.accountant import Accountant, parse_limits
from gridbus.agents.negotiator.analyze import analyze
from gridbus.agents.negotiator.matchmaker import (
    HOSTILE_STRIKES,
    REJECT_HOSTILE,
    REJECT_LIMIT,
    REJECT_NO_MATCH,
    REJECT_PRIORITY,
    REQUEST_SECONDS,
    Matchmaker,
    fair_shares,
    get,
)
from gridbus.classad.values import is_number
from gridbus.rpc import CallTimeout
from gridbus.status import MethodError, Status, invalid

MAX_ROUNDS = 6  # HTCondor gives up after a few pie spins too
HOSTILE_REQUESTS = 2  # hostile requests of one submitter after which it is skipped for the cycle
# Matches per Match call (a batch of 200 requests can make 20,000 matches in a large pool): the
# schedd takes its matches while the cycle goes on, a call at a time.
MATCHES_PER_CALL = 2000
# Requests that are not tried again in a later round of the same cycle.
_SETTLED = (REJECT_NO_MATCH, REJECT_LIMIT, REJECT_HOSTILE)
# Seconds the negotiator waits for a collector to answer its locate, one try after another.
LOCATE_TIMEOUTS = (0.25, 0.5, 1.0, 2.0, 4.0)
# Cycles a Submitter ad seen on the bus is waited for in the collector's answers (see `_awaited`).
AWAIT_CYCLES = 5


@dataclass
class Submitter:
    name: str  # <owner>@<schedd name>
    owner: str
    address: str  # the schedd's agent address
    idle: int
    after: int = -1  # the last AutoClusterId seen this cycle
    exhausted: bool = False  # the schedd has no more requests this cycle
    requests: list[dict[str, Any]] = field(default_factory=list)  # fetched, with "Left" counts
    failed: bool = False
    hostile: int = 0  # requests rejected as hostile expressions this cycle


@dataclass
class CycleStats:
    """One cycle's figures; the Negotiator ad carries the last one (HTCondor's ...0 attributes)."""

    start: float = 0.0
    duration: float = 0.0
    matches: int = 0
    rejections: dict[str, int] = field(default_factory=dict)
    submitters: int = 0
    slots: int = 0
    idle_jobs: int = 0
    requests: int = 0
    rounds: int = 0
    evaluations: int = 0
    schedd_calls: int = 0
    # Where the cycle's time went (parts of duration), by HTCondor's phases: 1 reading the ads from
    # the collector, 2 the accounting (usage, the pie, the matchmaker built over the slots),
    # 3 ordering the submitters and fetching their first request pages, 4 matching, with the
    # wait for the schedds' answers to Match at its end (``answers``).
    fetch: float = 0.0
    accounting: float = 0.0
    first_requests: float = 0.0
    matching: float = 0.0
    answers: float = 0.0

    def lap(self, phase: str, since: float) -> float:
        """Add the time since ``since`` to ``phase``; returns now, the next phase's start."""
        now = time.monotonic()
        setattr(self, phase, getattr(self, phase) + now - since)
        return now


class Negotiator(Agent):
    kind = "negotiator"
    classes = ("negotiator",)
    my_type = "Negotiator"

    def __init__(
        self,
        name: str | None = None,
        url: str | None = None,
        *,
        spool: str | Path | None = None,
        interval: float = 60.0,
        cycle_delay: float = 1.0,
        halflife: float = 86400.0,
        request_list_size: int = 20,
        collector: str = "",
        match_hold: float = 20.0,
        schedd_timeout: float = 30.0,
        limits: dict[str, int] | None = None,
        default_limit: int = 2**31 - 1,
        prefetch: bool = True,
        match_strikes: int = HOSTILE_STRIKES,
        match_request_seconds: float = REQUEST_SECONDS,
        **kw: Any,
    ):
        super().__init__(name, url, **kw)
        if interval <= 0:
            raise ValueError(f"NEGOTIATOR_INTERVAL must be positive, got {interval}")
        if request_list_size < 1:
            raise ValueError(f"NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE must be at least 1, got {request_list_size}")
        self.interval = float(interval)
        self.cycle_delay = max(0.0, float(cycle_delay))
        self.request_list_size = int(request_list_size)
        self.collector = collector
        self.match_hold = match_hold
        self.schedd_timeout = schedd_timeout
        self.prefetch = bool(prefetch)
        if match_strikes < 1 or match_request_seconds <= 0:
            raise ValueError("a request's evaluation allowance must be at least 1 strike and a positive time")
        # A request's evaluation allowance per cycle (see matchmaker.py, "Hostile requests").
        self.match_strikes = int(match_strikes)
        self.match_request_seconds = float(match_request_seconds)
        path = Path(spool) / "accountant.json" if spool else None
        self.accountant = Accountant.load(path, halflife, default_limit) if path else Accountant(halflife, None, default_limit)
        for lname, lmax in (limits or {}).items():
            self.accountant.limits.setdefault(lname.lower(), int(lmax))
        self.last = CycleStats()
        self.cycles = 0
        self.total_matches = 0
        self._wake: asyncio.Event | None = None
        # submitter -> (IdleJobs, IdleJobsArrived or None) of its last ad
        self._idle_seen: dict[str, tuple[int, int | None]] = {}
        # Submitters whose ad on the bus woke a cycle: name -> (the ad's (DaemonStartTime,
        # UpdateSequenceNumber), cycles that did not find it in the collector yet). The collector
        # may answer a cycle's Query before it has ingested the ad that woke the cycle (the two
        # arrive on different queues; a busy collector ingests in slices between queries): such
        # a cycle sees no new jobs, and without another wake they would wait NEGOTIATOR_INTERVAL.
        self._awaited: dict[str, tuple[tuple[Any, Any], int]] = {}
        # claim id -> (UpdateSequenceNumber of the ad matched, when, cpus/memory/disk carved):
        # a slot handed out stays handed out until its startd re-advertises it.
        self._pending: dict[str, tuple[Any, float, tuple[float, float, float] | None]] = {}
        self._cycle_lock = asyncio.Lock()
        self._job_attrs: frozenset[str] | None = frozenset()  # this cycle's AutoClusterAttrs
        self._matcher: ThreadPoolExecutor | None = None  # the thread matchmaking runs on
        self._sends: list[asyncio.Future] = []  # this cycle's Match calls, answered meanwhile

    # ------------------------------------------------------------------ ads and statistics
    def daemon_ad(self) -> dict[str, Any]:
        s = self.last
        return {
            **super().daemon_ad(),
            "NegotiatorInterval": self.interval,
            "NegotiationCycles": self.cycles,
            "TotalMatches": self.total_matches,
            "LastNegotiationCycleTime0": int(s.start),
            "LastNegotiationCycleDuration0": round(s.duration, 4),
            "LastNegotiationCyclePhase1Duration0": round(s.fetch, 4),
            "LastNegotiationCyclePhase2Duration0": round(s.accounting, 4),
            "LastNegotiationCyclePhase3Duration0": round(s.first_requests, 4),
            "LastNegotiationCyclePhase4Duration0": round(s.matching + s.answers, 4),
            "LastNegotiationCycleMatches0": s.matches,
            "LastNegotiationCycleRejections0": sum(s.rejections.values()),
            "LastNegotiationCycleRejectionReasons0": dict(s.rejections),
            "LastNegotiationCycleActiveSubmitterCount0": s.submitters,
            "LastNegotiationCycleSlots0": s.slots,
            "LastNegotiationCycleNumIdleJobs0": s.idle_jobs,
            "LastNegotiationCycleResourceRequests0": s.requests,
            "LastNegotiationCycleSlotShareIter0": s.rounds,
            "LastNegotiationCycleMatchEvaluations0": s.evaluations,
            "LastNegotiationCycleScheddCalls0": s.schedd_calls,
        }

    def object_statistics(self) -> dict[str, Any]:
        return {
            **super().object_statistics(),
            "NegotiationCycles": self.cycles,
            "TotalMatches": self.total_matches,
            "LastCycleDuration": self.last.duration,
            "LastCycleMatches": self.last.matches,
            "LastCycleRejections": sum(self.last.rejections.values()),
        }

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        assert self._connection is not None
        self._wake = asyncio.Event()
        channel = await self._connection.channel(publisher_confirms=False)
        queue = await channel.declare_queue(
            f"gridbus.negotiator.{self.name}", exclusive=True, arguments={"x-max-length": 1000, "x-overflow": "drop-head"}
        )
        await queue.bind(bus.ADS, "submitter.#")
        await queue.consume(self._on_submitter_ads, no_ack=True)
        self.connection.watch(queue.name)

    async def on_start(self) -> None:
        self.spawn(self._cycle_loop(), "negotiation")

    async def on_stop(self) -> None:
        if self._matcher is not None:
            self._matcher.shutdown(wait=False, cancel_futures=True)
            self._matcher = None

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the match thread. One thread: the cycle's steps stay in order, and the
        matchmaker's state is only ever touched by one of them at a time."""
        if self._matcher is None:
            self._matcher = ThreadPoolExecutor(1, thread_name_prefix=f"negotiator-{self.name}-match")
        return await asyncio.get_running_loop().run_in_executor(self._matcher, functools.partial(fn, *args))

    async def _on_submitter_ads(self, message: AbstractIncomingMessage) -> None:
        try:
            body = wire.decode(message.body, message.content_type)
        except wire.DecodeError:
            return
        if message.type == bus.T_INVALIDATE and isinstance(body, dict) and isinstance(body.get("names"), list):
            # A submitter with no jobs left is invalidated, not advertised with 0 idle: forget its
            # count, or its next cluster (fewer idle jobs than the last one had) would wait a whole
            # NEGOTIATOR_INTERVAL instead of waking a cycle.
            for name in body["names"]:
                if isinstance(name, str):
                    self._idle_seen.pop(name, None)
                    self._awaited.pop(name, None)
            return
        if message.type != bus.T_AD or not isinstance(body, dict) or not isinstance(body.get("ads"), list):
            return
        for ad in body["ads"]:
            if not isinstance(ad, dict):
                continue
            name, idle = ad.get("Name"), ad.get("IdleJobs")
            if not isinstance(name, str) or not isinstance(idle, int):
                continue
            # New idle jobs: more of them than the last ad said, or (a schedd that counts them)
            # any that arrived since, though as many others started meanwhile (a DAG's next node
            # submitted as the last ones ran: the Idle count alone did not grow, and the node
            # waited NEGOTIATOR_INTERVAL).
            arrived = ad.get("IdleJobsArrived")
            arrived = arrived if isinstance(arrived, int) else None
            idle_before, arrived_before = self._idle_seen.get(name, (0, None))
            grew = arrived is not None and idle > 0 and arrived > (arrived_before if arrived_before is not None else arrived)
            if idle > idle_before or grew:
                self._awaited[name] = (_version(ad), 0)
                self.wake()
            self._idle_seen[name] = (idle, arrived if arrived is not None else arrived_before)

    def wake(self) -> None:
        """Ask for a cycle soon (no sooner than NEGOTIATOR_CYCLE_DELAY after the last one)."""
        if self._wake is not None:
            self._wake.set()

    async def _cycle_loop(self) -> None:
        assert self._wake is not None
        last_start = 0.0
        while not self._stopping:
            gap = last_start + self.cycle_delay - time.monotonic()
            if gap > 0:
                await asyncio.sleep(gap)  # the minimum gap between cycles, not a wait for state
            self._wake.clear()
            last_start = time.monotonic()
            try:
                await self.negotiate()
            except CallTimeout as exc:  # a collector not up yet (a pool starting): tried next cycle
                self.log.warning("negotiation cycle skipped: %s", exc)
            except Exception:
                self.log.exception("negotiation cycle failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ the cycle
    async def _collector_address(self) -> str:
        if self.collector:
            return self.collector
        # The locate is asked again with a longer wait each time: in a pool started all at once,
        # a broadcast sent before the collector's queue was bound reaches nobody, and one 5 s
        # wait for it held the first negotiation (and a first job) for those 5 s.
        for timeout in LOCATE_TIMEOUTS:
            try:
                result = await self.client.get_objects(bus.class_key("collector"), "collector", timeout=timeout)
                break
            except CallTimeout:
                if timeout == LOCATE_TIMEOUTS[-1]:
                    raise
        for record in result.outArgs.get("objects", []):
            if record.get("agent"):
                return str(record["agent"])
        raise RuntimeError("no collector answered on class.collector")

    async def _query(self, types: list[str], private: bool) -> list[dict[str, Any]]:
        address = await self._collector_address()
        try:
            result = await self.client.call(address, "Query", {"AdTypes": types, "Private": private}, timeout=30)
        except CallTimeout:
            if not self.collector:
                self.collector = ""
            raise
        if not result.ok:
            raise RuntimeError(f"collector {address} refused Query {types}: {result.text} (status {result.status})")
        return [a for a in result.outArgs.get("Ads", []) if isinstance(a, dict)]

    async def negotiate(self) -> CycleStats:
        """Run one negotiation cycle now; returns its statistics."""
        async with self._cycle_lock:
            started = time.monotonic()
            machines, submitter_ads = await asyncio.gather(
                self._query(["Machine"], True), self._query(["Submitter"], False)
            )
            stats = await self.negotiate_with(machines, submitter_ads, started, time.monotonic() - started)
            self.ads_changed()
            if self._still_awaited(submitter_ads):
                self.wake()  # the next cycle (after NEGOTIATOR_CYCLE_DELAY) looks again
            return stats

    def _still_awaited(self, submitter_ads: list[dict[str, Any]]) -> bool:
        """Forget the awaited submitters whose ad (or a newer one) the collector gave this cycle;
        whether any is still awaited (each for at most AWAIT_CYCLES cycles: an ad the collector
        refused must not keep the negotiator cycling)."""
        if not self._awaited:
            return False
        given = {ad.get("Name"): _version(ad) for ad in submitter_ads}
        for name, (version, misses) in list(self._awaited.items()):
            have = given.get(name)
            if have is not None and _not_older(have, version):
                del self._awaited[name]
            elif misses + 1 >= AWAIT_CYCLES:
                self.log.warning("the collector has not shown submitter %s's ad after %d cycles", name, misses + 1)
                del self._awaited[name]
            else:
                self._awaited[name] = (version, misses + 1)
        return bool(self._awaited)

    async def negotiate_with(
        self, machines: list[dict[str, Any]], submitter_ads: list[dict[str, Any]], started: float | None = None,
        fetch: float = 0.0,
    ) -> CycleStats:
        """One cycle over ads already fetched (the benchmark's simulator calls this directly);
        ``started``: when the cycle began fetching them (its duration counts the fetch, ``fetch`` s)."""
        started = time.monotonic() if started is None else started
        stats = CycleStats(start=time.time(), fetch=fetch)
        now = time.time()
        mark = time.monotonic()
        in_use, limits_used, mm, pie = await self._off_loop(self._prepare, machines, now)
        self.accountant.update_usage(in_use, now)
        stats.slots = len(mm.slots)
        subs = self._submitters(submitter_ads)
        stats.submitters = len(subs)
        stats.idle_jobs = sum(s.idle for s in subs)
        owners = sorted({s.owner for s in subs}, key=lambda o: (self.accountant.effective_priority(o), o))
        mark = stats.lap("accounting", mark)
        if self.prefetch and mm.has_free():
            # NEGOTIATOR_PREFETCH_REQUESTS: every submitter's first page at once, so a cycle
            # waits for the slowest schedd once instead of for each in turn. Not when no slot is
            # free (a pool filling up, its slots matched and not yet re-advertised): the rounds
            # would ask nothing of the schedds, busy with their claims.
            await asyncio.gather(*(self._fetch(s, stats) for s in subs))
        mark = stats.lap("first_requests", mark)
        self._sends = []
        spent: dict[str, float] = {o: 0.0 for o in owners}
        unlimited = False
        for round_no in range(MAX_ROUNDS):
            active = [o for o in owners if any(self._wants(s) for s in subs if s.owner == o)]
            if not active or not mm.has_free():
                break
            stats.rounds = round_no + 1
            eup = {o: self.accountant.effective_priority(o) for o in active}
            if unlimited:
                shares = {o: math.inf for o in active}
            elif round_no == 0:
                shares = fair_shares(pie, eup, in_use)
            else:
                shares = fair_shares(await self._off_loop(lambda: mm.free_weight), eup, {})
            matched_this_round = 0
            for owner in active:
                budget = shares[owner]
                for sub in (s for s in subs if s.owner == owner):
                    if budget <= 1e-9 or not mm.has_free():
                        break
                    got, weight = await self._negotiate_submitter(sub, mm, budget, limits_used, stats)
                    budget -= weight
                    spent[owner] += weight
                    matched_this_round += got
            if matched_this_round == 0:
                if unlimited:
                    break
                # Shares too small for a whole slot: hand the rest out in priority order.
                unlimited = True
        mark = stats.lap("matching", mark)
        stats.matches = sum(await asyncio.gather(*self._sends))
        stats.lap("answers", mark)
        self._sends = []
        for sub in subs:
            for req in sub.requests:
                if req["Left"] > 0:
                    reason = req.get("Reason") or REJECT_PRIORITY
                    stats.rejections[reason] = stats.rejections.get(reason, 0) + req["Left"]
        stats.evaluations = mm.evaluations
        stats.duration = time.monotonic() - started
        self.last = stats
        self.cycles += 1
        self.total_matches += stats.matches
        try:
            self.accountant.save()
        except OSError:
            self.log.exception("could not save the accountant")
        self.log.info(
            "cycle %d: %d matches, %d slots, %d submitters, %d requests, %.3f s (%.3f s reading the ads, "
            "%.3f s accounting, %.3f s first requests, %.3f s matching, %.3f s waiting for Match answers)",
            self.cycles, stats.matches, stats.slots, stats.submitters, stats.requests, stats.duration, stats.fetch,
            stats.accounting, stats.first_requests, stats.matching, stats.answers,
        )
        return stats

    def _prepare(
        self, machines: list[dict[str, Any]], now: float
    ) -> tuple[dict[str, float], dict[str, float], Matchmaker, float]:
        """The cycle's work over every Machine ad (on the match thread): usage, the job attributes
        slots read, the matchmaker, and the pie."""
        lows = [lowered(m) for m in machines]  # once for the cycle: the usage, the refs, the matchmaker
        in_use, limits_used = self._usage(lows)
        # What the schedds' requests must carry besides the significant attributes: every job
        # attribute a slot may read (all Machine ads, claimed ones too, so the list, and with it
        # the schedds' autoclusters, does not change with what is busy). The matchmaker groups
        # its slots by the same names (a superset of what its unclaimed slots read).
        refs = SlotRefs(lows)
        self._job_attrs = slot_job_refs(refs)
        pie = sum(float(m.get("cpus", 1) or 0) for m in lows if m.get("state") in ("Unclaimed", "Claimed", None))
        ads, ads_low = self._hide_pending(machines, lows, now)
        mm = Matchmaker(ads, lows=ads_low, refs=refs, strikes=self.match_strikes,
                        request_seconds=self.match_request_seconds)
        return in_use, limits_used, mm, pie

    @staticmethod
    def _wants(sub: Submitter) -> bool:
        if sub.failed:
            return False
        if any(r["Left"] > 0 and r.get("Reason") not in _SETTLED for r in sub.requests):
            return True
        return not sub.exhausted

    def _usage(self, lows: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
        """Slot weight held per owner, and concurrency-limit use, from the claimed slots (the
        Machine ads keyed by lower-case names)."""
        in_use: dict[str, float] = {}
        limits: dict[str, float] = {}
        for m in lows:
            if m.get("state") != "Claimed" or m.get("partitionableslot", False):
                continue
            owner = m.get("remoteowner")
            if isinstance(owner, str) and owner:
                owner = owner.split("@", 1)[0]
                cpus = m.get("cpus", 1)
                in_use[owner] = in_use.get(owner, 0.0) + (float(cpus) if is_number(cpus) else 1.0)
            for name, amount in parse_limits(m.get("concurrencylimits")).items():
                limits[name] = limits.get(name, 0.0) + amount
        return in_use, limits

    def _hide_pending(
        self, machines: list[dict[str, Any]], lows: list[dict[str, Any]], now: float
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Slots matched in an earlier cycle whose startd has not re-advertised them yet are
        left out (the ads, and the same keyed by lower-case names)."""
        for cid, (_seq, when, _carved) in list(self._pending.items()):
            if now - when > self.match_hold:
                del self._pending[cid]
        if not self._pending:
            return machines, lows
        out, out_low = [], []
        for m, low in zip(machines, lows, strict=True):
            cid = low.get("claimid")
            pending = self._pending.get(cid) if isinstance(cid, str) else None
            if pending is None or low.get("updatesequencenumber") != pending[0]:
                if pending is not None:
                    del self._pending[cid]
                out.append(m)
                out_low.append(low)
            elif pending[2] is not None:  # a partitionable slot: take off what was carved
                m = dict(m)
                for attr, amount in zip(("Cpus", "Memory", "Disk"), pending[2], strict=True):
                    value = get(m, attr, 0) or 0
                    m[attr] = value - amount
                out.append(m)
                out_low.append(lowered(m))
        return out, out_low

    def _submitters(self, ads: list[dict[str, Any]]) -> list[Submitter]:
        out = []
        for ad in ads:
            name, owner, address, idle = (get(ad, k) for k in ("Name", "Owner", "MyAddress", "IdleJobs"))
            if not all(isinstance(v, str) and v for v in (name, owner, address)):
                continue
            if not isinstance(idle, int) or idle <= 0:
                continue
            out.append(Submitter(name, owner, address, idle))
        return out

    async def _fetch(self, sub: Submitter, stats: CycleStats) -> list[dict[str, Any]]:
        args: dict[str, Any] = {"Owner": sub.owner, "Limit": self.request_list_size, "After": sub.after}
        if self._job_attrs is None:
            args["WholeAds"] = True
        else:
            args["AutoClusterAttrs"] = sorted(self._job_attrs)
        stats.schedd_calls += 1
        try:
            result = await self.client.call(sub.address, "GetResourceRequests", args, timeout=self.schedd_timeout)
        except CallTimeout:
            self.log.warning("%s did not answer GetResourceRequests; skipping %s this cycle", sub.address, sub.name)
            sub.failed = True
            return []
        if not result.ok:
            self.log.warning("%s refused GetResourceRequests for %s: %s", sub.address, sub.owner, result.text)
            sub.failed = True
            return []
        requests = [r for r in result.outArgs.get("Requests", []) if isinstance(r, dict)]
        valid = []
        for r in requests:
            acid, count, ad = r.get("AutoClusterId"), r.get("Count"), r.get("Ad")
            if isinstance(acid, int) and isinstance(count, int) and count > 0 and isinstance(ad, dict):
                valid.append({"AutoClusterId": acid, "Count": count, "Ad": ad, "Left": count})
        if requests and isinstance(requests[-1].get("AutoClusterId"), int):
            sub.after = requests[-1]["AutoClusterId"]
        if len(requests) < self.request_list_size:
            sub.exhausted = True
        sub.requests.extend(valid)
        stats.requests += len(valid)
        return valid

    async def _negotiate_submitter(
        self, sub: Submitter, mm: Matchmaker, budget: float, limits_used: dict[str, float], stats: CycleStats
    ) -> tuple[int, float]:
        """Match this submitter's requests within ``budget`` slot weight; returns (matches sent,
        weight)."""
        spent = 0.0
        made = 0
        batch = [r for r in sub.requests if r["Left"] > 0 and r.get("Reason") not in _SETTLED]
        while True:
            if not batch and not sub.exhausted and not sub.failed:
                batch = await self._fetch(sub, stats)
                if not batch:
                    break
            if not batch:
                break
            matches, spent, out_of_budget = await self._off_loop(
                self._match_batch, sub, batch, mm, budget, spent, limits_used
            )
            if matches:
                # Not awaited here: the schedd takes its matches while the cycle goes on with the
                # next submitter (the slots are taken either way); the cycle gathers the answers.
                for i in range(0, len(matches), MATCHES_PER_CALL):
                    chunk = matches[i : i + MATCHES_PER_CALL]
                    self._sends.append(asyncio.ensure_future(self._send_matches(sub, chunk, stats)))
                made += len(matches)
            if out_of_budget or sub.failed or not mm.has_free() or spent >= budget - 1e-9:
                break
            batch = []
        return made, spent

    def _match_batch(
        self, sub: Submitter, batch: list[dict[str, Any]], mm: Matchmaker, budget: float, spent: float,
        limits_used: dict[str, float],
    ) -> tuple[list[dict[str, Any]], float, bool]:
        """Match one batch of a submitter's requests (on the match thread); returns the matches,
        the slot weight spent so far, and whether the submitter's budget ran out."""
        matches: list[dict[str, Any]] = []
        out_of_budget = False
        now = time.time()
        for req in batch:
            job = req["Ad"]
            wanted = parse_limits(get(job, "ConcurrencyLimits"))
            # How many more jobs of this request the concurrency limits let run.
            cap = req["Left"]
            for n, a in wanted.items():
                if a > 0:
                    room = self.accountant.limit_max(n) - limits_used.get(n, 0.0)
                    cap = min(cap, max(0, math.floor(room / a + 1e-9)))
            found, reason = mm.match(job, cap, budget - spent) if cap > 0 else ([], None)
            if reason is None and cap < req["Left"]:
                reason = REJECT_LIMIT
            for m in found:
                for n, a in wanted.items():
                    limits_used[n] = limits_used.get(n, 0.0) + a
                spent += m.weight
                # No SlotAd: the startd's RequestClaim answer brings the slot's ad, fresh, so the
                # match does not carry one (1 KB each, 200 MB in a cycle of 200,000 matches: a
                # second's copying and encoding here, three of decoding in the schedds).
                matches.append(
                    {
                        "AutoClusterId": req["AutoClusterId"],
                        "ClaimId": m.slot.claim_id,
                        "Slot": m.slot.name,
                        "Startd": m.slot.startd,
                    }
                )
                self._remember(m.slot, m.slot_ad, job, now)
            req["Left"] -= len(found)
            req["Reason"] = reason
            if reason == REJECT_HOSTILE:
                sub.hostile += 1
                self.log.warning(
                    "request %s of %s rejected for this cycle as a hostile expression: %s",
                    req["AutoClusterId"], sub.name, mm.hostile,
                )
                if sub.hostile >= HOSTILE_REQUESTS:
                    self.log.warning("%s skipped for the rest of this cycle: %d hostile requests", sub.name, sub.hostile)
                    sub.failed = True
                    break
            if reason == REJECT_PRIORITY:
                out_of_budget = True
                break
            if not mm.has_free():
                break
        return matches, spent, out_of_budget

    def _remember(self, slot: Any, slot_ad: dict[str, Any], job: dict[str, Any], now: float) -> None:
        carved = None
        if slot.partitionable:
            from gridbus.agents.negotiator.matchmaker import _request

            before = self._pending.get(slot.claim_id)
            need = _request(job, slot_ad)
            carved = need if before is None or before[2] is None else tuple(a + b for a, b in zip(before[2], need, strict=True))
        self._pending[slot.claim_id] = (slot.low.get("updatesequencenumber"), now, carved)

    async def _send_matches(self, sub: Submitter, matches: list[dict[str, Any]], stats: CycleStats) -> int:
        stats.schedd_calls += 1
        try:
            result = await self.client.call(sub.address, "Match", {"Matches": matches}, timeout=self.schedd_timeout)
        except CallTimeout:
            self.log.warning("%s did not answer Match (%d matches)", sub.address, len(matches))
            sub.failed = True
            return 0
        if not result.ok:
            self.log.warning("%s refused Match: %s", sub.address, result.text)
            return 0
        accepted = result.outArgs.get("Accepted", 0)
        return accepted if isinstance(accepted, int) else 0

    # ------------------------------------------------------------------ methods
    def _user_name(self, name: str) -> str:
        if not name or not name.strip():
            raise invalid("a submitter name is needed (the job Owner, e.g. 'alice')")
        return name.strip().split("@", 1)[0]

    @method("negotiator")
    async def GetPriorities(self, call: Call) -> dict[str, Any]:
        return {"Priorities": self.accountant.priorities()}

    @method("negotiator")
    async def SetPriority(self, call: Call, Name: str, Priority: float) -> dict[str, Any]:
        try:
            self.accountant.set_priority(self._user_name(Name), Priority)
        except ValueError as exc:
            raise invalid(f"SetPriority: {exc}") from None
        self._save()
        return {}

    @method("negotiator")
    async def SetPriorityFactor(self, call: Call, Name: str, PriorityFactor: float) -> dict[str, Any]:
        try:
            self.accountant.set_factor(self._user_name(Name), PriorityFactor)
        except ValueError as exc:
            raise invalid(f"SetPriorityFactor: {exc}") from None
        self._save()
        return {}

    @method("negotiator")
    async def SetUsage(self, call: Call, Name: str, Usage: float) -> dict[str, Any]:
        try:
            self.accountant.set_usage(self._user_name(Name), Usage)
        except ValueError as exc:
            raise invalid(f"SetUsage: {exc}") from None
        self._save()
        return {}

    @method("negotiator")
    async def GetLimits(self, call: Call) -> dict[str, Any]:
        return {"Limits": dict(self.accountant.limits), "Default": self.accountant.default_limit}

    @method("negotiator")
    async def SetLimit(self, call: Call, Name: str, Max: int) -> dict[str, Any]:
        try:
            self.accountant.set_limit(Name, Max)
        except ValueError as exc:
            raise invalid(f"SetLimit: {exc}") from None
        self._save()
        return {}

    @method("negotiator")
    async def Reschedule(self, call: Call) -> dict[str, Any]:
        self.wake()
        return {}

    @method("negotiator")
    async def Analyze(self, call: Call, Job: dict, Machine: str = "") -> dict[str, Any]:
        if get(Job, "Requirements") is None:
            raise invalid("Analyze: the job ad has no Requirements to analyze")
        try:
            machines = await self._query(["Machine"], False)
        except (CallTimeout, RuntimeError) as exc:
            raise MethodError(Status.EXCEPTION, f"Analyze: could not read the Machine ads: {exc}") from None
        if Machine:
            wanted = Machine.lower()
            machines = [m for m in machines if wanted in (str(get(m, "Name", "")).lower(), str(get(m, "Machine", "")).lower())]
        # Off the event loop: the job ad is the caller's, and its Requirements run once per slot
        # (each evaluation bounded, their sum not), so the negotiator keeps answering meanwhile.
        return await asyncio.to_thread(analyze, dict(Job), machines)

    def _save(self) -> None:
        try:
            self.accountant.save()
        except OSError as exc:
            raise MethodError(Status.EXCEPTION, f"could not persist the accountant: {exc}") from None


def _version(ad: dict[str, Any]) -> tuple[Any, Any]:
    """An ad's (DaemonStartTime, UpdateSequenceNumber): the collector keeps the newest."""
    return ad.get("DaemonStartTime"), ad.get("UpdateSequenceNumber")


def _not_older(have: tuple[Any, Any], wanted: tuple[Any, Any]) -> bool:
    """Whether an ad of version ``have`` is the one of version ``wanted`` or newer (an ad without
    numbers to compare counts as new enough)."""
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (*have, *wanted)):
        return True
    return have >= wanted
