"""Self-checkpointing on the schedd: a run's checkpoint becomes the job's only once its report
says it is whole, the job starts again on its claim (Running throughout, no start counted), and
when the claim cannot take it the job goes back to Idle, never completed; a later run's input
brings the checkpoint back."""

from __future__ import annotations

import asyncio
import os
import pwd
from pathlib import Path

import pytest

from gridbus.agents.schedd.agent import Schedd
from gridbus.agents.schedd.checkpoints import CheckpointStore
from gridbus.agents.schedd.claims import ACTIVATING, RUNNING_JOB, Claim
from gridbus.agents.startd.accounts import Account
from gridbus.transfer import spec
from tests.unit.schedd.inproc import (
    Startds,
    call,
    event_texts,
    exit_report,
    make_schedd,
    run_on_claim,
    settle,
    submit,
)

IDLE, RUNNING = 1, 2


def test_a_checkpoint_replaces_the_last_one_only_when_committed(tmp_path: Path):
    store = CheckpointStore(tmp_path)
    assert store.current(1, 0) is None
    first = store.incoming(1, 0, "c1", "alice")
    (first / "saved-state").write_text("3")
    assert store.current(1, 0) is None  # not whole until the report says so
    assert store.commit(1, 0, "c1")
    second = store.incoming(1, 0, "c2", "alice")
    (second / "saved-state").write_text("6")
    current = store.current(1, 0)
    assert current is not None and (current / "saved-state").read_text() == "3"
    store.discard(1, 0, "c2")  # that run was evicted before its report: the last one stays
    assert not store.commit(1, 0, "c2")
    assert (current / "saved-state").read_text() == "3"
    again = store.incoming(1, 0, "c2", "alice")
    (again / "saved-state").write_text("6")
    assert store.commit(1, 0, "c2")
    assert (current / "saved-state").read_text() == "6" and sorted(p.name for p in current.parent.iterdir()) == ["current"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another account needs root")
def test_an_incoming_checkpoint_is_the_owner_s_account_s(tmp_path: Path):
    nobody = pwd.getpwnam("nobody")
    store = CheckpointStore(tmp_path, lambda owner: Account(owner, nobody.pw_uid, nobody.pw_gid, (), "/"))
    incoming = store.incoming(3, 1, "c9", "alice")
    assert (incoming.stat().st_uid, incoming.stat().st_mode & 0o777) == (nobody.pw_uid, 0o700)
    assert all(d.stat().st_mode & 0o777 == 0o711 for d in (store.root, incoming.parent.parent, incoming.parent))


def _activations(schedd: Schedd) -> list[dict]:
    startds = schedd._client
    assert isinstance(startds, Startds)
    return [a for _addr, m, args in startds.calls if m == "ActivateClaims" for a in args["Activations"]]


def _checkpoint_report(cid: int, **extra: object) -> dict:
    fields = {"ExitCode": 85, "Checkpointed": True, "ClaimEnded": False, "TransferOutStarted": 100,
              "TransferOutFinished": 101, "RemoteUserCpu": 1.5, **extra}
    return exit_report(cid, 0, **fields)


def test_a_checkpointed_job_starts_again_on_its_claim_and_its_next_input_brings_the_checkpoint(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        cid = submit(schedd, SuccessCheckpointExitCode=85, WantFTOnCheckpoint=True, UserLog=str(tmp_path / "log"))
        claim = await run_on_claim(schedd, cid, 0)
        (schedd.checkpoint_store.incoming(cid, 0, "c1", "alice") / "saved-state").write_text("3")
        await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[_checkpoint_report(cid)])
        ad = schedd.queue.get(cid, 0)
        assert ad["JobStatus"] == RUNNING and ad["CheckpointNumber"] == 0 and ad["RemoteUserCpu"] == 1.5
        assert ad["NumJobStarts"] == 1 and "JobLastCheckpointTime" in ad and "CommittedTime" in ad
        # The same claim, a new activation of the same job.
        await settle(schedd)
        for _ in range(50):
            if claim.state == RUNNING_JOB:
                break
            await asyncio.sleep(0.01)
        activations = _activations(schedd)
        assert [(a["ClaimId"], a["JobAd"]["ClusterId"], a["JobAd"]["ProcId"]) for a in activations] == [("c1", cid, 0)]
        assert claim.state == RUNNING_JOB and claim.job == (cid, 0) and not claim.restarting
        assert schedd.queue.get(cid, 0)["NumJobStarts"] == 1  # an in-place restart is no start
        # Its next input brings the checkpoint back, over an input file of the same name.
        extra, direction = schedd.transfers._checkpoint_spec(schedd.queue.get(cid, 0), "in", "c1")
        assert direction == "in" and Path(extra[spec.CHECKPOINT_FROM], "saved-state").read_text() == "3"
        extra, direction = schedd.transfers._checkpoint_spec(schedd.queue.get(cid, 0), "checkpoint", "c1")
        assert direction == "out" and Path(extra[spec.CHECKPOINT_TO]).is_dir()
        schedd.queue.store.close()

    asyncio.run(main())


def test_a_checkpoint_whose_claim_ended_sends_the_job_back_to_idle_never_completed(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        cid = submit(schedd, SuccessCheckpointExitCode=85, WantFTOnCheckpoint=True)
        await run_on_claim(schedd, cid, 0)
        (schedd.checkpoint_store.incoming(cid, 0, "c1", "alice") / "saved-state").write_text("3")
        await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[_checkpoint_report(cid, ClaimEnded=True)])
        ad = schedd.queue.get(cid, 0)
        assert ad is not None and ad["JobStatus"] == IDLE and ad["CheckpointNumber"] == 0
        assert "c1" not in schedd.claims.by_id
        assert schedd.checkpoint_store.current(cid, 0) is not None
        schedd.queue.store.close()

    asyncio.run(main())


def test_a_restart_the_startd_refuses_sends_the_job_back_to_idle(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        cid = submit(schedd, SuccessCheckpointExitCode=85, WantFTOnCheckpoint=True)
        claim = await run_on_claim(schedd, cid, 0)
        shadows = schedd.shadows
        shadows.restart_in_place(claim, (cid, 0))
        assert claim.state == ACTIVATING and claim.restarting
        await shadows._activation_result(claim, (cid, 0), 3, "the slot is busy", answered=True)
        assert schedd.queue.get(cid, 0)["JobStatus"] == IDLE and not claim.restarting
        schedd.queue.store.close()

    asyncio.run(main())


def test_a_schedd_restarted_before_the_restart_was_answered_asks_again(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        cid = submit(schedd, SuccessCheckpointExitCode=85, WantFTOnCheckpoint=True)
        claim = await run_on_claim(schedd, cid, 0)
        claim.job, claim.state, claim.restarting = (cid, 0), ACTIVATING, True
        loaded = Claim.from_record(claim.record())  # as the restarted schedd reads it
        assert (loaded.job, loaded.state, loaded.restarting) == ((cid, 0), ACTIVATING, True)
        schedd.claims.by_id["c1"] = loaded
        schedd.claims.by_job[(cid, 0)] = loaded
        await schedd.shadows.reconcile_after_restart()
        for _ in range(50):
            if loaded.state == RUNNING_JOB:
                break
            await asyncio.sleep(0.01)
        activations = _activations(schedd)
        assert [(a["ClaimId"], a["JobAd"]["ProcId"]) for a in activations] == [("c1", 0)]
        assert loaded.state == RUNNING_JOB and schedd.queue.get(cid, 0)["JobStatus"] == RUNNING
        assert schedd.queue.get(cid, 0)["NumJobStarts"] == 1
        schedd.queue.store.close()

    asyncio.run(main())


def test_a_vacate_while_the_job_restarts_in_place_waits_for_its_new_run_and_stops_it(tmp_path: Path):
    """The job checkpointed and is starting again on its claim (its new run's outcome not known
    yet): a claim action (Vacate) waits for the run instead of finding no running claim and
    being dropped, which let the job run on to its end where it was."""
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        cid = submit(schedd, SuccessCheckpointExitCode=85, WantFTOnCheckpoint=True)
        claim = await run_on_claim(schedd, cid, 0)
        schedd.shadows._to_activate.clear()  # the new run's activation is not sent: its outcome comes below
        schedd.shadows.restart_in_place(claim, (cid, 0))
        schedd.shadows._to_activate.clear()
        startds: Startds = schedd._client  # type: ignore[assignment]
        vacate = asyncio.create_task(schedd.claims.call_job_claim(cid, 0, "DeactivateClaim", {"Graceful": True}))
        for _ in range(5):
            await asyncio.sleep(0)  # (the call's task runs up to its wait)
        assert not vacate.done() and not [c for c in startds.calls if c[1] == "DeactivateClaim"]
        await schedd.shadows._activation_result(claim, (cid, 0), 0, "OK", answered=True)  # it runs again
        result = await asyncio.wait_for(vacate, 5)
        assert result is not None and result.ok
        assert [(c[2]["ClusterId"], c[2]["ProcId"]) for c in startds.calls if c[1] == "DeactivateClaim"] == [(cid, 0)]
        schedd.queue.store.close()

    asyncio.run(main())


def test_the_terminated_event_of_a_run_that_checkpointed_gives_the_whole_runs_figures(tmp_path: Path):
    # HTCondor's run is its shadow's: a restart in place after a checkpoint does not end it, so
    # the run's bytes and cpu in the terminated event are its checkpoints' and its end's, as the
    # totals are for a job that ran once.
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        texts = event_texts(schedd)
        cid = submit(schedd, SuccessCheckpointExitCode=85, WantFTOnCheckpoint=True)
        claim = await run_on_claim(schedd, cid, 0)
        (schedd.checkpoint_store.incoming(cid, 0, "c1", "alice") / "saved-state").write_text("3")
        await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[
            _checkpoint_report(cid, BytesSent=1000, BytesRecvd=10, RemoteUserCpu=61.0)])
        await settle(schedd)
        for _ in range(50):
            if claim.state == RUNNING_JOB:
                break
            await asyncio.sleep(0.01)
        assert claim.state == RUNNING_JOB
        await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[
            exit_report(cid, 0, BytesSent=500, BytesRecvd=5, RemoteUserCpu=2.0)])
        text = texts["terminated"]
        assert "Usr 0 00:01:03, Sys 0 00:00:00  -  Run Remote Usage" in text
        assert "Usr 0 00:01:03, Sys 0 00:00:00  -  Total Remote Usage" in text
        for line in ("15  -  Run Bytes Sent By Job", "1500  -  Run Bytes Received By Job",
                     "15  -  Total Bytes Sent By Job", "1500  -  Total Bytes Received By Job"):
            assert f"\t{line}\n" in text, text
        assert schedd.state.run_so_far._runs == {}
        schedd.queue.store.close()

    asyncio.run(main())
