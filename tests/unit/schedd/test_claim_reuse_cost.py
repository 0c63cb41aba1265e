"""Claim reuse at an exit tests the owner's idle jobs by cluster, not one by one: with thousands
of idle jobs that do not fit the slot, an exit costs a match test or two, however many there are."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gridbus import classad
from gridbus.classad import ExprTree
from tests.unit.schedd.inproc import call, exit_report, make_schedd, run_on_claim, submit

IDLE, RUNNING = 1, 2


def test_an_exit_does_not_test_every_idle_job_of_the_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tests = []
    match = classad.symmetric_match
    monkeypatch.setattr(classad, "symmetric_match", lambda a, b: (tests.append(1), match(a, b))[1])

    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        submit(schedd, count=5000, Requirements=ExprTree("TARGET.Memory > 1000000"))  # never fits
        fits = submit(schedd, count=4)
        await run_on_claim(schedd, fits, 0)
        startd = call("JobReports", user="startd")
        for proc in range(3):  # each exit: the claim goes to the next job that fits
            tests.clear()
            report = {**exit_report(fits, proc), "ClaimEnded": False}
            await schedd.reports.JobReports(startd, Reports=[report])
            assert schedd.claims.by_job[(fits, proc + 1)].claim_id == "c1"
            assert len(tests) <= 2, f"{len(tests)} match tests for one exit"
            await schedd.reports.JobReports(startd, Reports=[{**report, "ProcId": proc + 1, "Event": "activated",
                                                      "Status": 0}])
            await asyncio.sleep(0)
        # A proc with attributes of its own is tested on its own.
        own = submit(schedd, count=2, Requirements=ExprTree("TARGET.Memory > 1000000"))
        schedd.queue.update(schedd.queue.proc(own, 1), {"Requirements": ExprTree("TARGET.Memory > 0")})
        report = {**exit_report(fits, 3), "ClaimEnded": False}
        for p in list(schedd.queue.clusters[fits].procs.values()):
            if p.status == IDLE:
                schedd.queue.set_status(p, 5)
        await schedd.reports.JobReports(startd, Reports=[report])
        assert schedd.claims.by_job[(own, 1)].claim_id == "c1"
        await schedd.commits.close()

    asyncio.run(main())


def test_an_exit_skips_the_procs_already_taken_at_once(tmp_path: Path):
    """With thousands of a cluster's idle procs reserved (matched, or queued ahead on claims), the
    claim's next job is found without looking at each of them."""
    from gridbus.agents.schedd.taken import TakenSet

    looked: list[tuple[int, int]] = []

    class Watched(TakenSet):
        def __contains__(self, job: object) -> bool:
            looked.append(job)  # type: ignore[arg-type]
            return super().__contains__(job)

    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        fits = submit(schedd, count=4)
        await run_on_claim(schedd, fits, 0)
        many = submit(schedd, count=3000)
        watched = Watched(schedd.claims.taken)
        watched.update(schedd.claims.reserved)
        schedd.claims.reserved = watched  # (the index is shared: it holds the claims' jobs already)
        for p in range(1, 4):
            schedd.queue.set_status(schedd.queue.proc(fits, p), 5)  # the first cluster has no idle job left
        for p in range(2990):
            schedd.claims.reserved.add((many, p))
        looked.clear()
        report = {**exit_report(fits, 0), "ClaimEnded": False}
        await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[report])
        assert schedd.claims.by_job[(many, 2990)].claim_id == "c1"
        assert len([j for j in looked if j[0] == many]) <= 3, f"{len(looked)} reserved procs looked at"
        await schedd.commits.close()

    asyncio.run(main())
