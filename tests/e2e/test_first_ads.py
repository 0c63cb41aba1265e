"""No lost first ads: a collector that starts after the other daemons, or restarts, has every ad
at once, because it asks every agent to advertise (a broadcast) when it starts.

The daemons run with UPDATE_INTERVAL = 300: their next periodic update comes at least 30 s
(a tenth of the interval) after their first, so every ad seen within the waits below came from
the collector's request, not from the periodic updates.
"""

from __future__ import annotations

from tests.e2e.conftest import STATIC_STARTD
from tests.e2e.pool import Pool, wait_for

# Well under the 30 s before any periodic update could come.
WAIT = 15

SLOW_UPDATES = {"GRIDBUS_UPDATE_INTERVAL": "300"}
EXPECTED = {"Scheduler": 1, "Negotiator": 1, "Machine": 4, "Collector": 1}


def _counts(p: Pool) -> dict[str, int]:
    ads = [a for t in EXPECTED for a in p.ads(t)]
    out: dict[str, int] = {}
    for ad in ads:
        out[ad["MyType"]] = out.get(ad["MyType"], 0) + 1
    return out


def _start_others(p: Pool) -> None:
    p.start("negotiator", "n")
    p.start("schedd", "s")
    p.start("startd", "a", **STATIC_STARTD)
    p.wait_serving("schedd@s", "negotiator@n")
    # The startd has no probe: its first ad went out once it logs that it serves.
    wait_for("the startd to serve", lambda: "serving on" in p.log_of("startd@a", "StartLog"), 30)


def test_collector_started_last_has_every_ad_at_once(make_pool):
    p = make_pool(**SLOW_UPDATES)
    _start_others(p)
    p.start("collector", "c")
    p.wait_serving("collector@c")
    counts = wait_for("every daemon's ad", lambda: (c := _counts(p)) == EXPECTED and c, WAIT)
    assert counts == EXPECTED


def test_restarted_collector_has_every_ad_at_once(make_pool):
    p = make_pool(**SLOW_UPDATES)
    p.start("collector", "c")
    _start_others(p)
    p.wait_serving("collector@c")
    wait_for("every daemon's ad", lambda: _counts(p) == EXPECTED, WAIT)
    p.kill("collector@c")  # SIGKILL: its ads are gone with it
    p.start("collector", "c")
    p.wait_serving("collector@c")
    counts = wait_for("every daemon's ad again", lambda: (c := _counts(p)) == EXPECTED and c, WAIT)
    assert counts == EXPECTED
