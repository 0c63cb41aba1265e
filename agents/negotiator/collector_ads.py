"""The negotiator's ads: what it reads from the collector, and the Submitter ads it hears on the bus.

``CollectorQuery`` finds the collector (COLLECTOR_ADDRESS, else the first collector answering
``class.collector``) and asks it for ads. ``SubmitterWatch`` listens on ``gridbus.ads`` for Submitter
ads and asks for a cycle (no sooner than NEGOTIATOR_CYCLE_DELAY after the previous one) when a
submitter shows more idle jobs than before; after the cycle it tells whether the collector has
given every ad that woke one yet.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from gridbus import bus, wire
from gridbus.rpc import CallTimeout, MethodResult

# Seconds the negotiator waits for a collector to answer its locate, one try after another.
LOCATE_TIMEOUTS = (0.25, 0.5, 1.0, 2.0, 4.0)
# Cycles a Submitter ad seen on the bus is waited for in the collector's answers.
AWAIT_CYCLES = 5

Locate = Callable[[str, str, float], Awaitable[MethodResult]]
CallFn = Callable[[str, str, dict[str, Any], float], Awaitable[MethodResult]]


class CollectorQuery:
    """The collector's ads, through ``locate`` (getObjects on a class key) and ``call``."""

    def __init__(self, collector: str, locate: Locate, call: CallFn):
        self.collector = collector  # COLLECTOR_ADDRESS; "" finds one
        self._locate = locate
        self._call = call

    async def address(self) -> str:
        if self.collector:
            return self.collector
        # The locate is asked again with a longer wait each time: in a pool started all at once,
        # a broadcast sent before the collector's queue was bound reaches nobody, and one 5 s
        # wait for it held the first negotiation (and a first job) for those 5 s.
        for timeout in LOCATE_TIMEOUTS:
            try:
                result = await self._locate(bus.class_key("collector"), "collector", timeout)
                break
            except CallTimeout:
                if timeout == LOCATE_TIMEOUTS[-1]:
                    raise
        for record in result.outArgs.get("objects", []):
            if record.get("agent"):
                return str(record["agent"])
        raise RuntimeError("no collector answered on class.collector")

    async def query(self, types: list[str], private: bool) -> list[dict[str, Any]]:
        address = await self.address()
        result = await self._call(address, "Query", {"AdTypes": types, "Private": private}, 30.0)
        if not result.ok:
            raise RuntimeError(f"collector {address} refused Query {types}: {result.text} (status {result.status})")
        return [a for a in result.outArgs.get("Ads", []) if isinstance(a, dict)]


class SubmitterWatch:
    """Submitter ads heard on the bus: a submitter with new idle jobs calls ``wake``."""

    def __init__(self, wake: Callable[[], None], log: logging.Logger):
        self._wake = wake
        self.log = log
        # submitter -> (IdleJobs, IdleJobsArrived or None) of its last ad
        self.idle_seen: dict[str, tuple[int, int | None]] = {}
        # Submitters whose ad on the bus woke a cycle: name -> (the ad's (DaemonStartTime,
        # UpdateSequenceNumber), cycles that did not find it in the collector yet). The collector
        # may answer a cycle's Query before it has ingested the ad that woke the cycle (the two
        # arrive on different queues; a busy collector ingests in slices between queries): such
        # a cycle sees no new jobs, and without another wake they would wait NEGOTIATOR_INTERVAL.
        self.awaited: dict[str, tuple[tuple[Any, Any], int]] = {}

    async def on_message(self, message: AbstractIncomingMessage) -> None:
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
                    self.idle_seen.pop(name, None)
                    self.awaited.pop(name, None)
            return
        if message.type != bus.T_AD or not isinstance(body, dict) or not isinstance(body.get("ads"), list):
            return
        for ad in body["ads"]:
            if isinstance(ad, dict):
                self._seen(ad)

    def _seen(self, ad: dict[str, Any]) -> None:
        name, idle = ad.get("Name"), ad.get("IdleJobs")
        if not isinstance(name, str) or not isinstance(idle, int):
            return
        # New idle jobs: more of them than the last ad said, or (a schedd that counts them)
        # any that arrived since, though as many others started meanwhile (a DAG's next node
        # submitted as the last ones ran: the Idle count alone did not grow, and the node
        # waited NEGOTIATOR_INTERVAL).
        arrived = ad.get("IdleJobsArrived")
        arrived = arrived if isinstance(arrived, int) else None
        idle_before, arrived_before = self.idle_seen.get(name, (0, None))
        grew = arrived is not None and idle > 0 and arrived > (arrived_before if arrived_before is not None else arrived)
        if idle > idle_before or grew:
            self.awaited[name] = (_version(ad), 0)
            self._wake()
        self.idle_seen[name] = (idle, arrived if arrived is not None else arrived_before)

    def still_awaited(self, submitter_ads: list[dict[str, Any]]) -> bool:
        """Forget the awaited submitters whose ad (or a newer one) the collector gave this cycle;
        whether any is still awaited (each for at most AWAIT_CYCLES cycles: an ad the collector
        refused must not keep the negotiator cycling)."""
        if not self.awaited:
            return False
        given = {ad.get("Name"): _version(ad) for ad in submitter_ads}
        for name, (version, misses) in list(self.awaited.items()):
            have = given.get(name)
            if have is not None and _not_older(have, version):
                del self.awaited[name]
            elif misses + 1 >= AWAIT_CYCLES:
                self.log.warning("the collector has not shown submitter %s's ad after %d cycles", name, misses + 1)
                del self.awaited[name]
            else:
                self.awaited[name] = (version, misses + 1)
        return bool(self.awaited)


def _version(ad: dict[str, Any]) -> tuple[Any, Any]:
    """An ad's (DaemonStartTime, UpdateSequenceNumber): the collector keeps the newest."""
    return ad.get("DaemonStartTime"), ad.get("UpdateSequenceNumber")


def _not_older(have: tuple[Any, Any], wanted: tuple[Any, Any]) -> bool:
    """Whether an ad of version ``have`` is the one of version ``wanted`` or newer (an ad without
    numbers to compare counts as new enough)."""
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (*have, *wanted)):
        return True
    return have >= wanted
