"""The shadows' side of activations in JobReports answers, without a broker: the next job rides
in the answer to the exit report, a repeated exit report (the startd missed that answer) gets it
again and is recorded once, and an activation nobody confirms goes by ActivateClaims."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from types import SimpleNamespace
from typing import Any

from gridbus.agents.schedd.shadows import ACTIVATING, RUNNING_JOB, Claim, ShadowMixin
from gridbus.rpc import MethodResult

IDLE, RUNNING, COMPLETED = 1, 2, 4


class Shadows(ShadowMixin):
    """The mixin over a dict of job ads and a recording client."""

    def __init__(self) -> None:
        self.claim_worklife = 1e9
        self.lease_duration = 600.0
        self.shadow_call_timeout = 0.05
        self.address = "schedd@t"
        self.log = logging.getLogger("test.shadows")
        self.jobs = {(1, p): {"ClusterId": 1, "ProcId": p, "Owner": "alice", "JobStatus": IDLE, "Requirements": True}
                     for p in range(4)}
        db = sqlite3.connect(":memory:")
        self.queue = SimpleNamespace(
            get=lambda c, p: self.jobs.get((c, p)),
            idle_jobs=lambda owner: [a for a in self.jobs.values() if a["JobStatus"] == IDLE and a["Owner"] == owner],
            store=SimpleNamespace(db=db),
        )
        self.calls: list[tuple[str, str, dict]] = []
        self.client = SimpleNamespace(call=self._call)
        self.exits: list[tuple[int, int]] = []
        self._shadow_init()
        self._load_claims()

    async def _call(self, address: str, method: str, args: dict, timeout: float) -> MethodResult:
        self.calls.append((address, method, args))
        if method == "ActivateClaims":
            return MethodResult(0, "OK", {"Results": [{"ClaimId": a["ClaimId"], "Status": 0, "Text": "OK"}
                                                      for a in args["Activations"]]})
        return MethodResult(0, "OK", {})

    def commit_soon(self) -> None:
        # The schedd's write-behind commit, at once: the changed claim rows go to the table.
        for sql, rows in self.take_claim_writes():
            self.queue.store.db.executemany(sql, rows)

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
