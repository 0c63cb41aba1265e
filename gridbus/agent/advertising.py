"""The advertiser: an agent's ads on gridbus.ads, periodically, when something changed, at once
when a collector asks (the Advertise broadcast a starting collector sends, so no first ad is lost),
and their invalidation when the agent stops.

Every ad and invalidation message carries its sender's address, start and a message sequence
number (``from``, ``start``, ``seq``): a collector that sees a number skipped (its ads queue full
under a storm drops the oldest messages) counts the updates lost and asks that agent to advertise
everything again, instead of holding the lost slots' old states until the next full round.

What is advertised is the agent's (`AdSource`: its ads, its private ads, how often); the
advertiser owns when and how they travel: batched by MyType, stamped with one sequence number per
round, the ads gone since the last round invalidated.

A round sends every ad once per update interval. Between those, a change re-advertises soon (at
once after a quiet COALESCE_WINDOW, else at the end of the window, so a burst is one update): every
ad, or, when the agent named the ads that changed (``changed(names)``) and can build just those
(``ads_named``), only them. A startd of 10,000 slots then re-sends the slot just claimed, not 10,000
ads per claim, as HTCondor's startd updates the slot that changed.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from gridbus import bus
from gridbus.agent.awaiting import cancel_and_wait

# One ad message carries at most this many ads; a startd's slots travel together, a simulator's
# 100,000 machine ads in a few hundred messages.
ADS_PER_MESSAGE = 500

# Seconds: the shortest time between two updates prompted by changes.
COALESCE_WINDOW = 0.2

Publish = Callable[[str, str, Any, str], Awaitable[None]]


class AdSource(Protocol):
    """What the advertiser asks of its agent."""

    name: str
    address: str
    my_type: str
    start_time: int
    update_interval: float
    lifetime: float

    def ads(self) -> list[dict[str, Any]]: ...
    def private_ads(self) -> list[dict[str, Any]]: ...
    def ad_extras(self) -> dict[str, Any]: ...


def _no_named_ads(names: set[str]) -> None:
    """The default ``ads_named``: this agent builds only whole rounds."""
    return None


class Advertiser:
    def __init__(self, source: AdSource, publish: Publish, log: logging.Logger, *, first_sequence: int = 0):
        self.source = source
        self.publish = publish
        self.log = log
        # UpdateSequenceNumber: the collector keeps the newest (DaemonStartTime, sequence) per ad.
        self.sequence = first_sequence
        self._message_seq = 0  # the ``seq`` of the messages: one more per message, no gap
        self._published: dict[str, set[str]] = {}  # MyType -> names sent in the last round
        self._wanted = asyncio.Event()
        self._task: asyncio.Task | None = None
        # The names of the ads changed since the last round (None: none named), or every ad.
        self._changed_names: set[str] | None = None
        self._all_changed = False

    def changed(self, names: Iterable[str] | None = None) -> None:
        """Something meaningful changed: re-advertise soon (coalesced). ``names``: only the ads of
        these names changed, so the next round may send only them."""
        if names is None:
            self._all_changed = True
        else:
            if self._changed_names is None:
                self._changed_names = set()
            self._changed_names.update(names)
        self._wanted.set()

    def _ads_named(self, names: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        """The public and private ads the source builds for ``names`` (a name without an ad now is
        gone), or None when it builds only whole rounds."""
        return getattr(self.source, "ads_named", _no_named_ads)(names)

    def start(self, spawn: Callable[[Any, str], asyncio.Task]) -> None:
        """Run the periodic rounds as a task of the agent's (``spawn``), on its loop."""
        self._wanted = asyncio.Event()  # of this loop: an agent may be started again on another
        self._task = spawn(self._loop(), "advertise")

    async def stop(self) -> None:
        """End the rounds, then invalidate every ad: a round in flight must not re-add ads after
        their invalidation."""
        if self._task is not None:
            await cancel_and_wait([self._task], self.log)
            self._task = None
        await self.invalidate()

    async def publish_ads(self, names: set[str] | None = None) -> None:
        """Publish every ad (public and private) once, batched; invalidate the ones gone since.
        ``names``: only the ads of these names, when the source builds them (``ads_named``).

        Ads are grouped by MyType, up to ADS_PER_MESSAGE per message, so a startd's slots travel
        together. A name published last round and absent now (a dynamic slot that went away, a
        submitter without jobs) is invalidated at once rather than left to expire.
        """
        src = self.source
        self.sequence += 1
        extra = {
            **src.ad_extras(),
            "UpdateSequenceNumber": self.sequence,
            "DaemonStartTime": src.start_time,
            "ClassAdLifetime": src.lifetime,
        }
        built = self._ads_named(names) if names is not None else None
        if built is None:
            names = None
            built = (src.ads(), src.private_ads())
        names_now: dict[str, set[str]] = {}
        for private, ads in ((False, built[0]), (True, built[1])):
            by_type: dict[str, list[dict[str, Any]]] = {}
            for ad in ads:
                mytype = str(ad.get("MyType", src.my_type))
                group = by_type.setdefault(mytype, [])
                group.append({**ad, "MyType": mytype, **extra})
                if not private and ad.get("Name") is not None:
                    names_now.setdefault(mytype, set()).add(str(ad["Name"]))
                if len(group) >= ADS_PER_MESSAGE:
                    await self._publish_group(mytype, group, private)
                    del by_type[mytype]
            for mytype, group in by_type.items():
                await self._publish_group(mytype, group, private)
        if names is None:
            gone = {t: sent - names_now.get(t, set()) for t, sent in self._published.items()}
            self._published = names_now
        else:  # a partial round: what it names and did not send is gone
            gone = {t: (sent & names) - names_now.get(t, set()) for t, sent in self._published.items()}
            for t, sent in gone.items():
                self._published[t] -= sent
            for t, now_sent in names_now.items():
                self._published.setdefault(t, set()).update(now_sent)
        await self._publish_invalidations({t: n for t, n in gone.items() if n})

    async def _publish_group(self, mytype: str, group: list[dict[str, Any]], private: bool) -> None:
        """One message of ads, then the loop's other work: a whole round of a startd of 20,000
        slots, merged and encoded in one turn of the loop, held its answers up for 1.5-2 s."""
        await self.publish(bus.ADS, bus.ad_key(mytype, self.source.name, private=private),
                           self._stamped({"ads": group}), bus.T_AD)
        await asyncio.sleep(0)

    async def invalidate(self) -> None:
        """Invalidate every ad the agent advertises or advertised last (graceful stop)."""
        by_type: dict[str, set[str]] = {t: set(n) for t, n in self._published.items()}
        try:
            current = self.source.ads()
        except Exception:  # a half-stopped agent may not build its ads; what was sent is known
            self.log.warning("building the ads to invalidate failed", exc_info=True)
            current = []
        for ad in current:
            if ad.get("Name") is not None:
                by_type.setdefault(str(ad.get("MyType", self.source.my_type)), set()).add(str(ad["Name"]))
        await self._publish_invalidations(by_type)
        self._published = {}

    async def _publish_invalidations(self, by_type: dict[str, set[str]]) -> None:
        for mytype, names in by_type.items():
            ordered = sorted(names)
            for i in range(0, len(ordered), ADS_PER_MESSAGE):
                await self.publish(bus.ADS, bus.ad_key(mytype, self.source.name),
                                   self._stamped({"mytype": mytype, "names": ordered[i : i + ADS_PER_MESSAGE]}),
                                   bus.T_INVALIDATE)

    def _stamped(self, body: dict[str, Any]) -> dict[str, Any]:
        self._message_seq += 1
        return {**body, "from": self.source.address, "start": self.source.start_time, "seq": self._message_seq}

    def next_update_wait(self, first: bool) -> float:
        """Seconds to the next periodic update.

        The first wait is uniform over (0.1, 1] intervals: a pool restarted at once advertises
        at once (each daemon must be seen within one interval) and then spreads its phases over
        the whole interval, so no later round comes as one burst. Later waits keep a 10% jitter
        so phases never lock together again, and never exceed the interval.
        """
        low = 0.1 if first else 0.9
        return self.source.update_interval * random.uniform(low, 1.0)

    async def _loop(self) -> None:
        first = True
        next_full = 0.0  # the first round sends every ad
        while True:
            self._wanted.clear()  # what changed before this round is in it
            names = self._changed_names
            full = self._all_changed or not names or time.monotonic() >= next_full
            self._changed_names, self._all_changed = None, False
            try:
                await self.publish_ads(None if full else names)
            except asyncio.CancelledError:
                raise
            except Exception:  # the broker may be away; the next round tries again, whole
                self.log.warning("publishing ads failed", exc_info=True)
                self._all_changed = True
            sent = time.monotonic()
            if full:
                next_full = sent + self.next_update_wait(first)
                first = False
            try:
                await asyncio.wait_for(self._wanted.wait(), max(0.0, next_full - time.monotonic()))
                # At most one update per window: a change after a quiet window goes at once (a
                # first submit reaches the negotiator, a claimed slot the collector, without
                # waiting), a burst of changes in one update at the window's end (the interval
                # read now: a reconfig may have changed it).
                window = min(COALESCE_WINDOW, self.source.update_interval / 4)
                rest = sent + window - time.monotonic()
                if rest > 0:
                    await asyncio.sleep(rest)
            except TimeoutError:
                pass
