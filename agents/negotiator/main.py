"""Build the negotiator from the configuration and run it as a daemon."""

from __future__ import annotations

from gridbus.agent import runner
from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.groups import GroupConfig
from gridbus.agents.negotiator.preemption import (
    DEFAULT_PREEMPTION_RANK,
    DEFAULT_PREEMPTION_REQUIREMENTS,
    PreemptionPolicy,
)
from gridbus.config import Config, knob

knob("NEGOTIATOR_NAME", "", "the negotiator's name (default: the host name)")
knob("NEGOTIATOR_CYCLE_DELAY", 1.0, "minimum seconds between the starts of two negotiation cycles")
knob("NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE", 20, "resource requests the negotiator asks a schedd for per round trip")
knob("NEGOTIATOR_MATCH_HOLD", 20.0, "seconds a matched slot is kept out of later cycles while its startd has not re-advertised it")
knob("NEGOTIATOR_PREFETCH_REQUESTS", True, "fetch every submitter's first page of resource requests at once when a cycle starts")
knob("NEGOTIATOR_SCHEDD_TIMEOUT", 30.0, "seconds the negotiator waits for a schedd's answer before skipping it this cycle")
knob("PRIORITY_HALFLIFE", 86400.0, "seconds in which a submitter's priority moves half way to the slots it holds")
knob("CONCURRENCY_LIMIT_DEFAULT", 2**31 - 1, "maximum of a concurrency limit that has no <NAME>_LIMIT")
knob("CONCURRENCY_LIMITS", [], "initial limits as NAME=MAX items (SetLimit changes them at run time)")
knob("COLLECTOR_ADDRESS", "", "the collector's agent address (default: the first collector answering class.collector)")
knob("GROUP_NAMES", [], "accounting groups with quotas, subgroups named <group>.<subgroup> (GROUP_QUOTA_<g>, GROUP_QUOTA_DYNAMIC_<g>, GROUP_ACCEPT_SURPLUS[_<g>], GROUP_AUTOREGROUP[_<g>])")
knob("NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION", False, "keep group quotas that add up to more than their parent's as they are, not scaled down")
knob("NEGOTIATOR_CONSIDER_PREEMPTION", True, "let the negotiator match jobs to claimed slots, preempting the jobs there (PREEMPTION_REQUIREMENTS, the startd's RANK)")
knob("PREEMPTION_REQUIREMENTS", DEFAULT_PREEMPTION_REQUIREMENTS, "when a job may preempt a claimed slot's job for its better priority (MY the slot, TARGET the job)")
knob("PREEMPTION_RANK", DEFAULT_PREEMPTION_RANK, "which claimed slot a job preempts first, among those its Rank ranks alike (MY the slot, TARGET the job)")
knob("NEGOTIATOR_ADMINS", [], "broker users besides the daemon account who may set priorities, usage and limits")


def build(cfg: Config | None = None, name: str | None = None, url: str | None = None) -> Negotiator:
    cfg = cfg or Config.load(daemon="negotiator")
    limits: dict[str, int] = {}
    for item in cfg.get("CONCURRENCY_LIMITS"):
        lname, _, lmax = str(item).partition("=")
        try:
            limits[lname.strip()] = int(lmax)
        except ValueError:
            raise ValueError(f"CONCURRENCY_LIMITS item {item!r} is not NAME=MAX") from None
    groups = GroupConfig.from_knobs(cfg.get("GROUP_NAMES"), lambda k: cfg.get(k, None),
                                    cfg.get("NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION"))
    return Negotiator(
        name or cfg.daemon_name("negotiator"),
        url or cfg.url(),
        spool=cfg.path_of("SPOOL"),
        limits=limits,
        groups=groups,
        preemption=PreemptionPolicy(cfg.get("NEGOTIATOR_CONSIDER_PREEMPTION"), str(cfg.get("PREEMPTION_REQUIREMENTS")),
                                    str(cfg.get("PREEMPTION_RANK"))),
        **cfg.pick(
            interval="NEGOTIATOR_INTERVAL",
            cycle_delay="NEGOTIATOR_CYCLE_DELAY",
            halflife="PRIORITY_HALFLIFE",
            request_list_size="NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE",
            collector="COLLECTOR_ADDRESS",
            match_hold="NEGOTIATOR_MATCH_HOLD",
            schedd_timeout="NEGOTIATOR_SCHEDD_TIMEOUT",
            prefetch="NEGOTIATOR_PREFETCH_REQUESTS",
            default_limit="CONCURRENCY_LIMIT_DEFAULT",
            update_interval="UPDATE_INTERVAL",
            admins="NEGOTIATOR_ADMINS",
        ),
    )


def main(argv: list[str] | None = None) -> None:
    runner.serve("negotiator", "NegotiatorLog", lambda cfg, args: build(cfg, args.name, args.url), argv)
