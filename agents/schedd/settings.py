"""The schedd's configuration knobs (HTCondor names where HTCondor has one)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridbus.config import Config, knob

knob("SCHEDD_NAME", "", "the schedd's name (its address is schedd@<name>); empty means the host name")
knob("SCHEDD_INTERVAL", 300.0, "seconds between the schedd's Scheduler/Submitter ad updates")
knob("PERIODIC_EXPR_INTERVAL", 60.0, "seconds between evaluations of PeriodicHold/PeriodicRelease/PeriodicRemove")
knob("SCHEDD_HISTORY_RETENTION", 7 * 86400.0, "seconds a completed or removed job stays in the history")
knob("SCHEDD_HISTORY_MAX_JOBS", 1_000_000, "at most this many jobs in the history (oldest forgotten first)")
knob("SCHEDD_QUEUE_SYNC", "FULL", "SQLite synchronous mode of the job queue: FULL (a Submit survives a power cut) or NORMAL")
knob("SCHEDD_WRITE_BEHIND", 0.005, "seconds the schedd batches job updates from shadows before one commit")
knob("SCHEDD_REQUEST_QUEUE_TYPE", "auto",
     "auto, classic or quorum: the schedd's durable request queue as a replicated quorum queue, for a "
     "RabbitMQ cluster; auto is quorum when GRIDBUS_URL lists several brokers (changing it on an "
     "existing queue needs the queue deleted first)")
knob("SCHEDD_MAX_JOB_OBJECTS", 10_000, "at most this many job objects in one getObjects(_class='job') answer")
knob("QUEUE_SUPER_USERS", [], "broker users (besides the daemon account) who may change anyone's jobs")
knob("SUBMIT_REQUIREMENT_NAMES", [], "names of SUBMIT_REQUIREMENT_<NAME> expressions a submitted job must satisfy")


@dataclass(frozen=True)
class SubmitRequirement:
    """SUBMIT_REQUIREMENT_<Name>: an expression over the job (MY) and the schedd ad (TARGET)."""

    name: str
    expr: str
    reason: str = ""  # SUBMIT_REQUIREMENT_<Name>_REASON: ClassAd text, usually a quoted string


@dataclass
class ScheddSettings:
    spool: Path
    super_users: frozenset[str] = frozenset()
    submit_requirements: tuple[SubmitRequirement, ...] = ()
    update_interval: float = 300.0
    periodic_interval: float = 60.0
    history_retention: float = 7 * 86400.0
    history_max_jobs: int = 1_000_000
    queue_sync: str = "FULL"
    write_behind: float = 0.005
    max_job_objects: int = 10_000
    request_queue_type: str = "auto"
    uid_domain: str = field(default_factory=socket.getfqdn)

    @classmethod
    def from_config(cls, cfg: Config, **overrides: Any) -> ScheddSettings:
        reqs = []
        for name in cfg.get("SUBMIT_REQUIREMENT_NAMES"):
            expr = cfg.get(f"SUBMIT_REQUIREMENT_{name}", None)
            if expr is None:
                raise ValueError(f"SUBMIT_REQUIREMENT_NAMES names {name} but SUBMIT_REQUIREMENT_{name} is not set")
            reqs.append(SubmitRequirement(name, str(expr), str(cfg.get(f"SUBMIT_REQUIREMENT_{name}_REASON", ""))))
        values: dict[str, Any] = {
            "spool": cfg.path_of("SPOOL"),
            "super_users": frozenset(cfg.get("QUEUE_SUPER_USERS")),
            "submit_requirements": tuple(reqs),
            "update_interval": cfg.get("SCHEDD_INTERVAL"),
            "periodic_interval": cfg.get("PERIODIC_EXPR_INTERVAL"),
            "history_retention": cfg.get("SCHEDD_HISTORY_RETENTION"),
            "history_max_jobs": cfg.get("SCHEDD_HISTORY_MAX_JOBS"),
            "queue_sync": str(cfg.get("SCHEDD_QUEUE_SYNC")).upper(),
            "write_behind": cfg.get("SCHEDD_WRITE_BEHIND"),
            "max_job_objects": cfg.get("SCHEDD_MAX_JOB_OBJECTS"),
            "request_queue_type": str(cfg.get("SCHEDD_REQUEST_QUEUE_TYPE")).lower(),
            "uid_domain": cfg.get("UID_DOMAIN") or socket.getfqdn(),
        }
        values.update(overrides)
        return cls(**values)
