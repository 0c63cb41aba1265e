"""Turning a Submit call into a cluster ad: required attributes, defaults, identity, requirements.

Pure functions over plain dicts; the agent calls them and commits the result.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from gridbus import wire
from gridbus.agents.schedd.jobattrs import (
    DEFAULTS,
    REQUIRED,
    SCHEDD_OWNED,
    UNIVERSES,
    HoldCode,
    JobStatus,
)
from gridbus.agents.schedd.settings import SubmitRequirement
from gridbus.agents.startd import containers
from gridbus.attrs import canonical
from gridbus.attrs import get as lookup
from gridbus.status import MethodError, app_error, forbidden, invalid
from gridbus.transforms import Transform, TransformError, reads, transform_changes

# Submit refusals that are not about argument shapes (QMF's application errors, USER + n; 4 and
# 5 are the limits', limits.py).
E_SUBMIT_REQUIREMENT = 1
E_SUBMISSION_ID_REUSED = 2
E_UNKNOWN_CLUSTER_ID = 3
E_JOB_TRANSFORM = 6

SUBMIT_TEXT_REFUSED = (
    "Submit: this schedd does not read submit descriptions (Submit.Text): the submitting client "
    "expands them, as condor_submit does (NewCluster gives the cluster id for $(Cluster)), and sends "
    "finished job ads; a schedd that read them would run a description's 'include command' and "
    "'queue from ... |' as itself"
)

SUBMITTED_ON_HOLD = "submitted on hold at user's request"


def classad_module() -> Any:
    from gridbus import classad

    return classad


def normalize_ad(ad: Any, what: str = "Ad") -> dict[str, Any]:
    """A plain dict from a wire ad, accepting QMF's typed-map form; names checked."""
    if not isinstance(ad, dict):
        if type(ad).__name__ == "ClassAd":
            ad = {k: ad.lookup(k) if _is_expr(ad[k]) else ad[k] for k in ad.keys()}
        else:
            raise invalid(f"Submit: {what} must be a map of attribute to value, not {type(ad).__name__}")
    try:
        ad = wire.typed_map_to_ad(ad)
    except ValueError as exc:
        raise invalid(f"Submit: {what}: {exc}") from None
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for name, value in ad.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise invalid(f"Submit: {what} has an invalid attribute name {name!r}")
        if name.lower() in seen:
            raise invalid(f"Submit: {what} names attribute {name} twice ({seen[name.lower()]} and {name})")
        seen[name.lower()] = name
        out[name] = value
    return out


def _is_expr(value: Any) -> bool:
    return type(value).__name__ == "ExprTree"


_REQUIRED_LOWER = frozenset(a.lower() for a in REQUIRED)


def touches_required(diff: dict[str, Any]) -> bool:
    return any(k.lower() in _REQUIRED_LOWER for k in diff)


def check_required(ad: dict[str, Any]) -> None:
    missing = [a for a in REQUIRED if canonical(ad, a) is None]
    if missing:
        raise invalid(
            f"Submit: the job ad is missing required attributes: {', '.join(missing)} "
            f"(a job needs {', '.join(REQUIRED)})"
        )
    cmd = lookup(ad, "Cmd")
    if not isinstance(cmd, str) or not (cmd or containers.wanted(ad)):
        # (A container job's Cmd may be empty, as condor_submit writes it: the image's command runs.)
        raise invalid(f"Submit: Cmd must be a non-empty string (the program to run), got {cmd!r}")
    iwd = lookup(ad, "Iwd")
    if not isinstance(iwd, str) or not iwd.startswith("/"):
        raise invalid(f"Submit: Iwd must be an absolute path (the job's initial working directory), got {iwd!r}")
    uni = lookup(ad, "JobUniverse")
    if isinstance(uni, bool) or not isinstance(uni, int) or uni not in UNIVERSES:
        raise invalid(f"Submit: JobUniverse must be an HTCondor universe number (5 is vanilla), got {uni!r}")
    req = lookup(ad, "Requirements")
    if not (isinstance(req, bool) or _is_expr(req)):
        if isinstance(req, str):
            raise invalid(
                "Submit: Requirements must be an expression, not a string "
                f"(send it typed, e.g. {{'$expr': {req!r}}}, or with TYPE EXPR_TYPE)"
            )
        raise invalid(f"Submit: Requirements must be an expression, got {req!r}")


def resolve_owner(ad: dict[str, Any], caller: str, is_super: bool) -> str:
    """The job's Owner: the caller's broker user; another Owner only for a queue super user."""
    given = lookup(ad, "Owner")
    if given is None or given == caller or type(given).__name__ == "Value":  # absent or undefined
        return caller
    if not isinstance(given, str) or not given:
        raise invalid(f"Submit: Owner must be a user name, got {given!r}")
    if not is_super:
        raise forbidden(
            f"{caller} may not submit jobs owned by {given}: the Owner of a job is the submitter's "
            "broker user, and only a queue super user (QUEUE_SUPER_USERS) may submit for someone else"
        )
    return given


def build_cluster_ad(
    ad: dict[str, Any], *, owner: str, uid_domain: str, cluster_id: int, qdate: int
) -> tuple[dict[str, Any], int]:
    """The cluster ad to store (defaults filled, schedd attributes set) and the procs' JobStatus."""
    out: dict[str, Any] = {}
    for name, value in DEFAULTS.items():
        if canonical(ad, name) is None:
            out[name] = value
    status = lookup(ad, "JobStatus", JobStatus.IDLE)
    on_hold = status == JobStatus.HELD
    hold_reason = lookup(ad, "HoldReason") if on_hold else None
    for name, value in ad.items():
        if name.lower() in SCHEDD_OWNED:
            continue  # the schedd's own values win (set below)
        out[name] = value
    out.update(
        {
            "MyType": "Job",
            "TargetType": "Machine",
            "ClusterId": cluster_id,
            "Owner": owner,
            "User": f"{owner}@{uid_domain}",
            "QDate": qdate,
            "EnteredCurrentStatus": qdate,
            "NumJobStarts": 0,
            "NumShadowStarts": 0,
            "NumJobCompletions": 0,
        }
    )
    if on_hold:
        out["HoldReason"] = hold_reason if isinstance(hold_reason, str) and hold_reason else SUBMITTED_ON_HOLD
        # A job submitted for spooling waits for its input (HTCondor's SpoolingInput), not a user.
        spooling = lookup(ad, "HoldReasonCode") == HoldCode.SPOOLING_INPUT
        out["HoldReasonCode"] = int(HoldCode.SPOOLING_INPUT if spooling else HoldCode.SUBMITTED_ON_HOLD)
        out["HoldReasonSubCode"] = 0
        return out, int(JobStatus.HELD)
    return out, int(JobStatus.IDLE)


def proc_diffs(procs: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for i, p in enumerate(procs):
        diff = normalize_ad(p, f"Procs[{i}]")
        # Procs are numbered by the schedd in order; a ProcId they carry (Submit.proc_ads) is that order.
        key = canonical(diff, "ProcId")
        if key is not None:
            del diff[key]
        for name in list(diff):
            if name.lower() in SCHEDD_OWNED and name.lower() != "jobstatus":
                raise invalid(f"Submit: Procs[{i}] sets {name}, which the schedd assigns")
        out.append(diff)
    return out


class Late:
    """A validated proc template (gridbus.submit.materialize): the procs the schedd makes itself."""

    def __init__(self, template: dict[str, Any], items: list, steps: int, count: int):
        self.template, self.items, self.steps, self.count = template, items, steps, count

    def proc(self, proc_id: int) -> dict[str, Any]:
        from gridbus.submit import materialize

        return materialize.proc_ad(self.template, materialize.proc_for(proc_id, self.items, self.steps))

    def wire(self) -> dict[str, Any]:
        return {"Template": self.template, "Items": self.items, "Steps": self.steps}


def check_late(submit: Any) -> Late | None:
    """The Submit map: empty, or a proc template with its item rows; submit text is refused."""
    if not submit:
        return None
    if not isinstance(submit, dict):
        raise invalid(f"Submit: the Submit argument must be a map, not {type(submit).__name__}")
    if "Text" in submit:
        raise invalid(SUBMIT_TEXT_REFUSED)
    unknown = sorted(str(k)[:40] for k in submit if k not in ("Template", "Items", "Steps"))
    if unknown:
        raise invalid(f"Submit: the Submit map takes Template, Items and Steps, not {', '.join(unknown)}")
    from gridbus.submit import materialize

    try:
        count = materialize.check(submit.get("Template"), submit.get("Items"), submit.get("Steps", 1))
    except materialize.TemplateError as exc:
        raise invalid(f"Submit: {exc}") from None
    template = submit["Template"]
    for name in template:
        if name.lower() in SCHEDD_OWNED and name.lower() != "jobstatus":
            raise invalid(f"Submit: Template sets {name}, which the schedd assigns")
    return Late({k: list(v) for k, v in template.items()}, [[r, dict(m)] for r, m in submit["Items"]],
                submit.get("Steps", 1), count)


def unknown_cluster_id(cluster_id: int) -> MethodError:
    return app_error(
        E_UNKNOWN_CLUSTER_ID,
        f"Submit: cluster id {cluster_id} was not handed out by this schedd's NewCluster (or was "
        "forgotten when it restarted); ask NewCluster for a new one",
    )


def digest(ad: dict[str, Any], procs: list[dict[str, Any]], count: int, submit: dict[str, Any],
           cluster_id: int = 0) -> str:
    """A fingerprint of a submission, so a reused SubmissionId with other content is caught."""
    canon = [sorted((k.lower(), _plain(v)) for k, v in ad.items()),
             [sorted((k.lower(), _plain(v)) for k, v in p.items()) for p in procs], count,
             sorted((str(k), _plain(v)) for k, v in submit.items()), cluster_id]
    return hashlib.sha256(wire.encode(canon)).hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return f"<{type(value).__name__}>{value}"


def apply_transforms(transforms: Sequence[Transform], base: dict[str, Any], first_diff: dict[str, Any],
                     ad: dict[str, Any], diffs: list[dict[str, Any]], template: dict[str, Any] | None) -> None:
    """JOB_TRANSFORM_<Name>, in order, on the cluster's jobs as they would be queued (``base``, the
    cluster's job with ProcId 0 and its JobStatus, with each proc's own attributes), their changes
    made in the cluster ``ad`` and the procs' own attributes (``diffs``). Procs that agree on every
    attribute the transforms can read are transformed once (most clusters: once in all). Where
    all are transformed alike, what the transforms set or delete goes into the cluster ad and out
    of every proc's own attributes; otherwise into each proc's. A late-materialization cluster is
    transformed through its first job, and what changes is taken out of its ``template``, as
    HTCondor's transformed factory attributes override the factory's. Attributes the schedd
    assigns (ClusterId, Owner, JobStatus...) are not changed; a transform that fails refuses."""
    if template is not None or len(diffs) < 2:
        changed, deleted = _transformed(transforms, {**base, **first_diff})
        _into_cluster(changed, deleted, ad, [*diffs, *((template,) if template is not None else ())])
        return
    read = reads(transforms, {**base, **first_diff})
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for diff in diffs:
        key = tuple(sorted((k.lower(), type(v).__name__, str(v)) for k, v in diff.items()
                           if read is None or k.lower() in read))
        groups.setdefault(key, []).append(diff)
    if len(groups) == 1:
        changed, deleted = _transformed(transforms, {**base, **diffs[0]})
        _into_cluster(changed, deleted, ad, diffs)
        return
    for members in groups.values():
        changed, deleted = _transformed(transforms, {**base, **members[0]})
        for diff in members:
            for name, value in changed.items():
                _put(diff, name, value)
            for name in deleted:
                if canonical(ad, name) is None:
                    _drop(diff, name)
                else:  # the cluster ad's value is hidden for this proc by an undefined of its own
                    _put(diff, name, classad_module().ExprTree("undefined"))


def _transformed(transforms: Sequence[Transform], job: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What the transforms change in ``job``: (set, deleted), the schedd's own attributes left out."""
    try:
        changed, deleted = transform_changes(transforms, job)
    except TransformError as exc:
        raise app_error(E_JOB_TRANSFORM, f"Failed to apply a required job transform: {exc}") from None
    return ({k: v for k, v in changed.items() if k.lower() not in SCHEDD_OWNED},
            [k for k in deleted if k.lower() not in SCHEDD_OWNED])


def _into_cluster(changed: dict[str, Any], deleted: list[str], ad: dict[str, Any], own: list[dict[str, Any]]) -> None:
    for name, value in changed.items():
        _put(ad, name, value)
    for name in deleted:
        _drop(ad, name)
    lowered = {n.lower() for n in (*changed, *deleted)}
    for attrs in own:
        for key in [k for k in attrs if k.lower() in lowered]:
            del attrs[key]


def _put(ad: dict[str, Any], name: str, value: Any) -> None:
    _drop(ad, name)
    ad[name] = value


def _drop(ad: dict[str, Any], name: str) -> None:
    key = canonical(ad, name)
    if key is not None:
        del ad[key]


def check_requirements(
    requirements: Sequence[SubmitRequirement], job: dict[str, Any], schedd_ad: dict[str, Any]
) -> None:
    """Evaluate SUBMIT_REQUIREMENT_<Name> in order; the first that is not true refuses the submit."""
    if not requirements:
        return
    ca = classad_module()
    for req in requirements:
        try:
            ok = ca.compile(req.expr).test(job, schedd_ad)
        except Exception as exc:  # a broken configured expression refuses, with the reason
            raise app_error(
                E_SUBMIT_REQUIREMENT, f"submit requirement {req.name} ({req.expr}) could not be evaluated: {exc}"
            ) from None
        if ok:
            continue
        reason = ""
        if req.reason:
            try:
                value = ca.compile(req.reason).eval(job, schedd_ad)
                reason = value if isinstance(value, str) else ""
            except Exception:
                reason = ""
            if not reason:
                reason = req.reason.strip().strip('"')
        raise app_error(
            E_SUBMIT_REQUIREMENT,
            reason or f"Submit requirement {req.name} evaluated to non-true ({req.expr})",
        )


def reused_id(submission_id: str, cluster: int) -> MethodError:
    return app_error(
        E_SUBMISSION_ID_REUSED,
        f"SubmissionId {submission_id!r} was already used for cluster {cluster} with a different submission; "
        "choose a new id for a new submission",
    )
