"""A simulated pool for the negotiator: Machine and Submitter ads, and schedds that answer
GetResourceRequests and Match in process (no broker, no processes).

Used by the unit tests and by bench/bench_negotiation.py to drive `Negotiator.cycle.run`
exactly as a cycle does, with the broker round trips replaced by direct calls.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gridbus import classad
from gridbus.autocluster import AutoClusters, JobRun
from gridbus.rpc import MethodResult

ARCHES = ("X86_64", "aarch64")
SYSTEMS = ("LINUX", "LINUX", "LINUX", "WINDOWS")


def machine_ads(n: int, kinds: int = 10, seed: int = 1, partitionable: int = 0) -> list[dict[str, Any]]:
    """``n`` unclaimed static slots of ``kinds`` hardware kinds (each with a ClaimId, as a private
    query returns them), plus ``partitionable`` partitionable slots of 8 cpus."""
    rng = random.Random(seed)
    kinds_ = [
        {"Arch": ARCHES[k % 2], "OpSys": SYSTEMS[k % 4], "Memory": 1024 * (1 + k % 8), "Disk": 10_000_000 * (1 + k % 3),
         "HasDocker": k % 3 == 0, "KFlops": 1_000_000 + 50_000 * k}
        for k in range(kinds)
    ]
    out = []
    for i in range(n):
        kind = kinds_[rng.randrange(kinds)]
        host = f"node{i // 4}.sim"
        out.append({
            "MyType": "Machine", "Name": f"slot{i % 4 + 1}@{host}", "Machine": host, "MyAddress": f"startd@{host}",
            "SlotType": "Static", "PartitionableSlot": False, "Cpus": 1, **kind, "State": "Unclaimed", "Activity": "Idle",
            "Start": True, "Requirements": classad.ExprTree("START"), "Rank": 0.0,
            "UpdateSequenceNumber": 1, "ClaimId": f"claim-{i}-{rng.getrandbits(64):016x}",
        })
    for j in range(partitionable):
        host = f"big{j}.sim"
        out.append({
            "MyType": "Machine", "Name": f"slot1@{host}", "Machine": host, "MyAddress": f"startd@{host}",
            "SlotType": "Partitionable", "PartitionableSlot": True, "Cpus": 8, "Memory": 32768, "Disk": 100_000_000,
            "Arch": "X86_64", "OpSys": "LINUX", "State": "Unclaimed", "Activity": "Idle", "Start": True,
            "Requirements": classad.ExprTree("START && TARGET.RequestCpus <= MY.Cpus && TARGET.RequestMemory <= MY.Memory"),
            "UpdateSequenceNumber": 1, "ClaimId": f"pclaim-{j}",
        })
    return out


def job_ads(owner: str, autoclusters: int, jobs_per_cluster: int, first_cluster: int = 1) -> list[dict[str, Any]]:
    """Idle jobs of ``owner`` in ``autoclusters`` distinct autoclusters (distinct memory needs);
    the procs of a cluster share its expressions, as a schedd's share their cluster ad's."""
    jobs = []
    for a in range(autoclusters):
        requirements = classad.ExprTree(
            'TARGET.Arch == "X86_64" && TARGET.OpSys == "LINUX" && TARGET.Memory >= MY.RequestMemory'
            " && TARGET.Disk >= MY.RequestDisk"
        )
        rank = classad.ExprTree("TARGET.KFlops")
        for p in range(jobs_per_cluster):
            jobs.append({
                "ClusterId": first_cluster + a, "ProcId": p, "Owner": owner, "JobStatus": 1, "JobPrio": 0,
                "QDate": 1_700_000_000 + a, "RequestCpus": 1, "RequestMemory": 128 + a, "RequestDisk": 1024,
                "Requirements": requirements, "Rank": rank,
            })
    return jobs


# A Requirements that reaches each slot's Name (so every slot is a kind of its own) and whose
# regular expression backtracks on the a's of MY.Pad: with 60 of them every evaluation goes past
# the match budget; with about 20 each takes milliseconds but stays within it.
HOSTILE_REQUIREMENTS = 'regexp("(a|aa)+$", strcat(MY.Pad, TARGET.Name)) && TARGET.Memory >= MY.RequestMemory'


def hostile_job_ads(owner: str, autoclusters: int, jobs_per_cluster: int, pad: int = 60,
                    first_cluster: int = 1) -> list[dict[str, Any]]:
    """Idle jobs like :func:`job_ads` whose Requirements are :data:`HOSTILE_REQUIREMENTS`."""
    jobs = job_ads(owner, autoclusters, jobs_per_cluster, first_cluster)
    for j in jobs:
        j["Requirements"] = classad.ExprTree(HOSTILE_REQUIREMENTS)
        j["Pad"] = "a" * pad
    return jobs


@dataclass
class SimSchedd:
    """A schedd as the negotiator sees it: jobs per owner, autoclusters, accepted matches."""

    name: str
    jobs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    matched: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.autoclusters = AutoClusters()
        self._taken: set[tuple[int, int]] = set()
        self._groups: dict[str, Any] = {}
        self._members: dict[int, deque[tuple[int, int]]] = {}  # autocluster -> job ids a Match takes from

    def _runs(self, owner: str) -> Iterator[JobRun]:
        """The owner's idle jobs as runs of consecutive jobs alike but for ProcId (a schedd's
        procs with no attribute of their own), as the schedd hands them to its autoclusters."""
        run: list[dict[str, Any]] = []
        shape: dict[str, Any] | None = None
        for j in self.jobs.get(owner, []):
            if self._key(j) in self._taken:
                continue
            rest = dict(j)
            del rest["ProcId"]
            if run and rest != shape:
                yield self._run(run)
                run = []
            if not run:
                shape = rest
            run.append(j)
        if run:
            yield self._run(run)

    def _run(self, jobs: list[dict[str, Any]]) -> JobRun:
        return JobRun(jobs[0], [self._key(j) for j in jobs], lambda: iter(jobs), frozenset({"procid"}))

    @property
    def address(self) -> str:
        return f"schedd@{self.name}"

    def submitter_ads(self) -> list[dict[str, Any]]:
        return [
            {"MyType": "Submitter", "Name": f"{owner}@{self.name}", "Owner": owner, "ScheddName": self.name,
             "MyAddress": self.address, "IdleJobs": sum(1 for j in jobs if self._key(j) not in self._taken),
             "RunningJobs": 0, "HeldJobs": 0}
            for owner, jobs in self.jobs.items()
        ]

    @staticmethod
    def _key(job: dict[str, Any]) -> tuple[int, int]:
        return (job["ClusterId"], job["ProcId"])

    def answer(self, method: str, args: dict[str, Any]) -> MethodResult:
        self.calls[method] = self.calls.get(method, 0) + 1
        if method == "GetResourceRequests":
            owner = args["Owner"]
            if args.get("After", -1) < 0 or owner not in self._groups:
                self.autoclusters.set_pool_attrs(None if args.get("WholeAds") else args.get("AutoClusterAttrs", []))
                self._groups[owner] = self.autoclusters.group(self._runs(owner), owner=owner)
                for acid, _ad, ids in self._groups[owner]:
                    self._members[acid] = deque(ids)
            return MethodResult(0, "OK", {"Requests": self.autoclusters.page(self._groups[owner], args["Limit"], args.get("After", -1))})
        if method == "Match":
            accepted = 0
            for m in args["Matches"]:
                ids = self._members.get(m["AutoClusterId"])
                while ids:
                    job = ids.popleft()
                    if job not in self._taken:
                        self._taken.add(job)
                        self.matched.append({**m, "Job": job})
                        accepted += 1
                        break
            return MethodResult(0, "OK", {"Accepted": accepted})
        return MethodResult(2, f"the simulated schedd has no method {method}")


class SimClient:
    """Stands in for the negotiator's AsyncClient: routes calls to simulated schedds, and other
    calls to ``fallback`` (an agent's real client) when there is one."""

    def __init__(self, schedds: list[SimSchedd], fallback: Any = None):
        self.schedds = {s.address: s for s in schedds}
        self.fallback = fallback

    def __getattr__(self, name: str) -> Any:
        if self.fallback is None:
            raise AttributeError(name)
        return getattr(self.fallback, name)

    async def call(self, address: str, method: str, args: dict[str, Any] | None = None, *, obj: str | None = None,
                   timeout: float = 30.0) -> MethodResult:
        schedd = self.schedds.get(address)
        if schedd is None:
            if self.fallback is not None:
                return await self.fallback.call(address, method, args, obj=obj, timeout=timeout)
            return MethodResult(1, f"no simulated agent {address}")
        return schedd.answer(method, args or {})
