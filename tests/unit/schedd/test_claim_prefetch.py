"""The shadows' side of the prefetch (CLAIM_PREFETCH_JOBS), without a broker: a claim running a
short job gets the owner's next jobs queued ahead in the JobReports answers; a job queued ahead
stays Idle and reserved until the startd reports it started; an entry the startd has not taken is
sent again; an exit with no start behind it returns the queue to the idle jobs; a held job is
withdrawn (and stopped if the startd started it anyway); a claim that ends returns its queue; the
queue survives a restart in the claim's record."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from gridbus.agents.schedd.claims import ACTIVATING, IDLE, RUNNING_JOB, Claim
from gridbus.agents.schedd.shadows import prefetch_depth
from gridbus.rpc import MethodResult
from tests.unit.schedd.test_activations_in_answers import (
    COMPLETED,
    RUNNING,
    Shadows,
    report,
    running_claim,
    until,
)

HELD = 5
IDLE_JOB = 1


class PrefetchShadows(Shadows):
    """The shadow parts with 6 idle jobs and a startd that answers WithdrawActivation as told."""

    def __init__(self, withdrawn: bool = True, prefetch: int = 3) -> None:
        super().__init__()
        self.settings.claim_prefetch = prefetch
        for p in range(4, 7):
            self.jobs[(1, p)] = {"ClusterId": 1, "ProcId": p, "Owner": "alice", "JobStatus": IDLE_JOB,
                                 "Requirements": True}
        self.withdrawn = withdrawn

    async def _call(self, address: str, method: str, args: dict, timeout: float) -> MethodResult:
        if method == "WithdrawActivation":
            self.calls.append((address, method, args))
            return MethodResult(0, "OK", {"Withdrawn": self.withdrawn})
        return await super()._call(address, method, args, timeout)

    def leave_idle(self, proc: int, status: int) -> None:
        """A job held or removed: what JobQueue.set_status tells the shadows."""
        self.jobs[(1, proc)]["JobStatus"] = status
        self.shadows.job_left_idle(SimpleNamespace(cluster=SimpleNamespace(id=1), id=proc))


def short_claim(s: Shadows) -> tuple[Claim, SimpleNamespace]:
    claim, call = running_claim(s)
    claim.last_runtime = 0.01  # its last job was short
    return claim, call


def procs(entries: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(e["Seq"], e["JobAd"]["ProcId"]) for e in entries]


def test_jobs_queued_ahead_start_at_the_exit_with_no_activation_of_their_own():
    async def main() -> None:
        s = PrefetchShadows()
        claim, call = short_claim(s)
        out = await s.JobReports(call, Reports=[report("usage", 0)])
        assert procs(out["Ahead"]) == [(1, 1), (2, 2), (3, 3)]
        # Queued ahead: reserved, still Idle, and not running on the claim.
        assert all(s.jobs[(1, p)]["JobStatus"] == IDLE_JOB and (1, p) in s._reserved for p in (1, 2, 3))
        assert claim.job == (1, 0) and set(s.claims.ahead_of) == {(1, 1), (1, 2), (1, 3)}

        # The exit and the start behind it, in one call: the claim runs 1.1 now, the queue is
        # topped up with 1.4, and only that entry goes (the startd took 1..3).
        out = await s.JobReports(call, Reports=[
            report("exit", 0, ExitCode=0, AheadSeq=3), report("activated", 1, Status=0, Text="OK", Ahead=True, AheadSeq=3)])
        assert s.exits == [(1, 0)] and s.jobs[(1, 1)]["JobStatus"] == RUNNING
        assert (claim.state, claim.job) == (RUNNING_JOB, (1, 1)) and s._by_job[(1, 1)] is claim
        assert "Activations" not in out and procs(out["Ahead"]) == [(4, 4)]
        assert [seq for seq, _ in claim.ahead] == [2, 3, 4]
        assert not [c for c in s.calls if c[1] in ("ActivateClaims", "ReleaseClaim")]
        assert s.shadow_stats["AheadStarts"] == 1

    asyncio.run(main())


def test_entries_the_startd_has_not_taken_are_sent_again():
    async def main() -> None:
        s = PrefetchShadows()
        claim, call = short_claim(s)
        await s.JobReports(call, Reports=[report("usage", 0)])
        # The answer was lost: the retried call says the startd took none of them.
        out = await s.JobReports(call, Reports=[report("usage", 0)])
        assert procs(out["Ahead"]) == [(1, 1), (2, 2), (3, 3)]
        out = await s.JobReports(call, Reports=[report("usage", 0, AheadSeq=2)])
        assert procs(out["Ahead"]) == [(3, 3)]
        assert claim.ahead_seq == 3  # nothing queued twice

    asyncio.run(main())


async def exit_with_no_start_behind(s: PrefetchShadows) -> tuple[Claim, SimpleNamespace, dict[str, Any]]:
    """A short claim gets 1.1-1.3 queued ahead; then 1.0's exit comes with no start behind it. The
    claim, the startd's call and the answer to that exit."""
    claim, call = short_claim(s)
    await s.JobReports(call, Reports=[report("usage", 0)])
    return claim, call, await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0, AheadSeq=3)])


def test_an_exit_with_no_start_behind_it_returns_the_queue_and_reuses_the_claim():
    async def main() -> None:
        s = PrefetchShadows()
        claim, _call, out = await exit_with_no_start_behind(s)
        # The startd held none of them: Idle again, and the claim's next job goes as before,
        # with the jobs after it queued ahead again behind it in the same answer (new sequence
        # numbers: the startd takes each once).
        assert s.shadow_stats["AheadReturned"] == 3
        assert [a["JobAd"]["ProcId"] for a in out["Activations"]] == [1]
        assert (claim.state, claim.job) == (ACTIVATING, (1, 1))
        assert [(a["Seq"], a["JobAd"]["ProcId"]) for a in out["Ahead"]] == [(4, 2), (5, 3), (6, 4)]
        assert sorted(s.claims.ahead_of) == [(1, 2), (1, 3), (1, 4)]

    asyncio.run(main())


def test_a_held_job_queued_ahead_is_withdrawn_and_never_runs():
    async def main() -> None:
        s = PrefetchShadows(withdrawn=True)
        claim, call = short_claim(s)
        await s.JobReports(call, Reports=[report("usage", 0)])
        s.leave_idle(1, HELD)
        await until(lambda: (1, 1) not in s.claims.ahead_of)
        assert [c[2] for c in s.calls if c[1] == "WithdrawActivation"] == [{"ClaimId": "c1", "ClusterId": 1, "ProcId": 1}]
        assert (1, 1) not in s._reserved and [j for _, j in claim.ahead] == [(1, 2), (1, 3)]
        # The startd passes on to 1.2.
        await s.JobReports(call, Reports=[
            report("exit", 0, ExitCode=0, AheadSeq=3), report("activated", 2, Status=0, Text="OK", Ahead=True, AheadSeq=3)])
        assert claim.job == (1, 2) and s.jobs[(1, 1)]["JobStatus"] == HELD

    asyncio.run(main())


def test_a_held_job_the_startd_started_before_the_withdrawal_is_stopped_and_stays_held():
    async def main() -> None:
        s = PrefetchShadows(withdrawn=False)
        claim, call = short_claim(s)
        await s.JobReports(call, Reports=[report("usage", 0)])
        s.leave_idle(1, HELD)
        await until(lambda: any(c[1] == "WithdrawActivation" for c in s.calls))
        await s.JobReports(call, Reports=[
            report("exit", 0, ExitCode=0, AheadSeq=3), report("activated", 1, Status=0, Text="OK", Ahead=True, AheadSeq=3)])
        await until(lambda: any(c[1] == "DeactivateClaim" for c in s.calls))
        assert s.jobs[(1, 1)]["JobStatus"] == HELD and claim.stopping and claim.job == (1, 1)
        # It names the job: the startd stops job 1 only if that is what the claim still runs.
        assert [(c[2]["ClusterId"], c[2]["ProcId"]) for c in s.calls if c[1] == "DeactivateClaim"] == [(1, 1)]
        # Its exit frees the claim for the next queued job, which the startd starts behind it.
        await s.JobReports(call, Reports=[
            report("exit", 1, ExitCode=0), report("activated", 2, Status=0, Text="OK", Ahead=True, AheadSeq=3)])
        assert s.jobs[(1, 1)]["JobStatus"] == HELD and (1, 1) not in s.exits
        assert claim.job == (1, 2) and s.jobs[(1, 2)]["JobStatus"] == RUNNING

    asyncio.run(main())


def test_a_refused_start_or_an_ended_claim_returns_every_job_queued_ahead():
    async def main() -> None:
        s = PrefetchShadows()
        claim, call = short_claim(s)
        await s.JobReports(call, Reports=[report("usage", 0)])
        await s.JobReports(call, Reports=[
            report("exit", 0, ExitCode=0, AheadSeq=3),
            report("activated", 1, Status=0x10001, Text="draining", Ahead=True, AheadSeq=3)])
        assert "c1" not in s._claims and not s.claims.ahead_of and not s._reserved
        assert all(s.jobs[(1, p)]["JobStatus"] == IDLE_JOB for p in (1, 2, 3))
        await until(lambda: any(c[1] == "ReleaseClaim" for c in s.calls))

        # An exit that ends the claim (ClaimEnded), and a claim lost with its lease, likewise.
        s2 = PrefetchShadows()
        claim2, call2 = short_claim(s2)
        await s2.JobReports(call2, Reports=[report("usage", 0)])
        await s2.JobReports(call2, Reports=[report("exit", 0, ExitCode=0, ClaimEnded=True, AheadSeq=3)])
        assert "c1" not in s2._claims and not s2.claims.ahead_of and not s2._reserved

        s3 = PrefetchShadows()
        claim3, call3 = short_claim(s3)
        await s3.JobReports(call3, Reports=[report("usage", 0)])
        await s3.leases._claim_lost(claim3, "the claim lease ran out")
        assert "c1" not in s3._claims and not s3.claims.ahead_of and not s3._reserved
        assert s3.jobs[(1, 0)]["JobStatus"] == IDLE_JOB  # evicted: it runs again

    asyncio.run(main())


def test_a_long_job_gets_nothing_queued_ahead_nor_does_a_start_no_one_queued_run():
    async def main() -> None:
        s = PrefetchShadows()
        claim, call = running_claim(s)
        claim.last_runtime = 60.0  # CLAIM_PREFETCH_MAX_RUNTIME is 2 s
        out = await s.JobReports(call, Reports=[report("usage", 0)])
        assert "Ahead" not in out and not s.claims.ahead_of
        claim.last_runtime = None  # nor a claim whose first job still runs
        assert "Ahead" not in await s.JobReports(call, Reports=[report("usage", 0)])
        # The startd says it started a job that was never queued ahead there: it is stopped.
        await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0), report("activated", 3, Status=0, Ahead=True)])
        await until(lambda: any(c[1] == "DeactivateClaim" for c in s.calls))
        assert s.jobs[(1, 3)]["JobStatus"] != RUNNING

    asyncio.run(main())


def test_the_queue_is_in_the_claim_record_and_reserved_again_after_a_restart():
    claim = Claim("c9", "startd@a", "slot1@a", "alice", {"Requirements": True}, time.time() + 100,
                  state=RUNNING_JOB, job=(1, 0), in_reports=True)
    claim.ahead, claim.ahead_seq = [(4, (1, 5)), (5, (1, 6))], 5
    again = Claim.from_record(claim.record())
    assert (again.ahead, again.ahead_seq, again.job) == ([(4, (1, 5)), (5, (1, 6))], 5, (1, 0))
    s = PrefetchShadows()
    s.claims.add(again)
    assert {(1, 5), (1, 6)} <= s._reserved and s.claims.ahead_of[(1, 6)] is again

    # After a restart, an idle claim with a queue waits for its startd's reports (sent again until
    # answered) to say whether it started one; with no word within SHADOW_CALL_TIMEOUT it goes
    # back to its startd (what the startd does with its queue is not known), the queue Idle again.
    idle = Claim("c8", "startd@a", "slot2@a", "alice", {"Requirements": True}, time.time() + 100, in_reports=True)
    idle.ahead, idle.ahead_seq = [(1, (1, 4))], 1
    s.claims.add(idle)
    s.jobs[(1, 0)]["JobStatus"] = RUNNING
    s.queue.procs = lambda: [SimpleNamespace(key=k, status=ad["JobStatus"]) for k, ad in s.jobs.items()]  # type: ignore[attr-defined]

    async def main() -> None:
        await s.shadows.reconcile_after_restart()
        assert "c8" in s._claims and (1, 4) in s._reserved  # not yet: its startd may have started 1.4
        await until(lambda: any(c[1] == "ReleaseClaim" and c[2]["ClaimId"] == "c8" for c in s.calls))

    asyncio.run(main())
    assert "c8" not in s._claims and (1, 4) not in s._reserved and idle.state == IDLE
    assert s.jobs[(1, 0)]["JobStatus"] == RUNNING and COMPLETED not in [a["JobStatus"] for a in s.jobs.values()]


def restarted_with_idle_claim_and_queue() -> tuple[PrefetchShadows, Claim]:
    """A schedd read back from disk with claim c1 idle (its job 1.0's exit written) and 1.1 queued
    ahead on it: a commit came between the exit and the start behind it in one JobReports call."""
    s = PrefetchShadows()
    s.settings.shadow_call_timeout = 60.0  # (the startd's reports come well within it here)
    claim = Claim("c1", "startd@a", "slot1@a", "alice", {"Requirements": True}, time.time() + 1e9, in_reports=True)
    claim.ahead, claim.ahead_seq = [(1, (1, 1))], 1
    s.claims.add(Claim.from_record(claim.record()))
    s.jobs[(1, 0)]["JobStatus"] = COMPLETED
    s.queue.procs = lambda: [SimpleNamespace(key=k, status=ad["JobStatus"]) for k, ad in s.jobs.items()]  # type: ignore[attr-defined]
    return s, s._claims["c1"]


def test_a_job_started_from_the_queue_ahead_while_the_schedd_was_down_runs_once():
    async def main() -> None:
        s, claim = restarted_with_idle_claim_and_queue()
        await s.shadows.reconcile_after_restart()
        # The startd sends its unanswered call again: the exit, and the start of 1.1 behind it.
        await s.JobReports(SimpleNamespace(user="startd"), Reports=[
            report("exit", 0, ExitCode=0, AheadSeq=1), report("activated", 1, Status=0, Text="OK", Ahead=True, AheadSeq=1)])
        assert (claim.state, claim.job) == (RUNNING_JOB, (1, 1)) and s.jobs[(1, 1)]["JobStatus"] == RUNNING
        assert not [c for c in s.calls if c[1] in ("ActivateClaims", "ReleaseClaim")]

    asyncio.run(main())


def test_a_restarted_schedds_idle_claim_whose_startd_started_nothing_is_reused():
    async def main() -> None:
        s, claim = restarted_with_idle_claim_and_queue()
        await s.shadows.reconcile_after_restart()
        out = await s.JobReports(SimpleNamespace(user="startd"), Reports=[report("exit", 0, ExitCode=0, AheadSeq=1)])
        # No start behind the exit: the startd holds nothing; the claim goes to the next job.
        assert [a["JobAd"]["ProcId"] for a in out["Activations"]] == [1]
        assert (claim.state, claim.job) == (ACTIVATING, (1, 1))

    asyncio.run(main())


def test_an_activation_sent_before_a_crash_is_asked_again_as_a_repeat():
    """The claim is written, waiting for its job's outcome, before the activation goes out: the
    restarted schedd asks the startd again, marked Repeat (it answers for the job it ran, never
    running it twice), rather than taking the job for Idle and starting it anew."""
    async def main() -> None:
        s = PrefetchShadows()
        before = Claim("c2", "startd@a", "slot2@a", "alice", {"Requirements": True}, time.time() + 1e9)
        s.claims.add(before)
        s.shadows.activate(before, (1, 2))
        # The claim's row, as the commit the sending waits for wrote it: the crash comes now.
        (record,) = s.queue.store.db.execute("SELECT record FROM shadow_claims WHERE claim_id = 'c2'").fetchone()
        s = PrefetchShadows()
        again = Claim.from_record(record)
        assert (again.state, again.job, again.asked) == (ACTIVATING, (1, 2), True)
        s.claims.add(again)
        s.queue.procs = lambda: [SimpleNamespace(key=k, status=ad["JobStatus"]) for k, ad in s.jobs.items()]  # type: ignore[attr-defined]
        await s.shadows.reconcile_after_restart()
        await until(lambda: any(c[1] == "ActivateClaims" for c in s.calls))
        sent = [a for c in s.calls if c[1] == "ActivateClaims" for a in c[2]["Activations"]]
        assert [(a["ClaimId"], a["JobAd"]["ProcId"], a.get("Repeat")) for a in sent] == [("c2", 2, True)]
        await until(lambda: again.state == RUNNING_JOB)
        assert s.jobs[(1, 2)]["JobStatus"] == RUNNING

    asyncio.run(main())


class SilentStartd(PrefetchShadows):
    """A startd whose answers to ActivateClaims never come back (the schedd dies first)."""

    async def _call(self, address: str, method: str, args: dict, timeout: float) -> MethodResult:
        if method == "ActivateClaims":
            self.calls.append((address, method, args))
            await asyncio.Event().wait()
        return await super()._call(address, method, args, timeout)


def test_an_exit_that_came_before_the_activations_outcome_survives_a_crash():
    """A short job's exit report can come before the answer to the ActivateClaims that started
    it: it waits with the claim for that outcome, and the JobReports call is answered (the startd
    forgets the report). A schedd that dies before the outcome comes must still apply that exit
    after its restart, or the job stays Running for good (a DAG waits on it for ever)."""
    async def main() -> None:
        s = SilentStartd()
        before = Claim("c1", "startd@a", "slot1@a", "alice", {"Requirements": True}, time.time() + 1e9)
        s.claims.add(before)
        s.shadows.activate(before, (1, 2))
        s.shadows.flush_activations_now()
        await until(lambda: any(c[1] == "ActivateClaims" for c in s.calls))
        out = await s.JobReports(SimpleNamespace(user="startd"), Reports=[report("exit", 2, ExitCode=0)])
        assert out["Unknown"] == [] and before.buffered and s.exits == []
        # The crash: what is on disk is all the restarted schedd has.
        (record,) = s.queue.store.db.execute("SELECT record FROM shadow_claims WHERE claim_id = 'c1'").fetchone()
        s = PrefetchShadows()
        again = Claim.from_record(record)
        assert [r["Event"] for r in again.buffered] == ["exit"]
        s.claims.add(again)
        s.queue.procs = lambda: [SimpleNamespace(key=k, status=ad["JobStatus"]) for k, ad in s.jobs.items()]  # type: ignore[attr-defined]
        await s.shadows.reconcile_after_restart()
        # Asked again as a repeat (the startd answers for the job it ran); then the exit kept
        # with the claim is applied.
        await until(lambda: s.exits == [(1, 2)])
        assert s.jobs[(1, 2)]["JobStatus"] == COMPLETED and again.job != (1, 2)

    asyncio.run(main())


def test_an_edited_job_queued_ahead_is_withdrawn_and_idle_for_another_match():
    async def main() -> None:
        s = PrefetchShadows(withdrawn=True)
        claim, call = short_claim(s)
        await s.JobReports(call, Reports=[report("usage", 0)])
        s.claims.withdraw_ahead((1, 2))  # what SetAttribute on an idle job does
        s.claims.withdraw_ahead((1, 2))  # asked once
        await until(lambda: (1, 2) not in s.claims.ahead_of)
        assert len([c for c in s.calls if c[1] == "WithdrawActivation"]) == 1
        assert (1, 2) not in s._reserved and s.jobs[(1, 2)]["JobStatus"] == IDLE_JOB
        s.claims.withdraw_ahead((1, 5))  # not queued anywhere: nothing to do
        assert len([c for c in s.calls if c[1] == "WithdrawActivation"]) == 1

    asyncio.run(main())


def test_a_retried_call_repeating_starts_and_exits_already_applied_changes_nothing():
    """The startd never got the answer to [exit 0, start 1, exit 1, start 2] and sends it again
    (with what came since): the repeats are recognised, nothing is stopped or counted twice."""
    async def main() -> None:
        s = PrefetchShadows()
        claim, call = short_claim(s)
        await s.JobReports(call, Reports=[report("usage", 0)])
        batch = [report("exit", 0, ExitCode=0, AheadSeq=3), report("activated", 1, Status=0, Ahead=True, AheadSeq=3),
                 report("exit", 1, ExitCode=0, AheadSeq=3), report("activated", 2, Status=0, Ahead=True, AheadSeq=3)]
        await s.JobReports(call, Reports=batch)
        assert claim.job == (1, 2) and s.exits == [(1, 0), (1, 1)]
        await s.JobReports(call, Reports=[*batch, report("usage", 2, AheadSeq=5)])
        await asyncio.sleep(0.05)
        assert claim.job == (1, 2) and s.exits == [(1, 0), (1, 1)] and claim.state == RUNNING_JOB
        assert not [c for c in s.calls if c[1] in ("DeactivateClaim", "ReleaseClaim", "ActivateClaims")]
        assert s.shadow_stats["AheadStarts"] == 2

    asyncio.run(main())


def test_a_claim_whose_short_jobs_start_and_end_between_two_calls_gets_jobs_queued_ahead():
    """Jobs so short that each one's start and exit reach the schedd in one call: the claim is
    never found running at an answer, only about to run its next job, which rides in that answer.
    The jobs after it are queued ahead behind it in the same answer, or the claim would run one
    job per round trip for good."""
    async def main() -> None:
        s = PrefetchShadows()
        claim, call = short_claim(s)
        claim.in_reports = True
        # 1.0's exit: its next job (1.1) goes in the answer, and 1.2-1.4 queued ahead behind it.
        out = await s.JobReports(call, Reports=[report("exit", 0, ExitCode=0)])
        assert [a["JobAd"]["ProcId"] for a in out["Activations"]] == [1]
        assert procs(out["Ahead"]) == [(1, 2), (2, 3), (3, 4)]
        # 1.1 started and ended, and the startd started 1.2 behind it, all in one call: the claim
        # runs 1.2 and its queue is topped up; no job waits for a round trip of its own.
        out = await s.JobReports(call, Reports=[
            report("activated", 1, Status=0, Text="OK"), report("exit", 1, ExitCode=0, AheadSeq=3),
            report("activated", 2, Status=0, Text="OK", Ahead=True, AheadSeq=3)])
        assert (claim.state, claim.job) == (RUNNING_JOB, (1, 2))
        assert "Activations" not in out and procs(out["Ahead"]) == [(4, 5)]

    asyncio.run(main())


def test_the_queue_ahead_holds_about_the_max_runtime_of_work_and_one_job_at_least():
    # CLAIM_PREFETCH_MAX_RUNTIME (2 s) of work at the last job's runtime, CLAIM_PREFETCH_JOBS at most.
    assert prefetch_depth(16, 2.0, 0.003) == 16
    assert prefetch_depth(16, 2.0, 0.5) == 4
    assert prefetch_depth(16, 2.0, 1.0) == 2
    assert prefetch_depth(16, 2.0, 1.9) == 1
    assert prefetch_depth(3, 2.0, 0.0) == 3  # both reports in one call: no runtime seen

    async def main() -> None:
        s = PrefetchShadows(prefetch=16)
        claim, call = running_claim(s)
        claim.last_runtime = 0.9  # room for two 0.9 s jobs in 2 s
        out = await s.JobReports(call, Reports=[report("usage", 0)])
        assert procs(out["Ahead"]) == [(1, 1), (2, 2)]
        assert all(s.jobs[(1, p)]["JobStatus"] == IDLE_JOB for p in range(3, 7))
        assert not any((1, p) in s._reserved for p in range(3, 7))  # free for other slots

    asyncio.run(main())


def test_an_exit_and_the_start_behind_it_that_come_before_the_activations_outcome_wait_for_it():
    # A short job's exit report can reach the schedd before its activation's outcome (an
    # ActivateClaims answer comes by another queue; an activation in an answer is reported once
    # its job runs), together with the start of the job queued ahead behind that exit. The start
    # waits behind the exit for the outcome; then all apply in order: nothing is stopped.
    async def main() -> None:
        s = PrefetchShadows()
        claim, call, out = await exit_with_no_start_behind(s)
        # 1.1's activation rode in that answer, with 1.2-1.4 queued ahead behind it (Seq 4-6).
        assert (claim.state, claim.job) == (ACTIVATING, (1, 1)) and [a["Seq"] for a in out["Ahead"]] == [4, 5, 6]

        await s.JobReports(call, Reports=[
            report("execute", 1), report("exit", 1, ExitCode=0, AheadSeq=6),
            report("activated", 2, Status=0, Text="OK", Ahead=True, AheadSeq=6)])
        assert (claim.state, claim.job) == (ACTIVATING, (1, 1)) and s.exits == [(1, 0)]  # all wait
        await s.JobReports(call, Reports=[report("activated", 1, Status=0, Text="OK", AheadSeq=6)])
        assert s.exits == [(1, 0), (1, 1)]
        assert (claim.state, claim.job) == (RUNNING_JOB, (1, 2)) and s.jobs[(1, 2)]["JobStatus"] == RUNNING
        assert not [c for c in s.calls if c[1] == "DeactivateClaim"]
        assert s.shadow_stats["AheadStarts"] == 1

    asyncio.run(main())
