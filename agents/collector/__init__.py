"""The collector: the pool's picture, the newest ad of every daemon, each kept for its lifetime.

`python -m gridbus.agents.collector` runs it (see `main`). Modules: `store` (ads, indexes, expiry
heap), `query` (constraint fast paths, projection), `stats` (rates), `agent` (the agent: ingest
from gridbus.ads, the Query/Locate/Invalidate methods, its own Collector ad).
"""

from __future__ import annotations

from gridbus.agents.collector.agent import (
    DEFAULT_CLASSAD_LIFETIME,
    NOT_FOUND,
    Collector,
    ads_queue_name,
)
from gridbus.agents.collector.store import PRIVATE_ATTRS, AdStore, BadAd, Outcome
from gridbus.config import Config, knob

knob("COLLECTOR_NAME", "", "the collector's name (its address is collector@<name>); empty: the host name. "
     "Consoles that set it talk to that collector instead of looking one up")
knob("COLLECTOR_UPDATE_INTERVAL", 900.0, "seconds between updates of the collector's own ad")
knob("COLLECTOR_PRIVATE_READERS", [], "broker users who may read private ads (claim ids); empty: the collector's own user")
knob("CLASSAD_LIFETIME", 0.0, "seconds an ad lives in the collector without an update; 0 means three update intervals")
knob("UPDATE_INTERVAL", 300.0, "seconds between a daemon's ad updates")

__all__ = [
    "DEFAULT_CLASSAD_LIFETIME",
    "NOT_FOUND",
    "PRIVATE_ATTRS",
    "AdStore",
    "BadAd",
    "Collector",
    "Outcome",
    "ads_queue_name",
    "build",
    "main",
]


def build(cfg: Config, name: str | None = None, url: str | None = None) -> Collector:
    """A collector configured from ``cfg`` (arguments given here win)."""
    collector = Collector(name or cfg.daemon_name("collector"), url or cfg.url())
    collector.config = cfg  # the baseline a later reconfig compares against
    collector.apply_config(cfg)
    return collector


def main(argv: list[str] | None = None) -> None:
    from gridbus.agent.runner import serve

    serve("collector", "CollectorLog", lambda cfg, args: build(cfg, args.name, args.url), argv)
