"""The htcondor2-style schedd API over the broker: `Schedd.submit/query/act/edit/history`.

    from gridbus.console import Schedd, JobAction
    schedd = Schedd()                                   # the only (or first) schedd on the broker
    result = schedd.submit(Submit({...}), count=10)     # SubmitResult: cluster(), first_proc(), num_procs()
    for ad in schedd.query("JobStatus == 1", ["ClusterId", "ProcId"]):
        ...
    schedd.act(JobAction.Hold, f"{result.cluster()}")

Names and signatures mirror htcondor2, so a script moves from
HTCondor to gridbus by its import. Every Submit carries a fresh SubmissionId; a Submit whose answer
timed out is retried with the same id, so it never creates a cluster twice.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable
from enum import IntEnum, IntFlag
from typing import Any

from gridbus.classad import ClassAd, ExprTree
from gridbus.console.client import DaemonClient
from gridbus.console.enums import TransactionFlag
from gridbus.console.session import Session
from gridbus.errors import (
    HTCondorNotImplementedError,
    HTCondorPermissionError,
    HTCondorRuntimeError,
    HTCondorTypeError,
    HTCondorValueError,
)
from gridbus.jobstatus import JobStatus as JobStatus  # htcondor2.JobStatus, shared with the schedd
from gridbus.rpc import CallFailed, CallTimeout, MethodResult
from gridbus.status import Status

E_UNKNOWN_CLUSTER_ID = 3  # the schedd's Submit refusal of a cluster id it did not hand out

_JOB_ID = re.compile(r"\d+(\.\d+)?")


class JobAction(IntEnum):
    Hold = 1
    Release = 2
    Remove = 3
    RemoveX = 4
    Vacate = 5
    VacateFast = 6
    Suspend = 8
    Continue = 9


class QueryOpt(IntFlag):
    Default = 0
    AutoCluster = 1
    GroupBy = 2
    DefaultMyJobsOnly = 4
    SummaryOnly = 8
    IncludeClusterAd = 16
    IncludeJobsetAds = 32


QueryOpts = QueryOpt


# The schedd's method for each action it carries out.
_ACTION_METHODS = {JobAction.Hold: "Hold", JobAction.Release: "Release", JobAction.Remove: "Remove",
                   JobAction.RemoveX: "Remove", JobAction.Suspend: "Suspend", JobAction.Continue: "Continue",
                   JobAction.Vacate: "Vacate", JobAction.VacateFast: "VacateFast"}


class SubmitResult:
    """What htcondor2's Schedd.submit returns."""

    def __init__(self, cluster: int, first_proc: int, num_procs: int, cluster_ad: ClassAd | None = None,
                 job_id: str = "", schedd: Schedd | None = None):
        self._cluster = cluster
        self._first = first_proc
        self._num = num_procs
        self._ad = cluster_ad
        self._schedd = schedd  # asked for the cluster ad on the first clusterad()
        self.id = job_id  # "<schedd>#<cluster>.<first proc>", as the QMF Submit answers

    def cluster(self) -> int:
        return self._cluster

    def first_proc(self) -> int:
        return self._first

    def num_procs(self) -> int:
        return self._num

    def clusterad(self) -> ClassAd | None:
        """The ad the cluster's jobs share (htcondor2's): the attributes of the cluster's first
        job without those that differ per job, fetched from the schedd (or its history) once."""
        if self._ad is None and self._schedd is not None:
            self._ad = self._schedd.cluster_ad(self._cluster, self._first)
        return self._ad

    def __repr__(self) -> str:
        # htcondor2 shows the cluster ad too; it is fetched here once if there is a schedd to ask.
        try:
            ad = self.clusterad()
        except Exception:  # a repr must not fail
            ad = None
        shown = f", clusterad={ad}" if ad is not None else ""
        return f"SubmitResult(cluster={self._cluster}, first_proc={self._first}, num_procs={self._num}{shown})"

    __str__ = __repr__


def _raise_for(result: MethodResult, what: str) -> MethodResult:
    if result.status == Status.OK:
        return result
    if result.status == Status.FORBIDDEN:
        err: Exception = HTCondorPermissionError(result.text)
    elif result.status in (Status.INVALID_PARAMETER, Status.UNKNOWN_OBJECT):
        err = HTCondorValueError(result.text)
    else:
        err = CallFailed(result, what)
    err.result = result  # type: ignore[attr-defined]  # each of the three kinds carries the reply it came from
    raise err


class Schedd(DaemonClient):
    """A schedd on the broker, as htcondor2.Schedd sees one.

    ``location`` may be the schedd's address (``schedd@name``), its Scheduler ad (a ClassAd or
    dict with MyAddress, as from Collector.locate), or None for the only schedd answering
    getObjects(_class="scheduler").
    """

    def __init__(self, location: Any = None, *, url: str | None = None, session: Session | None = None,
                 timeout: float = 60.0, submit_retries: int = 2):
        super().__init__(session, url, timeout, connect=True)
        self.submit_retries = submit_retries
        self.address = self._locate(location)

    def _locate(self, location: Any) -> str:
        if isinstance(location, str) and location:
            return location if "@" in location and location.startswith("schedd@") else f"schedd@{location}"
        if location is not None:
            try:
                address = location["MyAddress"]
            except (KeyError, TypeError):
                raise HTCondorValueError("a schedd location ad must carry MyAddress (the schedd's agent address)") from None
            return str(address)
        try:
            return self.first_agent("scheduler")
        except LookupError as exc:
            raise HTCondorRuntimeError(f"Unable to locate a schedd: {exc}") from None

    def _call(self, method: str, args: dict[str, Any], *, obj: str | None = None,
              timeout: float | None = None) -> MethodResult:
        result = self.session.call(self.address, method, args, obj=obj, timeout=timeout or self.timeout)
        return _raise_for(result, method)

    # ------------------------------------------------------------------ submit
    def submit(self, description: Any, count: int = 0, spool: bool = False, itemdata: Iterable[Any] | None = None,
               queue: str | None = None, *, submission_id: str | None = None) -> SubmitResult:
        """Submit one cluster: a `gridbus.submit.Submit` (or a submit-description text / dict of
        commands), or a plain job ad (a dict or ClassAd with ``Cmd``) for ``count`` procs."""
        if queue is not None and (count or itemdata is not None):
            raise HTCondorValueError("queue= and count/itemdata are mutually exclusive")
        submission_id = submission_id or uuid.uuid4().hex
        for fresh_id in (True, False):
            args = self._submit_args(description, count, itemdata, queue)
            args["SubmissionId"] = submission_id
            if spool:
                # Held until spool() has sent the input (HTCondor's SpoolingInput), and kept in the
                # queue once completed until retrieve() has fetched the output.
                args["Ad"] = {**args["Ad"], "JobStatus": int(JobStatus.HELD), "HoldReasonCode": 16,
                              "HoldReason": "Spooling input data files", "LeaveJobInQueue": True,
                              "StageInStart": int(time.time())}
            try:
                result = self._submit_call(args)
                break
            except CallFailed as exc:
                # A cluster id forgotten by a schedd that restarted between NewCluster and Submit:
                # expand again with a new one (nothing was created under the old id).
                if not (fresh_id and "ClusterId" in args and exc.result.status == Status.USER + E_UNKNOWN_CLUSTER_ID):
                    raise
        return SubmitResult(result.ClusterId, result.FirstProc, result.NumProcs, None, result.Id, self)

    def _submit_call(self, args: dict[str, Any]) -> MethodResult:
        for attempt in range(self.submit_retries + 1):
            try:
                return self._call("Submit", args)
            except CallTimeout:
                # The Submit may have committed; the same SubmissionId makes the retry safe.
                if attempt == self.submit_retries:
                    raise
        raise AssertionError("unreachable")

    def spool(self, jobs: Any) -> None:
        """Send the input of jobs submitted with ``spool=True`` (a SubmitResult, or their ads) to
        the schedd's spool, then let them run."""
        from gridbus.console.spooling import SPOOL_ATTRS, spool_job

        if isinstance(jobs, SubmitResult):
            jobs = self.query(f"ClusterId == {jobs.cluster()}", SPOOL_ATTRS)
        for ad in jobs:
            spool_job(self._call, ad)

    def retrieve(self, job_spec: Any) -> None:
        """Fetch the output of completed spooled jobs (a constraint, a 'c.p' id or a list of
        them) into their submit directories; they then leave the queue."""
        from gridbus.console.spooling import SPOOL_ATTRS, retrieve_job

        if isinstance(job_spec, list | tuple):
            constraint = " || ".join(_id_constraint(str(j)) for j in job_spec) or "false"
        elif isinstance(job_spec, str) and re.fullmatch(r"\d+(\.\d+)?", job_spec.strip()):
            constraint = _id_constraint(job_spec.strip())
        else:
            constraint = _constraint_text(job_spec)
        for ad in self.query(f"({constraint}) && JobStatus == 4 && SUBMIT_Iwd =!= undefined", SPOOL_ATTRS):
            retrieve_job(self._call, ad)

    def new_cluster(self) -> int:
        """A new cluster id from the schedd (HTCondor's NewCluster); one never used is harmless."""
        return int(self._call("NewCluster", {}).ClusterId)

    def _submit_args(self, description: Any, count: int, itemdata: Iterable[Any] | None,
                     queue: str | None) -> dict[str, Any]:
        """The Submit call's arguments: finished job ads, as condor_submit sends them.

        A submit description is expanded here, in this process's working directory (Iwd, relative
        paths, `queue ... matching`), with the cluster id NewCluster gives for $(Cluster); the
        schedd never reads submit text."""
        if isinstance(description, (dict, ClassAd)) and _looks_like_job_ad(description):
            ad = dict(description.items()) if isinstance(description, ClassAd) else dict(description)
            return {"Ad": ad, "Count": count or 1}
        from gridbus.submit import Submit

        sub = description if isinstance(description, Submit) else Submit(description)
        if queue is not None:
            sub.setQArgs(queue)
        items = list(itemdata) if itemdata is not None else None
        cluster_id = self.new_cluster()
        built = sub.build(cluster_id=cluster_id, count=count, itemdata=items)
        cluster = {k: v for k, v in built.cluster_ad.items() if k not in ("ClusterId", "Owner")}
        procs = [{k: v for k, v in p.items() if k != "ProcId"} for p in built.proc_ads]
        args: dict[str, Any] = {"Ad": cluster, "ClusterId": cluster_id}
        if all(not p for p in procs):
            return {**args, "Count": len(procs)}
        if _late(cluster):
            late = sub.late(built, cluster_id, count=count, itemdata=items)
            if late is not None:
                return {**args, "Submit": late}
        return {**args, "Procs": procs}

    # ------------------------------------------------------------------ query and history
    # Attributes that belong to one job of a cluster, not to the cluster ad.
    _PROC_ATTRS = frozenset(a.lower() for a in (
        "ProcId", "JobStatus", "EnteredCurrentStatus", "LastJobStatus", "ServerTime", "GlobalJobId",
        "RemoteHost", "JobStartDate", "JobCurrentStartDate", "NumJobStarts", "CompletionDate",
        "ExitCode", "ExitBySignal", "HoldReason", "HoldReasonCode", "HoldReasonSubCode"))

    def cluster_ad(self, cluster: int, first_proc: int = 0) -> ClassAd | None:
        """The attributes a cluster's jobs share, from its first job in the queue or the history."""
        constraint = f"ClusterId == {int(cluster)} && ProcId == {int(first_proc)}"
        ads = self.query(constraint) or self.history(constraint, [], 1)
        if not ads:
            return None
        return ClassAd({k: ads[0][k] for k in ads[0].keys() if k.lower() not in self._PROC_ATTRS})

    def query(self, constraint: Any = "true", projection: list[str] | None = None,
              callback: Callable[[ClassAd], Any] | None = None, limit: int = -1,
              opts: QueryOpt | int = QueryOpt.Default) -> list[Any]:
        server_opts = int(opts) & (QueryOpt.AutoCluster | QueryOpt.SummaryOnly)
        args = {"Constraint": _constraint_text(constraint), "Projection": list(projection or []),
                "Limit": int(limit), "Opts": server_opts, "Compact": not server_opts}
        if int(opts) & QueryOpt.DefaultMyJobsOnly:
            args["Constraint"] = f"({args['Constraint']}) && Owner == {_quote(self.session.user)}"
        out = self._call("Query", args).outArgs
        if args["Compact"]:
            ads = _merge_compact(out.get("ClusterAds", []), out.get("Jobs", []))
        else:
            ads = [_classad(j) for j in out.get("Jobs", [])]
        if callback is not None:
            return [out for out in (callback(a) for a in ads) if out is not None]
        return ads

    def history(self, constraint: Any = None, projection: list[str] | None = None, match: int = -1,
                since: Any = None) -> list[ClassAd]:
        args = {"Constraint": _constraint_text(constraint), "Projection": list(projection or []),
                "Limit": int(match), "Since": "" if since is None else str(since)}
        return [ClassAd(j) for j in self._call("History", args).outArgs.get("Jobs", [])]

    def get_ad(self, job_id: str) -> ClassAd:
        """One job's full ad, from the queue or the history (MRG's GetJobAd)."""
        return ClassAd(self._call("GetAd", {"Id": str(job_id)}).JobAd)

    def fetch(self, job_id: str, file: str = "Out", start: int = 0, end: int = 0) -> str:
        """A byte range of a job's output or error file (MRG's FetchJobData)."""
        return self._call("Fetch", {"Id": str(job_id), "File": file, "Start": start, "End": end}).Data

    # ------------------------------------------------------------------ actions
    def act(self, action: JobAction | int, job_spec: Any, reason: str | tuple[str, int] | None = None) -> ClassAd:
        """Hold, Release, Remove, Suspend, Continue, Vacate or VacateFast jobs; answers htcondor2's
        totals ad (TotalSuccess, ...)."""
        action = JobAction(action)
        method = _ACTION_METHODS.get(action)
        if method is None:
            raise HTCondorNotImplementedError(f"JobAction.{action.name} is not supported by gridbus schedds "
                                              f"(supported: {', '.join(a.name for a in _ACTION_METHODS)})")
        text = reason[0] if isinstance(reason, tuple) else reason
        args = {**_spec_args(job_spec), "Reason": text or ""}
        return ClassAd(self._call(method, args).Totals)

    def edit(self, job_spec: Any, attr: str, value: Any, flags: TransactionFlag | int = TransactionFlag.Default) -> int:
        """Set ``attr`` of the jobs to ``value`` (ClassAd text or an ExprTree); returns jobs changed.
        ``flags`` are accepted as htcondor2's; every edit is journaled (see TransactionFlag)."""
        if isinstance(flags, bool) or not isinstance(flags, int):
            raise HTCondorTypeError("flags must be a TransactionFlag")
        if isinstance(value, ExprTree):
            wire_value: Any = value
        elif isinstance(value, str):
            wire_value = value
        else:
            raise HTCondorTypeError("value must be ClassAd text (str) or an ExprTree, as in htcondor2")
        totals = self._call("SetAttribute", {**_spec_args(job_spec), "Name": attr, "Value": wire_value}).Totals
        return int(totals.get("TotalSuccess", 0))


def _merge_compact(cluster_ads: list, jobs: list) -> list[ClassAd]:
    """Rebuild full ads from a compact Query answer (each cluster ad once, each job's own attributes).

    Each cluster ad becomes a ClassAd once; a job's ad is a copy of its cluster's storage with the
    job's own attributes laid over it (see _classad for why the storage is touched directly).
    """
    templates = {cid: _classad(ad) for cid, ad in cluster_ads}
    out = []
    for entry in jobs:
        ad = _copy(templates[entry[0]])
        store, names = getattr(ad, "_data", None), getattr(ad, "_names", None)
        for k, v in entry[1].items():
            if store is not None and names is not None and isinstance(v, _PLAIN):
                low = k.lower()
                names.setdefault(low, k)
                store[low] = v
            else:
                ad[k] = v
        if len(entry) > 2:
            for k in entry[2]:
                if k in ad:
                    del ad[k]
        out.append(ad)
    return out


_PLAIN = (int, float, str, bool, ExprTree)


def _classad(data: dict[str, Any]) -> ClassAd:
    """ClassAd(data) for values fresh off the wire, without re-checking each one.

    ClassAd(dict) normalises every value through __setitem__ (about 4 us an attribute): for a
    listing of 100,000 jobs that is most of the time. Values decoded by gridbus.wire are already
    ClassAd values, so they are stored directly; anything else (nested ads, lists, None) takes the
    normal path. Falls back to ClassAd(data) if ClassAd's storage ever changes shape.
    """
    ad = ClassAd()
    try:
        store, names = ad._data, ad._names
    except AttributeError:
        return ClassAd(data)
    for k, v in data.items():
        if isinstance(v, _PLAIN):
            low = k.lower()
            names.setdefault(low, k)
            store[low] = v
        else:
            ad[k] = v
    return ad


def _copy(template: ClassAd) -> ClassAd:
    ad = ClassAd()
    try:
        ad._data = dict(template._data)
        ad._names = dict(template._names)
    except AttributeError:
        return ClassAd(dict(template.items()))
    return ad


def _late(cluster_ad: dict[str, Any]) -> bool:
    """The schedd materializes this cluster's procs late (max_idle or max_materialize)."""
    return any(k.lower() in ("jobmaterializemaxidle", "jobmaterializelimit") and v for k, v in cluster_ad.items())


def _looks_like_job_ad(obj: Any) -> bool:
    keys = {str(k).lower() for k in obj.keys()}
    return "cmd" in keys or "requirements" in keys or "jobuniverse" in keys


def _constraint_text(constraint: Any) -> Any:
    if constraint is None:
        return "true"
    if isinstance(constraint, (bool,)):
        return "true" if constraint else "false"
    if isinstance(constraint, ExprTree):
        return constraint
    return str(constraint)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _spec_args(job_spec: Any) -> dict[str, Any]:
    """htcondor2's job_spec: 'c', 'c.p', a list of those, an int cluster, or a constraint."""
    if isinstance(job_spec, bool):
        raise HTCondorTypeError("job_spec must be a job id, a list of job ids, a cluster id or a constraint")
    if isinstance(job_spec, int):
        return {"Ids": [str(job_spec)]}
    if isinstance(job_spec, (list, tuple)):
        ids = [str(j) for j in job_spec]
        bad = [j for j in ids if not _JOB_ID.fullmatch(j)]
        if bad:
            raise HTCondorValueError(f"not job ids: {', '.join(bad)} (use 'cluster' or 'cluster.proc')")
        return {"Ids": ids}
    if isinstance(job_spec, ExprTree):
        return {"Constraint": job_spec}
    if isinstance(job_spec, str):
        text = job_spec.strip()
        if _JOB_ID.fullmatch(text):
            return {"Ids": [text]}
        return {"Constraint": text}
    raise HTCondorTypeError(f"job_spec must be a job id, a list of job ids, a cluster id or a constraint, not {type(job_spec).__name__}")


def _id_constraint(job: str) -> str:
    cluster, _, proc = job.partition(".")
    return f"(ClusterId == {int(cluster)} && ProcId == {int(proc)})" if proc else f"(ClusterId == {int(cluster)})"
