"""The shadows' side of activations in JobReports answers, without a broker: the next job rides
in the answer to the exit report, a repeated exit report (the startd missed that answer) gets it
again and is recorded once, and an activation nobody confirms goes by ActivateClaims."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gridbus.agents.schedd.claims import ACTIVATING, RUNNING_JOB, Claim, Claims
from gridbus.agents.schedd.leases import Leases
from gridbus.agents.schedd.negotiation import Negotiation
from gridbus.agents.schedd.reports import Reports
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import Shadows as ShadowParts
from gridbus.autocluster import AutoClusters
from gridbus.rpc import MethodResult

IDLE, RUNNING, COMPLETED = 1, 2, 4


class FakeQueue:
    """The job queue's reading side over a dict of job ads (every job its own: no cluster-wide
    match answers)."""

    def __init__(self, jobs: dict[tuple[int, int], dict]) -> None:
        self.jobs = jobs
        self.store = SimpleNamespace(db=sqlite3.connect(":memory:"))

    def get(self, cluster: int, proc: int) -> dict | None:
        return self.jobs.get((cluster, proc))

    def status(self, cluster: int, proc: int) -> int | None:
        ad = self.jobs.get((cluster, proc))
        return ad["JobStatus"] if ad else None

    def idle_jobs(self, owner: str) -> list[dict]:
        return [a for a in self.jobs.values() if a["JobStatus"] == IDLE and a["Owner"] == owner]

    def idle_procs(self, owner: str) -> list[SimpleNamespace]:
        """The idle jobs as proc records, each with an attribute of its own (so each is grouped
        from its full ad)."""
        return [self._proc(key) for key, a in self.jobs.items() if a["JobStatus"] == IDLE and a["Owner"] == owner]

    def proc(self, cluster: int, proc: int) -> SimpleNamespace | None:
        return self._proc((cluster, proc)) if (cluster, proc) in self.jobs else None

    def _proc(self, key: tuple[int, int]) -> SimpleNamespace:
        return SimpleNamespace(key=key, id=key[1], cluster=SimpleNamespace(id=key[0], match_macros=False), attrs={"Own": True},
                               status=self.jobs[key]["JobStatus"])

    def idle_clusters(self, owner: str) -> list[SimpleNamespace]:
        by_cluster: dict[int, set[int]] = {}
        for ad in self.idle_jobs(owner):
            by_cluster.setdefault(ad["ClusterId"], set()).add(ad["ProcId"])
        return [SimpleNamespace(id=c, idle=ids, idle_own=ids, version=1, reads_proc_id=True,
                                procs={p: SimpleNamespace(key=(c, p), attrs={}) for p in ids})
                for c, ids in sorted(by_cluster.items())]

    def ad(self, p: SimpleNamespace) -> dict:
        return self.jobs[p.key]

    def untaken(self, job: tuple[int, int]) -> None:
        """(Its clusters are made at each look: no ordered heads to keep.)"""

    def add_writes(self, writes: list) -> None:
        for sql, rows in writes:
            self.store.db.executemany(sql, rows)

    @property
    def counts(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for ad in self.jobs.values():
            out.setdefault(ad["Owner"], [0] * 8)[ad["JobStatus"]] += 1
        return out


class FakeCommits:
    """The schedd's commits, at once: the changed claim rows go to the table."""

    def __init__(self, queue: FakeQueue) -> None:
        self.queue = queue
        self.before: list = []

    def soon(self) -> None:
        for hook in self.before:
            hook()

    async def now(self) -> None:
        self.soon()


class Shadows:
    """The schedd's shadow parts (claims, shadows, negotiation, reports, leases) over a dict of
    job ads standing for the job queue and the job state, and a recording startd."""

    def __init__(self) -> None:
        self.settings = ScheddSettings(spool=Path("/nonexistent"), claim_worklife=1e9, lease_duration=600.0,
                                       shadow_call_timeout=0.05)
        self.jobs = {(1, p): {"ClusterId": 1, "ProcId": p, "Owner": "alice", "JobStatus": IDLE, "Requirements": True}
                     for p in range(4)}
        self.queue = FakeQueue(self.jobs)
        self.calls: list[tuple[str, str, dict]] = []
        self.exits: list[tuple[int, int]] = []
        commits = FakeCommits(self.queue)
        self.claims = Claims(self.queue, commits, self._call, self.spawn, self.settings)  # type: ignore[arg-type]
        self.shadows = ShadowParts(self.queue, self.claims, self, self.spawn, self.settings)  # type: ignore[arg-type]
        self.negotiation = Negotiation("schedd@t", self.queue, self.claims, self.shadows,  # type: ignore[arg-type]
                                       AutoClusters(), self.spawn, self.settings)
        self.reports = Reports(self.claims, self.shadows, self, commits)  # type: ignore[arg-type]
        self.leases = Leases("schedd@t", self.queue, self.claims, self, self.spawn, self.settings)  # type: ignore[arg-type]
        self.JobReports = self.reports.JobReports
        self.GetResourceRequests = self.negotiation.GetResourceRequests
        self.Match = self.negotiation.Match
        self.check_leases = self.leases.check_leases
        self._claims = self.claims.by_id
        self._by_job = self.claims.by_job
        self._reserved = self.claims.reserved
        self.shadow_stats = self.claims.stats

    async def _call(self, address: str, method: str, args: dict, timeout: float) -> MethodResult:
        self.calls.append((address, method, args))
        if method == "ActivateClaims":
            return MethodResult(0, "OK", {"Results": [{"ClaimId": a["ClaimId"], "Status": 0, "Text": "OK"}
                                                      for a in args["Activations"]]})
        return MethodResult(0, "OK", {})

    def spawn(self, coro: Any, name: str = "") -> asyncio.Task:
        return asyncio.get_running_loop().create_task(coro)

    async def job_started(self, cluster: int, proc: int, **kw: Any) -> None:
        self.jobs[(cluster, proc)]["JobStatus"] = RUNNING

    async def job_exited(self, cluster: int, proc: int, report: dict) -> None:
        self.jobs[(cluster, proc)]["JobStatus"] = COMPLETED
        self.exits.append((cluster, proc))

    async def job_update(self, cluster: int, proc: int, attrs: dict) -> None:
        pass

    async def job_evicted(self, cluster: int, proc: int, reason: str) -> None:
        self.jobs[(cluster, proc)]["JobStatus"] = IDLE

    async def job_report_failed(self, cluster: int, proc: int, reason: str) -> None:
        self.jobs[(cluster, proc)]["JobStatus"] = 5


def report(event: str, proc: int, **extra: Any) -> dict:
    return {"ClaimId": "c1", "ClusterId": 1, "ProcId": proc, "Event": event, "Time": time.time(), **extra}


async def until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def running_claim(s: Shadows) -> tuple[Claim, SimpleNamespace]:
    """Claim c1 of a startd that takes activations in answers, running job 1.0; the startd's call."""
    claim = Claim("c1", "startd@a", "slot1@a", "alice", {"Requirements": True}, time.time() + 1e9,
                  state=RUNNING_JOB, job=(1, 0), in_reports=True)
    s._claims["c1"], s._by_job[(1, 0)] = claim, claim
    s.jobs[(1, 0)]["JobStatus"] = RUNNING
    return claim, SimpleNamespace(user="startd")


def test_next_job_in_the_answer_repeat_and_lost_answer_fallback():
    async def main() -> Shadows:
        s = Shadows()
        claim, call = running_claim(s)

        out = await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        assert [(a["ClaimId"], a["JobAd"]["ProcId"]) for a in out["Activations"]] == [("c1", 1)]
        assert (claim.state, claim.job, s.exits) == (ACTIVATING, (1, 1), [(1, 0)])

        # The startd retries the batch (it never got that answer): the activation goes again, the
        # exit is not recorded twice.
        out = await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        assert [a["JobAd"]["ProcId"] for a in out.get("Activations", [])] == [1]
        assert s.exits == [(1, 0)]

        # An exit that beats its activated report waits for it; then both apply, and the next job goes.
        out = await s.JobReports(call, Reports=[report("exit", 1, ExitCode=0), report("activated", 1, Status=0, Text="OK")])
        assert s.exits == [(1, 0), (1, 1)] and s.jobs[(1, 1)]["JobStatus"] == COMPLETED
        assert [a["JobAd"]["ProcId"] for a in out["Activations"]] == [2]
        assert not [c for c in s.calls if c[1] == "ActivateClaims"]

        # No activated report within SHADOW_CALL_TIMEOUT: the activation goes by ActivateClaims.
        await until(lambda: s.jobs[(1, 2)]["JobStatus"] == RUNNING)
        sent = [c for c in s.calls if c[1] == "ActivateClaims"]
        assert [(c[0], [a["JobAd"]["ProcId"] for a in c[2]["Activations"]]) for c in sent] == [("startd@a", [2])]
        assert claim.state == RUNNING_JOB

        # A late activated report of that job changes nothing.
        await s.JobReports(call, Reports=[report("activated", 2, Status=0, Text="OK")])
        assert claim.state == RUNNING_JOB and s.jobs[(1, 2)]["JobStatus"] == RUNNING
        return s

    asyncio.run(main())


def test_a_refused_activation_in_the_answer_releases_the_claim_and_the_job_stays_idle():
    async def main() -> None:
        s = Shadows()
        claim, call = running_claim(s)
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        await s.JobReports(call, Reports=[report("activated", 1, Status=0x10001, Text="the slot will not take it")])
        assert "c1" not in s._claims and s.jobs[(1, 1)]["JobStatus"] == IDLE and (1, 1) not in s._reserved
        await until(lambda: any(c[1] == "ReleaseClaim" for c in s.calls))

    asyncio.run(main())


def test_an_owner_whose_job_is_being_started_counts_as_needing_its_shadow():
    # Between an activation riding in an answer and its "activated" report, the startd may have
    # fetched the job's input through the owner's shadow already while the job is not Running
    # yet: the schedd's shadow check must not stop that shadow then.
    async def main() -> None:
        s = Shadows()
        claim, call = running_claim(s)
        assert s.claims.owners_starting() == set()  # running: kept for its running job
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        assert claim.state == ACTIVATING and s.jobs[(1, 1)]["JobStatus"] == IDLE
        assert s.claims.owners_starting() == {"alice"}
        await s.JobReports(call, Reports=[report("activated", 1, Status=0, Text="OK")])
        assert s.jobs[(1, 1)]["JobStatus"] == RUNNING and s.claims.owners_starting() == set()

    asyncio.run(main())


def test_claims_read_back_at_a_restart_are_renewed_at_once_not_a_round_later():
    """Their startds heard nothing while the schedd was down: the first Alive goes at the start,
    not lease/3 later (a lease renewed only then may run out on the startd, its job killed)."""
    async def main() -> None:
        s = Shadows()  # lease 600 s: a round is 200 s away
        running_claim(s)
        task = asyncio.get_running_loop().create_task(s.leases.run())
        try:
            await until(lambda: any(c[1] == "Alive" for c in s.calls), timeout=2.0)
        finally:
            task.cancel()
        assert [c[2] for c in s.calls if c[1] == "Alive"] == [{"ClaimIds": ["c1"]}]

    asyncio.run(main())
