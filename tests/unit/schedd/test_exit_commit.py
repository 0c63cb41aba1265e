"""An exit report is answered only once it is on disk: a schedd that dies after answering loses
nothing, and one that dies before (its commit failed or never came) leaves the startd the report
to send again, so the job ends either way and never stays Running on a claim the startd renews."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest

from gridbus.agents.schedd.jobqueue import JobQueue, Proc
from gridbus.agents.schedd.jobstate import job_bytes, run_usage
from tests.unit.schedd.inproc import (
    call,
    event_texts,
    exit_report,
    make_schedd,
    run_on_claim,
    submit,
)

COMPLETED, RUNNING = 4, 2


def on_disk(spool: Path) -> tuple[dict[tuple[int, int], int], set[tuple[int, int]]]:
    """What a restarted schedd would load: job statuses, and the jobs in the history."""
    q = JobQueue(spool / "job_queue.sqlite3", "t")
    try:
        statuses = {p.key: p.status for p in q.procs()}
        history = {(c, p) for c, p in ((1, 0), (1, 1)) if q.store.history_ad(c, p) is not None}
        return statuses, history
    finally:
        q.store.close()


def test_an_answered_exit_is_on_disk(tmp_path: Path):
    async def main() -> None:
        # A write-behind far longer than the test: only a commit made before the answer counts.
        schedd = make_schedd(tmp_path, write_behind=3600.0)
        await schedd.setup()
        cid = submit(schedd)
        await run_on_claim(schedd, cid, 0)
        out = await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[exit_report(cid, 0)])
        assert out["Unknown"] == []
        # The schedd dies here, before any later commit: a reload finds the job finished.
        statuses, history = on_disk(tmp_path)
        assert (cid, 0) not in statuses and (cid, 0) in history
        schedd.queue.store.close()

    asyncio.run(main())


def test_an_exit_whose_commit_failed_is_not_acknowledged_and_its_resend_ends_the_job(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path, write_behind=3600.0)
        await schedd.setup()
        cid = submit(schedd)
        await run_on_claim(schedd, cid, 0)
        report = exit_report(cid, 0)

        def disk_full(batch: object) -> None:
            raise OSError("disk full")

        schedd.queue.store.write = disk_full  # type: ignore[method-assign]
        with pytest.raises(OSError):
            await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[report])
        # The schedd dies now. On disk the job still runs on its claim...
        statuses, history = on_disk(tmp_path)
        assert statuses[(cid, 0)] == RUNNING and not history
        schedd.queue.store.close()
        # ...and the restarted schedd, which the startd sends the unanswered report again, ends it.
        again = make_schedd(tmp_path, write_behind=3600.0)
        await again.setup()
        assert again.queue.get(cid, 0)["JobStatus"] == RUNNING and "c1" in again.claims.by_id
        await again.reports.JobReports(call("JobReports", user="startd"), Reports=[report])
        statuses, history = on_disk(tmp_path)
        assert (cid, 0) not in statuses and (cid, 0) in history
        again.queue.store.close()

    asyncio.run(main())


def test_the_terminated_event_gives_the_runs_transfer_bytes_from_the_jobs_side(tmp_path: Path):
    # HTCondor counts the bytes from the job's side, in the event and the job ad: the input the
    # shadow sent (the report's BytesSent) is what the job received, the output it took back what
    # the job sent.
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        texts = event_texts(schedd)
        cid = submit(schedd)
        await run_on_claim(schedd, cid, 0)
        await schedd.reports.JobReports(call("JobReports", user="startd"),
                                        Reports=[exit_report(cid, 0, BytesSent=5000136, BytesRecvd=606)])
        text = texts["terminated"]
        assert "\t606  -  Run Bytes Sent By Job\n" in text
        assert "\t5000136  -  Run Bytes Received By Job\n" in text
        assert "\t606  -  Total Bytes Sent By Job\n" in text
        assert "\t5000136  -  Total Bytes Received By Job\n" in text
        ad = schedd.queue.store.history_ad(cid, 0)
        assert ad is not None and (ad["BytesSent"], ad["BytesRecvd"]) == (606, 5000136)
        schedd.queue.store.close()

    asyncio.run(main())


def test_a_jobs_transferred_bytes_add_up_over_its_runs():
    # As HTCondor's shadow does (the previous runs' figures plus this run's); the times are the run's.
    earlier = {"BytesSent": 10.0, "BytesRecvd": 1000.0, "TransferInStarted": 5}
    usage = run_usage(cast(Proc, earlier), {"BytesSent": 1000, "BytesRecvd": 20, "TransferInStarted": 9})
    assert usage == {"BytesRecvd": 2000.0, "BytesSent": 30.0, "TransferInStarted": 9}
    assert job_bytes({"BytesSent": 1000, "BytesRecvd": 20}) == {"sent": 20, "received": 1000}
