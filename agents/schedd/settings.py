"""The schedd's configuration knobs (HTCondor names where HTCondor has one)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gridbus.transfer.knobs  # noqa: F401 - registers TRANSFER_STALL_TIMEOUT
from gridbus.config import Config, ConfigError, knob
from gridbus.transfer.stream import STALL_TIMEOUT
from gridbus.transforms import Transform, parse

knob("SCHEDD_NAME", "", "the schedd's name (its address is schedd@<name>); empty means the host name")
knob("SCHEDD_INTERVAL", 300.0, "seconds between the schedd's Scheduler/Submitter ad updates")
knob("PERIODIC_EXPR_INTERVAL", 60.0, "seconds between evaluations of PeriodicHold/PeriodicRelease/PeriodicRemove")
knob("SCHEDD_HISTORY_RETENTION", 7 * 86400.0, "seconds a completed or removed job stays in the history")
knob("SCHEDD_HISTORY_MAX_JOBS", 1_000_000, "at most this many jobs in the history (oldest forgotten first)")
knob("SCHEDD_QUEUE_SYNC", "FULL", "SQLite synchronous mode of the job queue: FULL (a Submit survives a power cut) or NORMAL")
knob("SCHEDD_DURABLE_EVENTS", True, "the schedd keeps the job events each commit owes the user logs and the bus in "
     "that commit's transaction until delivered, and delivers them again after a crash (at least once)")
knob("JOB_EVENT_STREAM_MAX_AGE", "24h", "how long the stream queue gridbus.events.stream keeps job events for "
     "consumers that were away (RabbitMQ's x-max-age: 24h, 7D, 30m); empty: the schedd declares no stream")
knob("SCHEDD_WRITE_BEHIND", 0.005, "seconds the schedd batches job updates from shadows before one commit")
knob("SCHEDD_REQUEST_QUEUE_TYPE", "auto",
     "auto, classic or quorum: the schedd's durable request queue as a replicated quorum queue, for a "
     "RabbitMQ cluster; auto is quorum when GRIDBUS_URL lists several brokers (changing it on an "
     "existing queue needs the queue deleted first)")
knob("SCHEDD_MAX_JOB_OBJECTS", 10_000, "at most this many job objects in one getObjects(_class='job') answer")
knob("QUEUE_SUPER_USERS", [], "broker users (besides the daemon account) who may change anyone's jobs")
knob("CLAIM_WORKLIFE", 1200.0, "seconds a claim may be reused for further jobs; then it is released")
knob("CLAIM_PREFETCH_JOBS", 32, "at most this many jobs the schedd queues ahead on a claim, after the one it runs "
     "(0: none), so the startd starts the next at the job's exit without a round trip; only on claims whose last "
     "job ran under CLAIM_PREFETCH_MAX_RUNTIME")
knob("CLAIM_PREFETCH_MAX_RUNTIME", 2.0, "seconds: a claim whose last job ran longer gets no jobs queued ahead, and the "
     "jobs queued ahead add up to no more than this at the last job's runtime (one at least): a long job's "
     "successors stay free for other slots")
knob("JOB_LEASE_DURATION", 2400.0, "seconds a claim lives without word from its startd (Alive); also the lease given to RequestClaim")
knob("SHADOW_CALL_TIMEOUT", 10.0, "seconds the schedd waits for a startd's answer to RequestClaim, ActivateClaims, Alive")
knob("MAX_PENDING_STARTD_CONTACTS", 200,
     "RequestClaim calls the schedd has in flight at once; further matches wait their turn (0: no limit). "
     "HTCondor's default is no limit; the schedd's calls and answers share one event loop, so a bound keeps "
     "its queries prompt while it claims thousands of slots")
knob("SCHEDD_MAX_SCHEDULER_JOBS", 200, "scheduler/local universe jobs the schedd runs at once (0: no limit)")
knob("SCHEDD_RUN_LOCAL_JOBS_AS_SELF", False,
     "a root schedd runs scheduler universe jobs whose Owner has no account here as its own user "
     "(a personal pool run as root); otherwise they are held")
knob("SCHEDD_LOCAL_KILL_TIMEOUT", 10.0, "seconds a scheduler universe job has to exit after its kill signal")
knob("OWNER_SHADOW_CHECK_INTERVAL", 30.0, "seconds between the schedd's checks for owners' shadows to stop "
     "(owners without running jobs or file transfers)")
knob("SPOOL_SWEEP_INTERVAL", 60.0, "seconds between the schedd's removals of the spool directories of jobs "
     "no longer in its queue (a spooled job removed before its output was retrieved)")
knob("MAX_SPOOL_MB_PER_OWNER", 0, "MiB of the spool one owner's spooled jobs may take (condor_submit -spool "
     "input); a job whose input would go over is held (0: no bound)")
knob("SUBMIT_REQUIREMENT_NAMES", [], "names of SUBMIT_REQUIREMENT_<NAME> expressions a submitted job must satisfy")
knob("JOB_TRANSFORM_NAMES", [], "names of JOB_TRANSFORM_<Name> transforms applied in this order to every submitted "
     "job (each where its REQUIREMENTS holds), before SUBMIT_REQUIREMENT_NAMES")
knob("MAX_JOBS_PER_OWNER", 100_000, "a Submit that would give its owner more jobs than this in the queue is refused")
knob("MAX_JOBS_PER_SUBMISSION", 20_000, "a Submit of more jobs than this is refused")
knob("MAX_JOBS_RUNNING", 10_000, "at most this many jobs on claims at once (running, starting or being claimed; "
     "0 or less: none start); scheduler universe jobs are not counted. HTCondor's default is "
     "MIN(DETECTED_MEMORY, 10000)")


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
    job_transforms: tuple[Transform, ...] = ()  # JOB_TRANSFORM_NAMES, in order
    max_jobs_per_owner: int = 100_000  # MAX_JOBS_PER_OWNER
    max_jobs_per_submission: int = 20_000  # MAX_JOBS_PER_SUBMISSION
    max_jobs_running: int = 10_000  # MAX_JOBS_RUNNING
    update_interval: float = 300.0
    periodic_interval: float = 60.0
    history_retention: float = 7 * 86400.0
    history_max_jobs: int = 1_000_000
    queue_sync: str = "FULL"
    write_behind: float = 0.005
    durable_events: bool = True  # SCHEDD_DURABLE_EVENTS
    event_stream_max_age: str = "24h"  # JOB_EVENT_STREAM_MAX_AGE ("": no stream)
    max_job_objects: int = 10_000
    request_queue_type: str = "auto"
    uid_domain: str = field(default_factory=socket.getfqdn)
    claim_worklife: float = 1200.0
    claim_prefetch: int = 32  # CLAIM_PREFETCH_JOBS
    claim_prefetch_max_runtime: float = 2.0  # CLAIM_PREFETCH_MAX_RUNTIME
    lease_duration: float = 2400.0  # JOB_LEASE_DURATION: also the claim lease given to RequestClaim
    shadow_call_timeout: float = 10.0
    max_pending_contacts: int = 200  # MAX_PENDING_STARTD_CONTACTS (0: no limit)
    max_local_jobs: int = 200  # SCHEDD_MAX_SCHEDULER_JOBS
    local_jobs_as_self: bool = False  # SCHEDD_RUN_LOCAL_JOBS_AS_SELF
    local_kill_timeout: float = 10.0  # SCHEDD_LOCAL_KILL_TIMEOUT
    shadow_check_interval: float = 30.0  # OWNER_SHADOW_CHECK_INTERVAL
    spool_sweep_interval: float = 60.0  # SPOOL_SWEEP_INTERVAL
    spool_quota_mb: int = 0  # MAX_SPOOL_MB_PER_OWNER (0: no bound)
    transfer_stall: float = STALL_TIMEOUT  # TRANSFER_STALL_TIMEOUT, given to the owners' shadows' transfers
    transfer_direct_io_min: int = 64 << 20  # TRANSFER_DIRECT_IO_MIN_MB, in bytes, given to them too
    inline_transfer_max: int = 256 << 10  # MAX_INLINE_TRANSFER_KB, in bytes: small sandboxes ride in the messages

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
            "job_transforms": job_transforms(cfg),
            "max_jobs_per_owner": int(cfg.get("MAX_JOBS_PER_OWNER")),
            "max_jobs_per_submission": int(cfg.get("MAX_JOBS_PER_SUBMISSION")),
            "max_jobs_running": int(cfg.get("MAX_JOBS_RUNNING")),
            "update_interval": cfg.get("SCHEDD_INTERVAL"),
            "periodic_interval": cfg.get("PERIODIC_EXPR_INTERVAL"),
            "history_retention": cfg.get("SCHEDD_HISTORY_RETENTION"),
            "history_max_jobs": cfg.get("SCHEDD_HISTORY_MAX_JOBS"),
            "queue_sync": str(cfg.get("SCHEDD_QUEUE_SYNC")).upper(),
            "write_behind": cfg.get("SCHEDD_WRITE_BEHIND"),
            "durable_events": bool(cfg.get("SCHEDD_DURABLE_EVENTS")),
            "event_stream_max_age": str(cfg.get("JOB_EVENT_STREAM_MAX_AGE") or ""),
            "max_job_objects": cfg.get("SCHEDD_MAX_JOB_OBJECTS"),
            "request_queue_type": str(cfg.get("SCHEDD_REQUEST_QUEUE_TYPE")).lower(),
            "uid_domain": cfg.get("UID_DOMAIN") or socket.getfqdn(),
            "claim_worklife": float(cfg.get("CLAIM_WORKLIFE")),
            "claim_prefetch": max(0, int(cfg.get("CLAIM_PREFETCH_JOBS"))),
            "claim_prefetch_max_runtime": float(cfg.get("CLAIM_PREFETCH_MAX_RUNTIME")),
            "lease_duration": float(cfg.get("JOB_LEASE_DURATION")),
            "shadow_call_timeout": float(cfg.get("SHADOW_CALL_TIMEOUT")),
            "max_pending_contacts": int(cfg.get("MAX_PENDING_STARTD_CONTACTS")),
            "max_local_jobs": int(cfg.get("SCHEDD_MAX_SCHEDULER_JOBS")),
            "local_jobs_as_self": bool(cfg.get("SCHEDD_RUN_LOCAL_JOBS_AS_SELF")),
            "local_kill_timeout": float(cfg.get("SCHEDD_LOCAL_KILL_TIMEOUT")),
            "shadow_check_interval": float(cfg.get("OWNER_SHADOW_CHECK_INTERVAL")),
            "transfer_stall": float(cfg.get("TRANSFER_STALL_TIMEOUT")),
            "transfer_direct_io_min": max(0, int(cfg.get("TRANSFER_DIRECT_IO_MIN_MB"))) << 20,
            "inline_transfer_max": max(0, int(cfg.get("MAX_INLINE_TRANSFER_KB"))) << 10,
            "spool_sweep_interval": float(cfg.get("SPOOL_SWEEP_INTERVAL")),
            "spool_quota_mb": int(cfg.get("MAX_SPOOL_MB_PER_OWNER")),
        }
        values.update(overrides)
        return cls(**values)


def job_transforms(cfg: Config) -> tuple[Transform, ...]:
    """JOB_TRANSFORM_<Name> for each name of JOB_TRANSFORM_NAMES, parsed (a ValueError names the
    one that is missing or broken); their $(KNOB) references resolve in ``cfg``."""

    def knob_text(name: str) -> str | None:
        try:
            value = cfg.get(name, None)
        except (KeyError, ConfigError):
            return None
        if value is None:
            return None
        return ",".join(map(str, value)) if isinstance(value, list) else str(value)

    out = []
    for name in cfg.get("JOB_TRANSFORM_NAMES"):
        text = cfg.get(f"JOB_TRANSFORM_{name}", None)
        if text is None:
            raise ValueError(f"JOB_TRANSFORM_NAMES names {name} but JOB_TRANSFORM_{name} is not set")
        out.append(parse(f"JOB_TRANSFORM_{name}", str(text), knob_text))
    return tuple(out)
