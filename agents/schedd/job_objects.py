"""One job by its id: GetAd and Fetch (its output, error and user log files), on the scheduler and
on job objects, and the job objects themselves (getObjects(_class="job"), made on demand)."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd.jobattrs import parse_job_id
from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowRefused
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.users import Users
from gridbus.status import MethodError, Status, forbidden, invalid, unknown_object

log = logging.getLogger("gridbus.schedd.objects")

FETCH_MAX = 1 << 20  # bytes one Fetch answers at most
FETCH_FILES = {"out": "Out", "stdout": "Out", "err": "Err", "stderr": "Err", "userlog": "UserLog", "log": "UserLog"}


class JobObjects:
    def __init__(self, name: str, address: str, queue: JobQueue, owner_shadows: OwnerShadows, users: Users,
                 settings: ScheddSettings):
        self.name = name
        self.address = address
        self.queue = queue
        self.owner_shadows = owner_shadows
        self.users = users
        self.settings = settings

    @method("scheduler")
    async def GetAd(self, call: Call, Id: str) -> dict:
        return {"JobAd": self.job_ad(Id)}

    @method("scheduler")
    async def Fetch(self, call: Call, Id: str, File: str, Start: int, End: int) -> dict:
        return {"Data": await self._fetch(call, Id, File, Start, End)}

    @method("job", "GetAd")
    async def JobGetAd(self, call: Call) -> dict:
        return {"JobAd": self.job_ad(call.object)}

    @method("job", "Fetch")
    async def JobFetch(self, call: Call, File: str, Start: int, End: int) -> dict:
        return {"Data": await self._fetch(call, call.object, File, Start, End)}

    def job_ad(self, job: str) -> dict[str, Any]:
        try:
            cid, pid = parse_job_id(job)
        except ValueError as exc:
            raise invalid(str(exc)) from None
        if pid is None:
            raise invalid(f"{job!r} names a cluster; GetAd needs one job ('cluster.proc')")
        ad = self.queue.get(cid, pid) or self.queue.finished_ad(cid, pid)
        if ad is None:
            raise unknown_object(f"{self.address} has no job {cid}.{pid} (not in the queue nor in the history)")
        return ad

    async def _fetch(self, call: Call, job: str, which: str, start: int, end: int) -> str:
        user = call.require_user()
        ad = self.job_ad(job)
        if user != ad.get("Owner") and not self.users.is_super(user):
            raise forbidden(f"{user} may not read the files of job {ad['ClusterId']}.{ad['ProcId']} "
                            f"(owner {ad.get('Owner')}): only its owner or a queue super user may")
        attr = FETCH_FILES.get(which.lower())
        if attr is None:
            raise invalid(f"Fetch: File must be Out, Err or UserLog, not {which!r}")
        path = ad.get(attr)
        if not isinstance(path, str) or not path or path == "/dev/null":
            raise invalid(f"Fetch: job {ad['ClusterId']}.{ad['ProcId']} has no {attr} file")
        if not os.path.isabs(path):
            path = os.path.join(str(ad.get("Iwd", "/")), path)
        if end < start and not (start < 0 and end <= 0):
            raise invalid(f"Fetch: invalid start and end values ({start}, {end}): End must not be before Start")
        # Read by the owner's shadow, as the owner: never a file the owner could not read.
        try:
            return await self.owner_shadows.read(str(ad.get("Owner") or ""), path, start, end, FETCH_MAX)
        except ShadowRefused as exc:
            if exc.errno == errno.ENOENT:
                raise MethodError(Status.USER + 10, f"Fetch: {path} does not exist (yet)") from None
            raise forbidden(f"Fetch: {exc.sentence}") from None

    # ------------------------------------------------------------------ job objects (getObjects)
    def object_owner(self, class_name: str, name: str) -> str | None:
        """A job object's Owner, for the framework's ``owner`` access rule."""
        if class_name != "job":
            return None
        try:
            return str(self.job_ad(name).get("Owner") or "") or "?"
        except MethodError:
            return "?"  # gone since it was resolved: nobody owns it, a super user may still ask

    def resolve_object(self, name: str) -> str | None:
        if name == self.address:
            return "scheduler"
        try:
            cid, pid = parse_job_id(name)
        except ValueError:
            return None
        if pid is None:
            return None
        if self.queue.proc(cid, pid) is not None:
            return "job"
        if self.queue.finished_ad(cid, pid) is not None:
            return "job"
        return None

    def find_jobs(self, filters: dict[str, Any], methods: dict[str, list[str]]) -> list[dict]:
        """getObjects(_class="job"): the records of the jobs whose properties equal ``filters``."""
        out = []
        for p in self._filtered_procs(filters):
            ad = self.queue.ad(p)
            props = {**ad, "CustomId": f"{self.name}#{p.cluster.id}.{p.id}"}
            if any(props.get(k) != v for k, v in filters.items()):
                continue
            out.append({"class": "job", "name": ad["GlobalJobId"], "agent": self.address, "properties": props,
                        "statistics": {}, "methods": methods})
            if len(out) >= self.settings.max_job_objects:
                log.warning("getObjects(job) answered the first %d jobs only (SCHEDD_MAX_JOB_OBJECTS)", len(out))
                break
        return out

    def _filtered_procs(self, filters: dict[str, Any]) -> Iterable[Proc]:
        """Jobs that may match ``filters``, using the ids and owner index where the filter names them."""
        gid = filters.get("GlobalJobId") or filters.get("CustomId")
        if isinstance(gid, str):
            try:
                cid, pid = parse_job_id(gid)
            except ValueError:
                return []
            p = self.queue.proc(cid, pid) if pid is not None else None
            return [p] if p else []
        wanted = filters.get("ClusterId")
        if isinstance(wanted, int):
            c = self.queue.clusters.get(wanted)
            return [c.procs[k] for k in sorted(c.procs)] if c else []
        owner = filters.get("Owner")
        return self.queue.procs(owner if isinstance(owner, str) else None)
