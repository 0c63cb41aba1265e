"""The schedd's file-transfer parts as composed in agent.py: OpenTransfer (transfers.py) answers only
the claim that runs the job and goes through the owner's shadow; spooling (spooling.py) keeps a
spooled job's input, releases the job through the job state and answers once that is on disk."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from gridbus.agents.schedd.jobattrs import HELD, IDLE, HoldCode
from gridbus.status import MethodError, Status
from gridbus.transfer import OPEN_REFUSED
from tests.unit.schedd.inproc import call, exit_report, make_schedd, run_on_claim, submit


def test_open_transfer_answers_only_the_claim_that_runs_the_job_and_asks_the_owner_s_shadow(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        try:
            cid = submit(schedd, ShouldTransferFiles="YES", Iwd=str(tmp_path))
            await run_on_claim(schedd, cid, 0, "c1")
            args = {"ClusterId": cid, "ProcId": 0, "Direction": "in"}
            with pytest.raises(MethodError) as wrong:
                await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c2", **args)
            assert wrong.value.status == Status.FORBIDDEN and "does not run job" in wrong.value.text
            # The right claim reaches the owner's shadow, which has no broker here: refused so that
            # the startd holds the job (USER + OPEN_REFUSED), with the shadow's sentence.
            with pytest.raises(MethodError) as refused:
                await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c1", **args)
            assert refused.value.status == Status.USER + OPEN_REFUSED and "no broker" in refused.value.text
            with pytest.raises(MethodError) as bad:
                await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c1",
                                                    **{**args, "Direction": "sideways"})
            assert bad.value.status == Status.INVALID_PARAMETER
        finally:
            await schedd.owner_shadows.stop_all()
            await schedd.commits.close()

    asyncio.run(main())


def test_open_transfer_answers_the_claim_a_job_is_queued_ahead_on(tmp_path: Path):
    """A job queued ahead starts at its predecessor's exit and asks for its input before the
    report of that start: the claim it is queued on is answered, a withdrawn one is not."""
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        try:
            cid = submit(schedd, count=2, ShouldTransferFiles="YES", Iwd=str(tmp_path))
            claim = await run_on_claim(schedd, cid, 0, "c1")
            schedd.claims.queue_ahead(claim, (cid, 1))
            args = {"ClusterId": cid, "ProcId": 1, "Direction": "in"}
            with pytest.raises(MethodError) as reached:  # past the claim check, to the owner's shadow
                await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c1", **args)
            assert reached.value.status == Status.USER + OPEN_REFUSED, reached.value.text
            with pytest.raises(MethodError) as wrong:
                await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c2", **args)
            assert wrong.value.status == Status.FORBIDDEN
            claim.withdrawn.add((cid, 1))  # held meanwhile: WithdrawActivation under way
            with pytest.raises(MethodError) as withdrawn:
                await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c1", **args)
            assert withdrawn.value.status == Status.FORBIDDEN
        finally:
            await schedd.owner_shadows.stop_all()
            await schedd.commits.close()

    asyncio.run(main())


def test_spool_done_releases_the_job_to_run_from_the_spool_and_answers_once_committed(tmp_path: Path):
    spool = tmp_path / "spool"

    async def main() -> None:
        schedd = make_schedd(spool)
        await schedd.setup()
        try:
            submitter = tmp_path / "laptop"
            cid = submit(schedd, Iwd=str(submitter), Cmd=str(submitter / "job.sh"), Out=str(submitter / "job.out"),
                         ShouldTransferFiles="YES", HoldReasonCode=int(HoldCode.SPOOLING_INPUT), LeaveJobInQueue=True)
            schedd.queue.set_status(schedd.queue.proc(cid, 0), HELD, when=time.time())
            job = f"{cid}.0"
            with pytest.raises(MethodError) as other:
                await schedd.spooling.SpoolInput(call("SpoolInput", user="mallory"), Id=job, Name="in.txt", Kind="file",
                                                 Mode=0o644, Offset=0, Data=b"x", Last=True)
            assert other.value.status == Status.FORBIDDEN
            for name, data in (("job.sh", b"#!/bin/sh\ncat in.txt\n"), ("in.txt", b"spooled\n")):
                await schedd.spooling.SpoolInput(call("SpoolInput"), Id=job, Name=name, Kind="file", Mode=0o755,
                                                 Offset=0, Data=data, Last=True)
            assert (await schedd.spooling.SpoolDone(call("SpoolDone"), Id=job)) == {"Files": 2}
            ad = schedd.queue.get(cid, 0)
            where = spool / "jobs" / str(cid) / "0"
            assert ad["JobStatus"] == IDLE and ad["Iwd"] == str(where) and ad["SUBMIT_Iwd"] == str(submitter)
            assert ad["Cmd"] == str(where / "job.sh") and ad["TransferInput"] == "in.txt" and ad["Out"] == "job.out"
            assert (where / "in.txt").read_bytes() == b"spooled\n"
            assert schedd.spooling.is_spooled(ad)
            # Answered after the commit: the file already holds the released job.
            db = sqlite3.connect(str(spool / "job_queue.sqlite3"))
            try:
                (status,) = db.execute("SELECT status FROM procs WHERE cluster_id = ? AND proc_id = 0", (cid,)).fetchone()
            finally:
                db.close()
            assert status == IDLE
            with pytest.raises(MethodError) as early:
                await schedd.spooling.RetrieveDone(call("RetrieveDone"), Id=job)
            assert early.value.status == Status.USER + 1 and "not completed" in early.value.text
        finally:
            await schedd.commits.close()

    asyncio.run(main())


def test_small_sandboxes_ride_in_the_activations_and_the_exit_reports_through_one_request_per_owner(tmp_path: Path):
    """The owner's shadow reads the small inputs of a batch of activations, and writes the outputs
    that came inside a JobReports call before its reports are applied; a job whose output cannot
    be written is held with code 12, one whose input is over MAX_INLINE_TRANSFER_KB is streamed."""
    iwd = tmp_path / "submit"
    iwd.mkdir()
    (iwd / "in.txt").write_text("small")
    (iwd / "big.bin").write_bytes(b"b" * 2048)

    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", inline_transfer_max=1024)
        await schedd.setup()
        try:
            small = submit(schedd, count=2, ShouldTransferFiles="YES", Iwd=str(iwd), TransferInput="in.txt",
                           TransferExecutable=False, Cmd="/bin/true")
            big = submit(schedd, ShouldTransferFiles="YES", Iwd=str(iwd), TransferInput="big.bin",
                         TransferExecutable=False, Cmd="/bin/true")
            bare = submit(schedd, ShouldTransferFiles="NO", Iwd=str(iwd), Cmd="/bin/true")
            claims = [await run_on_claim(schedd, c, p, f"c{i}") for i, (c, p) in
                      enumerate([(small, 0), (small, 1), (big, 0), (bare, 0)])]
            entries = [{"ClaimId": cl.claim_id, "JobAd": schedd.queue.get(*cl.job)} for cl in claims]
            before = dict(schedd.inline_sandboxes.stats)
            await schedd.inline_sandboxes.attach(entries)
            assert [e.get("Sandbox", {}).get("Files") for e in entries] == [
                [["in.txt", 0o644, b"small"]], [["in.txt", 0o644, b"small"]], None, None]
            assert [e.get("Sandbox", {}).get("OutputLimit") for e in entries] == [1024, 1024, 1024, None]
            stats = schedd.inline_sandboxes.stats
            assert stats["InlineInputs"] - before["InlineInputs"] == 2
            assert stats["InlineShadowRequests"] - before["InlineShadowRequests"] == 1  # one owner, one request

            (iwd / "blocker").write_text("a file where a directory would go")
            reports = [exit_report(small, 0, "c0", OutputSandbox=[["out.txt", 0o644, b"result"]]),
                       exit_report(small, 1, "c1", OutputSandbox=[["blocker/out.txt", 0o644, b"x"]])]
            await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=reports)
            assert (iwd / "out.txt").read_bytes() == b"result"
            assert schedd.queue.status(small, 0) != HELD
            assert schedd.queue.status(small, 1) == HELD
            held = schedd.queue.get(small, 1)
            assert held["HoldReasonCode"] == 12 and held["HoldReason"].startswith("Transfer output files failure")
            assert "blocker" in held["HoldReason"]
            assert stats["InlineShadowRequests"] - before["InlineShadowRequests"] == 2
        finally:
            await schedd.owner_shadows.stop_all()
            await schedd.commits.close()

    asyncio.run(main())


def test_a_small_input_after_a_checkpoint_brings_the_checkpoint_back_inline(tmp_path: Path):
    """A self-checkpointing job's next run gets its last checkpoint with its input, inline as
    streamed: the checkpoint's files, over an input file of the same name."""
    iwd = tmp_path / "submit"
    iwd.mkdir()
    (iwd / "state").write_text("from the submit directory")
    (iwd / "in.txt").write_text("input")

    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", inline_transfer_max=1024)
        await schedd.setup()
        try:
            cid = submit(schedd, count=2, ShouldTransferFiles="YES", Iwd=str(iwd), TransferInput="in.txt,state",
                         TransferExecutable=False, Cmd="/bin/true", SuccessCheckpointExitCode=85)
            current = schedd.checkpoint_store.job_dir(cid, 0) / "current"
            current.mkdir(parents=True)
            (current / "state").write_text("step 7")
            claims = [await run_on_claim(schedd, cid, p, f"c{p}") for p in (0, 1)]
            entries = [{"ClaimId": cl.claim_id, "JobAd": schedd.queue.get(*cl.job)} for cl in claims]
            await schedd.inline_sandboxes.attach(entries)
            files = [{name: data for name, _mode, data in e["Sandbox"]["Files"]} for e in entries]
            assert files == [{"state": b"step 7", "in.txt": b"input"},
                             {"in.txt": b"input", "state": b"from the submit directory"}]
        finally:
            await schedd.owner_shadows.stop_all()
            await schedd.commits.close()

    asyncio.run(main())


@pytest.mark.parametrize("spooled", [False, True], ids=["owner-s-shadow", "spooled"])
def test_open_transfer_hands_on_transfer_direct_io_min_whoever_serves_it(tmp_path: Path, spooled: bool):
    """TRANSFER_DIRECT_IO_MIN_MB reaches the submit side's end of a streamed transfer both when the
    owner's shadow serves it and when the schedd serves a spooled job's itself."""
    from gridbus.transfer import spec

    async def main() -> dict:
        schedd = make_schedd(tmp_path, transfer_direct_io_min=5 << 20)
        await schedd.setup()
        served: list[dict] = []

        async def expect(owner, token, direction, wanted):
            served.append(wanted)
            return "q-shadow"

        async def open_transfer(ad, direction, token, stall):
            served.append(ad)
            return "q-schedd"

        schedd.transfers.owner_shadows.expect = expect
        schedd.transfers.spooling.open_transfer = open_transfer
        schedd.transfers.spooling.is_spooled = lambda ad: spooled
        try:
            cid = submit(schedd, ShouldTransferFiles="YES", Iwd=str(tmp_path))
            await run_on_claim(schedd, cid, 0, "c1")
            answer = await schedd.transfers.OpenTransfer(call("OpenTransfer", user="startd"), ClaimId="c1",
                                                         ClusterId=cid, ProcId=0, Direction="in")
            assert answer["Queue"] == ("q-schedd" if spooled else "q-shadow")
        finally:
            await schedd.owner_shadows.stop_all()
            await schedd.commits.close()
        return served[0]

    assert asyncio.run(main())[spec.DIRECT_MIN] == 5 << 20
