"""Advertising: an agent's ads on gridbus.ads, periodically, when something changed, and at once
when a collector asks (the Advertise broadcast a starting collector sends, so no first ad is lost).

A mixin of :class:`gridbus.agent.core.Agent`; it uses the agent's name, update interval, lifetime,
sequence number and ``publish``.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from gridbus import bus

# One ad message carries at most this many ads; a startd's slots travel together, a simulator's
# 100,000 machine ads in a few hundred messages.
ADS_PER_MESSAGE = 500


class Advertising:
    # Provided by the Agent.
    name: str
    my_type: str
    update_interval: float
    lifetime: float
    start_time: int
    log: Any
    _sequence: int
    _stopping: bool
    _ads_wanted: asyncio.Event | None
    _published: dict[str, set[str]]
    ad_extras: Any  # attributes added to every ad of a round (the duty cycle, gridbus.agent.common)

    def ads(self) -> list[dict[str, Any]]:
        """Every public ad this agent advertises (default: its daemon ad)."""
        return [self.daemon_ad()]

    def private_ads(self) -> list[dict[str, Any]]:
        """Ads that carry secrets (claim ids); they travel on private.* routing keys."""
        return []

    def ads_changed(self) -> None:
        """Something meaningful changed: re-advertise soon (coalesced)."""
        if self._ads_wanted is not None:
            self._ads_wanted.set()

    async def publish_ads(self) -> None:
        """Publish every ad (public and private) once, batched; invalidate the ones gone since.

        Ads are grouped by MyType, up to ADS_PER_MESSAGE per message, so a startd's slots travel
        together. A name published last round and absent now (a dynamic slot that went away, a
        submitter without jobs) is invalidated at once rather than left to expire.
        """
        self._sequence += 1
        extra = {
            **self.ad_extras(),
            "UpdateSequenceNumber": self._sequence,
            "DaemonStartTime": self.start_time,
            "ClassAdLifetime": self.lifetime,
        }
        names_now: dict[str, set[str]] = {}
        for private, ads in ((False, self.ads()), (True, self.private_ads())):
            by_type: dict[str, list[dict[str, Any]]] = {}
            for ad in ads:
                mytype = str(ad.get("MyType", self.my_type))
                by_type.setdefault(mytype, []).append({**ad, "MyType": mytype, **extra})
                if not private and ad.get("Name") is not None:
                    names_now.setdefault(mytype, set()).add(str(ad["Name"]))
            for mytype, group in by_type.items():
                for i in range(0, len(group), ADS_PER_MESSAGE):
                    await self.publish(
                        bus.ADS,
                        bus.ad_key(mytype, self.name, private=private),
                        {"ads": group[i : i + ADS_PER_MESSAGE]},
                        bus.T_AD,
                    )
        gone = {t: names - names_now.get(t, set()) for t, names in self._published.items()}
        self._published = names_now
        await self._publish_invalidations({t: n for t, n in gone.items() if n})

    async def invalidate_ads(self) -> None:
        """Invalidate every ad this agent advertises or advertised last (graceful stop)."""
        by_type: dict[str, set[str]] = {t: set(n) for t, n in self._published.items()}
        try:
            current = self.ads()
        except Exception:  # a half-stopped agent may not build its ads; what was sent is known
            self.log.warning("building the ads to invalidate failed", exc_info=True)
            current = []
        for ad in current:
            if ad.get("Name") is not None:
                by_type.setdefault(str(ad.get("MyType", self.my_type)), set()).add(str(ad["Name"]))
        await self._publish_invalidations(by_type)
        self._published = {}

    async def _publish_invalidations(self, by_type: dict[str, set[str]]) -> None:
        for mytype, names in by_type.items():
            ordered = sorted(names)
            for i in range(0, len(ordered), ADS_PER_MESSAGE):
                await self.publish(
                    bus.ADS,
                    bus.ad_key(mytype, self.name),
                    {"mytype": mytype, "names": ordered[i : i + ADS_PER_MESSAGE]},
                    bus.T_INVALIDATE,
                )

    def _next_update_wait(self, first: bool) -> float:
        """Seconds to the next periodic update.

        The first wait is uniform over (0.1, 1] intervals: a pool restarted at once advertises
        at once (each daemon must be seen within one interval) and then spreads its phases over
        the whole interval, so no later round comes as one burst. Later waits keep a 10% jitter
        so phases never lock together again, and never exceed the interval.
        """
        low = 0.1 if first else 0.9
        return self.update_interval * random.uniform(low, 1.0)

    async def _advertise_loop(self) -> None:
        assert self._ads_wanted is not None
        min_gap = min(0.2, self.update_interval / 4)
        first = True
        while not self._stopping:
            self._ads_wanted.clear()  # what changed before this round is in it
            try:
                await self.publish_ads()
            except asyncio.CancelledError:
                raise
            except Exception:  # the broker may be away; the next round tries again
                self.log.warning("publishing ads failed", exc_info=True)
            wait = self._next_update_wait(first)
            first = False
            try:
                await asyncio.wait_for(self._ads_wanted.wait(), wait)
                await asyncio.sleep(min_gap)  # coalesce a burst of changes into one update
            except TimeoutError:
                pass

