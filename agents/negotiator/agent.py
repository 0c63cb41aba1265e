"""The negotiator: a negotiation cycle every NEGOTIATOR_INTERVAL, and soon after new idle jobs.

Composed of parts, each given what it uses, as the schedd is:

- ``CollectorQuery`` and ``SubmitterWatch`` (collector_ads.py): the ads read from the collector,
  and the Submitter ads heard on ``gridbus.ads`` that wake a cycle;
- ``Cycle`` (cycle.py): one cycle over those ads, with ``ScheddCalls`` (submitters.py) for the
  schedds' resource requests and matches, ``PendingMatches`` (pending.py) for slots matched and
  not re-advertised yet, and the matchmaker (matchmaker.py);
- ``Accountant`` (accountant.py): priorities, usage and limits; ``AccountantStore``
  (accountant_store.py) keeps it in the SPOOL; ``AccountantCalls`` (accountant_calls.py) serves
  its calls.

This object runs the cycle loop, answers Reschedule and Analyze, and advertises the Negotiator ad.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from gridbus import bus
from gridbus.agent import Agent, Call, method
from gridbus.agents.negotiator.accountant_calls import AccountantCalls
from gridbus.agents.negotiator.accountant_store import AccountantStore
from gridbus.agents.negotiator.analyze import analyze
from gridbus.agents.negotiator.collector_ads import CollectorQuery, SubmitterWatch
from gridbus.agents.negotiator.cycle import Cycle
from gridbus.agents.negotiator.cycle_stats import CycleStats
from gridbus.agents.negotiator.groups import GroupConfig
from gridbus.agents.negotiator.matchmaker import HOSTILE_STRIKES, REQUEST_SECONDS, get
from gridbus.agents.negotiator.pending import PendingMatches
from gridbus.agents.negotiator.preemption import PreemptionPolicy
from gridbus.agents.negotiator.submitters import ScheddCalls
from gridbus.rpc import CallTimeout, MethodResult
from gridbus.status import MethodError, Status, invalid


class Negotiator(Agent):
    kind = "negotiator"
    classes = ("negotiator",)
    my_type = "Negotiator"
    part_classes = (AccountantCalls,)

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
        groups: GroupConfig | None = None,
        preemption: PreemptionPolicy | None = None,
        **kw: Any,
    ):
        super().__init__(name, url, **kw)
        if interval <= 0:
            raise ValueError(f"NEGOTIATOR_INTERVAL must be positive, got {interval}")
        if request_list_size < 1:
            raise ValueError(f"NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE must be at least 1, got {request_list_size}")
        self.interval = float(interval)
        self.cycle_delay = max(0.0, float(cycle_delay))
        store = AccountantStore.in_spool(spool)
        self.accountant = store.load(halflife, default_limit)
        for lname, lmax in (limits or {}).items():
            self.accountant.limits.setdefault(lname.lower(), int(lmax))
        self.groups = groups if groups is not None else GroupConfig.none()
        self.accountant_calls = AccountantCalls(self.accountant, store, self.groups)
        self.collector = CollectorQuery(collector, self._locate, self._call)
        self.submitter_ads = SubmitterWatch(self.wake, self.log)
        self.cycle = Cycle(
            self.accountant, ScheddCalls(self._call, int(request_list_size), schedd_timeout, self.log),
            PendingMatches(match_hold), self.accountant_calls.save, self.log, prefetch=prefetch,
            match_strikes=match_strikes, match_request_seconds=match_request_seconds, name=self.name, groups=self.groups,
            preemption=preemption,
        )
        self._wake: asyncio.Event | None = None
        self._cycle_lock = asyncio.Lock()
        self.add_parts(self.accountant_calls)

    # ------------------------------------------------------------------ wiring between parts
    # Through ``self.client`` at call time, not a client bound at construction: the tests and the
    # simulator put a client of their own in its place.
    async def _call(self, address: str, method_name: str, args: dict[str, Any], timeout: float) -> MethodResult:
        return await self.client.call(address, method_name, args, timeout=timeout)

    async def _locate(self, key: str, class_name: str, timeout: float) -> MethodResult:
        return await self.client.get_objects(key, class_name, timeout=timeout)

    # ------------------------------------------------------------------ ads and statistics
    def daemon_ad(self) -> dict[str, Any]:
        return {
            **super().daemon_ad(),
            "NegotiatorInterval": self.interval,
            "NegotiationCycles": self.cycle.cycles,
            "TotalMatches": self.cycle.total_matches,
            **self.cycle.last.ad(),
        }

    def object_statistics(self) -> dict[str, Any]:
        last = self.cycle.last
        return {
            **super().object_statistics(),
            "NegotiationCycles": self.cycle.cycles,
            "TotalMatches": self.cycle.total_matches,
            "LastCycleDuration": last.duration,
            "LastCycleMatches": last.matches,
            "LastCycleRejections": sum(last.rejections.values()),
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
        await queue.consume(self.submitter_ads.on_message, no_ack=True)
        self.connection.watch(queue.name)

    async def on_start(self) -> None:
        self.spawn(self._cycle_loop(), "negotiation")

    async def on_stop(self) -> None:
        self.cycle.close()

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

    async def negotiate(self) -> CycleStats:
        """Run one negotiation cycle now; returns its statistics."""
        async with self._cycle_lock:
            started = time.monotonic()
            machines, submitter_ads = await asyncio.gather(
                self.collector.query(["Machine"], True), self.collector.query(["Submitter"], False)
            )
            stats = await self.cycle.run(machines, submitter_ads, started, time.monotonic() - started)
            self.ads_changed()
            if self.submitter_ads.still_awaited(submitter_ads):
                self.wake()  # the next cycle (after NEGOTIATOR_CYCLE_DELAY) looks again
            return stats

    # ------------------------------------------------------------------ methods
    @method("negotiator")
    async def Reschedule(self, call: Call) -> dict[str, Any]:
        self.wake()
        return {}

    @method("negotiator")
    async def Analyze(self, call: Call, Job: dict, Machine: str = "") -> dict[str, Any]:
        if get(Job, "Requirements") is None:
            raise invalid("Analyze: the job ad has no Requirements to analyze")
        try:
            machines = await self.collector.query(["Machine"], False)
        except (CallTimeout, RuntimeError) as exc:
            raise MethodError(Status.EXCEPTION, f"Analyze: could not read the Machine ads: {exc}") from None
        if Machine:
            wanted = Machine.lower()
            machines = [m for m in machines if wanted in (str(get(m, "Name", "")).lower(), str(get(m, "Machine", "")).lower())]
        # Off the event loop: the job ad is the caller's, and its Requirements run once per slot
        # (each evaluation bounded, their sum not), so the negotiator keeps answering meanwhile.
        return await asyncio.to_thread(analyze, dict(Job), machines)
