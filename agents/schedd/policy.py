"""Job policy, evaluated by the schedd as HTCondor's UserPolicy does.

Periodic (every PERIODIC_EXPR_INTERVAL): PeriodicHold for a job that is not held, PeriodicRelease
for a held one, then PeriodicRemove. At exit (the shadow reports it): OnExitHold, then
OnExitRemove (undefined means true) together with JobMaxRetries: a job that did not succeed
(ExitBySignal, or ExitCode other than SuccessExitCode, default 0) is run again while
NumJobCompletions <= JobMaxRetries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gridbus import attrs
from gridbus.agents.schedd.jobattrs import HoldCode, JobStatus
from gridbus.classad.values import is_number

PERIODIC_ATTRS = ("PeriodicHold", "PeriodicRelease", "PeriodicRemove")
POLICY_ATTRS_LOWER = frozenset(a.lower() for a in (*PERIODIC_ATTRS, "OnExitHold", "OnExitRemove", "JobMaxRetries"))
# Every name this module reads from a job ad: a job may spell them in any case.
_NAMES = (*PERIODIC_ATTRS, "PeriodicHoldReason", "PeriodicHoldSubCode", "OnExitHold", "OnExitHoldReason",
          "OnExitHoldSubCode", "OnExitRemove", "JobMaxRetries", "SuccessExitCode", "ExitBySignal", "ExitCode",
          "NumJobCompletions")
_SPELLINGS = attrs.Spellings(_NAMES)

HOLD = "hold"
RELEASE = "release"
REMOVE = "remove"
COMPLETE = "complete"
REQUEUE = "requeue"


@dataclass(frozen=True)
class Decision:
    action: str  # HOLD, RELEASE, REMOVE (periodic); HOLD, COMPLETE, REQUEUE (at exit)
    reason: str = ""
    code: int = 0
    subcode: int = 0


def _compile(text: str) -> Any:
    from gridbus import classad

    return classad.compile(text)


def _text(value: Any) -> str:
    return str(value)


def _test(ad: Mapping[str, Any], name: str) -> bool | None:
    """EvalBool of attribute ``name`` of ``ad``: None when the job has no such attribute."""
    value = ad.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if is_number(value):
        return value != 0
    try:
        return bool(_compile(_text(value)).test(ad))
    except Exception:
        return False  # an expression that cannot be evaluated never fires a policy


def _reason(ad: Mapping[str, Any], attr: str, reason_attr: str | None) -> str:
    if reason_attr:
        custom = ad.get(reason_attr)
        if custom is not None:
            if isinstance(custom, str):
                return custom
            try:
                value = _compile(_text(custom)).eval(ad)
                if isinstance(value, str) and value:
                    return value
            except Exception:
                pass
    return f"The job attribute {attr} expression '{_text(ad.get(attr))}' evaluated to TRUE"


def _subcode(ad: Mapping[str, Any], attr: str) -> int:
    value = ad.get(attr)
    if is_number(value) and isinstance(value, int):
        return value
    if value is not None:
        try:
            out = _compile(_text(value)).eval(ad)
            return out if is_number(out) and isinstance(out, int) else 0
        except Exception:
            return 0
    return 0


def periodic(job: dict[str, Any]) -> Decision | None:
    """What the periodic policy says about a job now, or None."""
    ad = _SPELLINGS.spelled(job)
    status = ad.get("JobStatus")
    if status in (JobStatus.REMOVED, JobStatus.COMPLETED):
        return None
    if status != JobStatus.HELD and _test(ad, "PeriodicHold"):
        return Decision(HOLD, _reason(ad, "PeriodicHold", "PeriodicHoldReason"), int(HoldCode.JOB_POLICY),
                        _subcode(ad, "PeriodicHoldSubCode"))
    if status == JobStatus.HELD and _test(ad, "PeriodicRelease"):
        return Decision(RELEASE, _reason(ad, "PeriodicRelease", None))
    if _test(ad, "PeriodicRemove"):
        return Decision(REMOVE, _reason(ad, "PeriodicRemove", None))
    return None


def at_exit(job: dict[str, Any]) -> Decision:
    """What happens to a job that exited (``job`` carries ExitCode/ExitBySignal and the new counts)."""
    ad = _SPELLINGS.spelled(job)
    if _test(ad, "OnExitHold"):
        return Decision(HOLD, _reason(ad, "OnExitHold", "OnExitHoldReason"), int(HoldCode.JOB_POLICY),
                        _subcode(ad, "OnExitHoldSubCode"))
    remove = _test(ad, "OnExitRemove")
    if remove is False:
        return Decision(REQUEUE, f"The job attribute OnExitRemove expression '{_text(ad.get('OnExitRemove'))}' evaluated to FALSE")
    retries = ad.get("JobMaxRetries")
    if is_number(retries) and isinstance(retries, int):
        success_code = ad.get("SuccessExitCode", 0)
        succeeded = not ad.get("ExitBySignal", False) and ad.get("ExitCode") == success_code
        if not succeeded and int(ad.get("NumJobCompletions", 0)) <= retries:
            return Decision(REQUEUE, f"the job failed and has been run {ad.get('NumJobCompletions', 0)} of "
                                     f"1 + JobMaxRetries ({retries}) times")
    return Decision(COMPLETE)


def has_periodic(ad_keys_lower: Any) -> bool:
    return any(a.lower() in ad_keys_lower for a in PERIODIC_ATTRS)
