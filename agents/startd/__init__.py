"""The startd (condor_startd + condor_starter): a machine's slots, their claims and job processes.

``python -m gridbus.agents.startd`` runs it (see `main`); its address is ``startd@<name>``.
Modules: `detect` (the machine's attributes), `settings` (knobs), `slots` (static, partitionable
and dynamic slots, claims, the drain), `ads` (slot ads and the match test), `claims` (granting,
keeping and ending claims), `activation` (jobs on claims through the starter), `starter` (job
processes), `jobstarter` (what the startd needs of a starter, real or simulated), `arguments` (HTCondor's argument and environment syntax), `accounts` (the run-as
policy), `proctree` (a job's processes from /proc), `cgroups` (job cgroups: kill, memory limit,
usage, freezer), `limits` (the requests as numbers at activation), `reports` (batched JobReports
to the schedds), `gpus` (GPU discovery, their slot attributes, devices handed out by id), `cron`
(STARTD_CRON jobs and STARTD_ATTRS), `agent` (the startd composed of those parts).
"""

from __future__ import annotations

import socket

from gridbus.agents.startd.agent import CLAIM_BUSY, CLAIM_REFUSED, Startd
from gridbus.agents.startd.settings import StartdSettings
from gridbus.config import Config, knob

knob("STARTD_NAME", "", "the startd's name (its address is startd@<name>, its slots slotN@<name>); empty: the host's full name")
knob("UPDATE_INTERVAL", 300.0, "seconds between a daemon's ad updates")

__all__ = ["CLAIM_BUSY", "CLAIM_REFUSED", "Startd", "StartdSettings", "build", "main"]


def build(cfg: Config, name: str | None = None, url: str | None = None) -> Startd:
    """A startd configured from ``cfg`` (arguments given here win)."""
    startd = Startd(
        name or str(cfg.get("STARTD_NAME")) or socket.getfqdn(),
        url or cfg.url(),
        settings=StartdSettings.from_config(cfg),
        update_interval=float(cfg.get("UPDATE_INTERVAL")),
    )
    startd.config = cfg
    return startd


def main(argv: list[str] | None = None) -> None:
    from gridbus.agent.runner import serve

    serve(
        "startd",
        "StartLog",
        lambda cfg, args: build(cfg, args.name, args.url),
        argv,
        check=lambda cfg: StartdSettings.from_config(cfg).validate(),
        loop_thread=True,  # its loop thread forks jobs inside their cgroups (launch.py, _born_in)
    )
