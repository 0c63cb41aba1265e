"""Jobs a schedd queues ahead on a claim (CLAIM_PREFETCH_JOBS), on the startd without a broker:
the next starts the moment the claim's job exits and its activated report follows the exit report
in the same call; an entry sent twice is taken once; one that reaches an idle claim starts at
once; a withdrawn one never runs; a claim that ends or is refused runs none of its queue."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.unit.startd.test_claims_without_broker import (
    DAEMON,
    SCHEDD,
    Schedd,
    claim_all,
    job,
    settled,
    startd,
)


class Batches(Schedd):
    """The JobReports calls, each batch kept whole (the order within a call matters here)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[dict[str, Any]]] = []

    async def call(self, schedd: str, batch: list[dict[str, Any]], timeout: float):
        self.batches.append([dict(r) for r in batch])
        return await super().call(schedd, batch, timeout)


def ahead(claim_id: str, seq: int, proc: int, runtime: str = "30") -> dict[str, Any]:
    return {"ClaimId": claim_id, "Seq": seq, "JobAd": job(proc, Arguments=runtime)}


def events(schedd: Schedd) -> list[tuple[str, int, bool]]:
    return [(r["Event"], r["ProcId"], r.get("Ahead") is True) for r in schedd.reports if r["Event"] in ("exit", "activated")]


def test_the_next_job_starts_at_the_exit_and_is_reported_behind_it(tmp_path):
    schedd = Batches()
    s = startd(tmp_path, schedd)

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = (await claim_all(s))[0]
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": cid, "JobAd": job(0, Arguments="0.05")}])
            # Proc 1 twice (a resent entry: its Seq was taken already), then proc 2.
            s.activation.in_answer(SCHEDD, [], [ahead(cid, 1, 1, "0.05"), ahead(cid, 1, 1, "0.05"), ahead(cid, 2, 2)])
            assert [seq for seq, _ in s.claims.by_id[cid].ahead] == [1, 2]
            await settled(lambda: ("activated", 2, True) in events(schedd))
            assert s.activation.counters["JobsStarted"] == 3
            assert s.claims.by_id[cid].ahead == [] and s.claims.by_id[cid].ahead_seq == 2
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    assert [e for e in events(schedd) if e[0] != "exit" or e[1] < 2] == [
        ("exit", 0, False), ("activated", 1, True), ("exit", 1, False), ("activated", 2, True)]
    # Each start went in the same call as the exit it follows, right behind it.
    for batch in schedd.batches:
        for i, r in enumerate(batch):
            if r["Event"] == "activated" and r.get("Ahead"):
                assert i > 0 and batch[i - 1]["Event"] == "exit" and batch[i - 1]["ProcId"] == r["ProcId"] - 1
    # The reports say how far the claim's queue was taken, as of the call they left in.
    assert all(r.get("AheadSeq") == 2 for b in schedd.batches for r in b)


def test_a_job_queued_ahead_on_an_idle_claim_starts_at_once(tmp_path):
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = (await claim_all(s))[0]
            s.activation.in_answer(SCHEDD, [], [ahead(cid, 1, 4), ahead(cid, 2, 5)])
            await settled(lambda: ("activated", 4, True) in events(schedd))
            assert [a["ProcId"] for _, a in s.claims.by_id[cid].ahead] == [5]
        finally:
            await s.on_stop()

    asyncio.run(scenario())


def test_a_withdrawn_job_never_runs_and_the_next_one_does(tmp_path):
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> list[bool]:
        await s.on_start()
        try:
            cid = (await claim_all(s))[0]
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": cid, "JobAd": job(0)}])
            s.activation.in_answer(SCHEDD, [], [ahead(cid, 1, 1), ahead(cid, 2, 2)])
            first = await s.activation.WithdrawActivation(DAEMON, ClaimId=cid, ClusterId=7, ProcId=1)
            again = await s.activation.WithdrawActivation(DAEMON, ClaimId=cid, ClusterId=7, ProcId=1)
            await s.activation.DeactivateClaim(DAEMON, ClaimId=cid, Graceful=False)
            await settled(lambda: ("activated", 2, True) in events(schedd))
            return [first["Withdrawn"], again["Withdrawn"]]
        finally:
            await s.on_stop()

    assert asyncio.run(scenario()) == [True, False]
    assert not [e for e in events(schedd) if e[1] == 1]
    assert sorted({r["ProcId"] for r in schedd.reports if r["Event"] == "execute"}) == [0, 2]


@pytest.mark.parametrize("ended_by", ["ReleaseClaim", "the startd's stop"])
def test_an_ended_claim_runs_nothing_of_its_queue(tmp_path, ended_by):
    """Released, or ended by its startd's stop, a claim's job is evicted and its exit report says
    the claim ended; nothing queued ahead on it starts. (A startd that stops ends its claims: a
    schedd reusing one would send its next job to a startd going away, and at the end of a
    200,000-slot run every schedd spent seconds matching idle jobs to such claims.)"""
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = (await claim_all(s))[0]
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": cid, "JobAd": job(0)}])
            s.activation.in_answer(SCHEDD, [], [ahead(cid, 1, 1)])
            await settled(lambda: [r for r in schedd.reports if r["Event"] == "execute"])
            if ended_by == "ReleaseClaim":
                await s.claims.ReleaseClaim(DAEMON, ClaimId=cid)
                await settled(lambda: [r for r in schedd.reports if r["Event"] == "exit"])
                await asyncio.sleep(0.05)  # a start would be queued in the same turn as the exit
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    assert events(schedd) == [("exit", 0, False)]
    exit_report = next(r for r in schedd.reports if r["Event"] == "exit")
    assert exit_report.get("Evicted") is True and exit_report.get("ClaimEnded") is True


def test_a_claim_whose_activation_in_the_same_answer_is_refused_queues_nothing(tmp_path):
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = (await claim_all(s))[0]
            s.activation.in_answer(SCHEDD, [{"ClaimId": cid, "JobAd": job(0, Requirements=[1, 2])}], [ahead(cid, 1, 1)])
            await settled(lambda: [r for r in schedd.reports if r["Event"] == "activated"])
            assert s.claims.by_id[cid].ahead == [] and s.activation.counters["JobsStarted"] == 0
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    assert [(e[0], e[1]) for e in events(schedd)] == [("activated", 0)]


def test_exits_linger_while_a_quarter_of_the_queue_is_left_and_hurry_below(tmp_path):
    """An exit report leaves at once (hurries) once fewer jobs are queued ahead than a quarter of
    as many as the schedd filled the queue with (two at least), so its answer tops the queue up
    before it runs dry; before that it lingers for company. (Hurrying only at the last job left a
    queue of short jobs empty while the answer was on its way; hurrying from half the queue on
    made a call of most exits of short jobs.)"""
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    exits: list[tuple[int, bool]] = []
    report = s.activation.reports.report

    def spied(claim, job_ad, event, extra, *, hurry=True):
        if event == "exit":
            exits.append((job_ad["ProcId"], hurry))
        report(claim, job_ad, event, extra, hurry=hurry)

    s.activation.reports.report = spied

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = (await claim_all(s))[0]
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": cid, "JobAd": job(0, Arguments="0.2")}])
            s.activation.in_answer(SCHEDD, [], [ahead(cid, i, i, "0") for i in range(1, 9)])
            await settled(lambda: len(exits) == 9)
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    # At each exit, 8 - proc jobs are still queued (the next starts right after the report).
    assert exits == [(proc, 8 - proc < 2) for proc in range(9)]
