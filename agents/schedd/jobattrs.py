"""HTCondor's job attributes as the schedd uses them: statuses, hold codes, defaults, protection.

Names and meanings follow HTCondor's job ClassAd attributes (its manual's "Job ClassAd Attributes").
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Any

from gridbus.jobstatus import STATUS_LETTERS, STATUS_NAMES, JobStatus

__all__ = ["JobStatus", "STATUS_NAMES", "STATUS_LETTERS", "HoldCode", "parse_job_id", "job_id"]

# Plain ints for the schedd's hot paths (Proc.status is an int; an IntEnum compares slower).
IDLE, RUNNING, REMOVED, COMPLETED, HELD, SUSPENDED = (int(s) for s in (
    JobStatus.IDLE, JobStatus.RUNNING, JobStatus.REMOVED, JobStatus.COMPLETED, JobStatus.HELD, JobStatus.SUSPENDED))


class HoldCode(IntEnum):
    """HoldReasonCode values (src/condor_utils/condor_holdcodes.h)."""

    UNSPECIFIED = 0
    USER_REQUEST = 1
    JOB_POLICY = 3
    TRANSFER_OUTPUT_ERROR = 12
    TRANSFER_INPUT_ERROR = 13
    SUBMITTED_ON_HOLD = 15
    SPOOLING_INPUT = 16
    JOB_OUT_OF_RESOURCES = 34


UNIVERSES = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}

# What a Submit must carry (the QMF submission interface of Condor in Red Hat MRG): Owner comes from the caller's broker identity.
REQUIRED = ("Cmd", "Requirements", "JobUniverse", "Iwd")

# Filled in when the submitter did not say (MRG's SubmitJob defaults and condor_submit's).
DEFAULTS: dict[str, Any] = {
    "JobPrio": 0,
    "ImageSize": 0,
    "DiskUsage": 0,
    "RemoteUserCpu": 0.0,
    "RemoteSysCpu": 0.0,
    "RemoteWallClockTime": 0.0,
    "NumJobStarts": 0,
    "NumShadowStarts": 0,
    "NumJobCompletions": 0,
    "NumRestarts": 0,
    "MaxHosts": 1,
    "MinHosts": 1,
    "CurrentHosts": 0,
    "RequestCpus": 1,
    "RequestMemory": 128,  # JOB_DEFAULT_REQUESTMEMORY
    "RequestDisk": 1024,
    "Rank": 0.0,
    "In": "/dev/null",
    "Out": "/dev/null",
    "Err": "/dev/null",
    "ShouldTransferFiles": "NO",
    "WhenToTransferOutput": "ON_EXIT",
    "LeaveJobInQueue": False,
    "JobLeaseDuration": 2400,
    "JobSubmitMethod": 100,
}

# Attributes only the schedd writes: a submitter's values are overwritten, SetAttribute refuses them.
SCHEDD_OWNED = frozenset(
    a.lower()
    for a in (
        "ClusterId", "ProcId", "Owner", "User", "JobStatus", "LastJobStatus", "QDate", "GlobalJobId",
        "EnteredCurrentStatus", "MyType", "TargetType", "NumJobStarts", "NumShadowStarts",
        "JobCurrentStartDate", "JobStartDate", "CompletionDate", "RemoteHost", "RemoteSlot",
        "ClaimId", "HoldReason", "HoldReasonCode", "HoldReasonSubCode", "ExitCode", "ExitBySignal",
        "ExitSignal", "ExitStatus", "NumJobCompletions", "LastHoldReason", "LastHoldReasonCode",
        "ReleaseReason", "RemoveReason", "LastRemoteHost", "JobRunCount", "ServerTime",
    )
)

# Attribute names HTCondor accepts (condor_qedit, MRG's SetJobAttribute): letters, digits, _.
ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_WORDS = frozenset({"error", "false", "is", "isnt", "parent", "true", "undefined", "my", "target"})


def job_id(cluster: int, proc: int) -> str:
    return f"{cluster}.{proc}"


def parse_job_id(text: Any) -> tuple[int, int | None]:
    """'c.p' -> (c, p); 'c' -> (c, None); a GlobalJobId 'schedd#c.p#qdate' -> (c, p).

    Raises ValueError with a sentence when the text names no job.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return int(text), None
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text!r} is not a job id ('cluster.proc', 'cluster' or a GlobalJobId)")
    part = text.strip()
    if "#" in part:
        pieces = part.split("#")
        if len(pieces) < 2:
            raise ValueError(f"{text!r} is not a GlobalJobId ('schedd#cluster.proc#qdate')")
        part = pieces[1]
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?", part)
    if not m:
        raise ValueError(f"{text!r} is not a job id ('cluster.proc', 'cluster' or a GlobalJobId)")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)


LOCAL_UNIVERSES = frozenset({7, 12})  # scheduler, local: the universes the schedd runs itself


def runs_on_submit_host(ad: dict[str, Any]) -> bool:
    """True for jobs the schedd runs itself: never offered to the negotiator or a claim."""
    return ad.get("JobUniverse") in LOCAL_UNIVERSES
