"""What may happen while a Submit is being committed (its transaction in the writer thread):

- the job runs and ends: claim reuse may start a new cluster's proc on a claim the moment the
  cluster is in memory. Its submit event still comes first in its log (a proc that had ended by the
  time the commit returned was gone from its cluster, and its submit event was never written: a
  DAG of 1,000 nodes once finished with 999 submit events in its nodes log);
- the client, its answer late, sends the Submit again with the same SubmissionId: it is answered
  with the cluster being committed, not given a second one;
- the commit fails: the cluster is kept (memory stays the truth) and written by the next commit,
  the answer says so, and the same SubmissionId then answers that cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gridbus.agents.schedd.shadows import RUNNING_JOB, Claim
from gridbus.classad import ExprTree
from gridbus.eventlog import JobEventLog, JobEventType
from gridbus.status import MethodError
from tests.unit.schedd.inproc import SLOT_AD, call, exit_report, make_schedd


class SlowDisk:
    """The job queue's writes wait until ``gate`` is set (at the latest when the block ends)."""

    def __init__(self, schedd: Any) -> None:
        self.gate = threading.Event()
        self.store = schedd.queue.store
        self.write = self.store.write
        self.store.write = self._write

    def _write(self, batch: object) -> None:
        assert self.gate.wait(10)
        self.write(batch)

    def __enter__(self) -> SlowDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()


@contextlib.asynccontextmanager
async def running(tmp_path: Path) -> AsyncIterator[Any]:
    """An in-process schedd whose commits come only when asked for; stopped at the end."""
    schedd = make_schedd(tmp_path / "spool", write_behind=3600.0)
    await schedd.setup()
    try:
        yield schedd
    finally:
        await schedd.commits.close()
        await schedd.user_logs.close()


def submit(schedd: Any, tmp_path: Path, count: int = 1, submission_id: str = "", **attrs: Any) -> asyncio.Task:
    ad = {"Cmd": "/bin/true", "Requirements": ExprTree("true"), "JobUniverse": 5, "Iwd": str(tmp_path), **attrs}
    return asyncio.create_task(schedd.submission.Submit(
        call("Submit"), Ad=ad, Procs=[], Count=count, Submit={}, SubmissionId=submission_id, ClusterId=0))


async def in_memory(schedd: Any) -> int:
    """The id of the first cluster once it is in memory (its commit under way)."""
    while not schedd.queue.clusters:
        await asyncio.sleep(0)
    return next(iter(schedd.queue.clusters))


def test_a_job_that_ends_before_its_submit_is_on_disk_has_its_submit_event_first(tmp_path: Path):
    log = tmp_path / "job.log"

    async def main() -> None:
        async with running(tmp_path) as schedd:
            with SlowDisk(schedd) as disk:
                submitting = submit(schedd, tmp_path, UserLog=str(log))
                cid = await in_memory(schedd)
                # Reused claim: the proc starts while the Submit's commit is in its thread...
                claim = Claim("c1", "startd@a", "slot1@a", "alice", dict(SLOT_AD), time.time() + 1e9)
                claim.job, claim.state, claim.jobs_run = (cid, 0), RUNNING_JOB, 1
                schedd.claims.by_id["c1"] = claim
                schedd.claims.by_job[(cid, 0)] = claim
                await schedd.state.job_started(cid, 0, remote_host="startd@a", slot="slot1@a", claim_id="c1")
                schedd.claims.changed(claim)
                # ...and ends at once.
                reporting = asyncio.create_task(
                    schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[exit_report(cid, 0)]))
                for _ in range(20):
                    await asyncio.sleep(0)
                assert not submitting.done()
                disk.gate.set()
                answer = await asyncio.wait_for(submitting, 10)
                await asyncio.wait_for(reporting, 10)
                assert answer["ClusterId"] == cid
                assert await schedd.user_logs.written(timeout=10)
                types = [e.type for e in JobEventLog(str(log)).events(0)]
                assert types == [JobEventType.SUBMIT, JobEventType.EXECUTE, JobEventType.JOB_TERMINATED]

    asyncio.run(main())


def test_a_submit_sent_again_while_the_first_is_committed_gets_the_same_cluster(tmp_path: Path):
    async def main() -> None:
        async with running(tmp_path) as schedd:
            with SlowDisk(schedd) as disk:
                first = submit(schedd, tmp_path, 2, "s-1")
                await in_memory(schedd)
                again = submit(schedd, tmp_path, 2, "s-1")
                for _ in range(20):
                    await asyncio.sleep(0)
                disk.gate.set()
                a, b = await asyncio.wait_for(asyncio.gather(first, again), 10)
                assert a["ClusterId"] == b["ClusterId"] and len(schedd.queue.clusters) == 1
                # And once it is on disk, from there.
                c = await asyncio.wait_for(submit(schedd, tmp_path, 2, "s-1"), 10)
                assert c["ClusterId"] == a["ClusterId"] and len(schedd.queue.clusters) == 1

    asyncio.run(main())


def test_a_submit_whose_commit_failed_says_its_cluster_is_kept_and_a_retry_finds_it(tmp_path: Path):
    async def main() -> None:
        async with running(tmp_path) as schedd:
            write = schedd.queue.store.write
            failures = [OSError("disk full")]

            def flaky(batch: object) -> None:
                if failures:
                    raise failures.pop()
                write(batch)

            schedd.queue.store.write = flaky
            with pytest.raises(MethodError) as failed:
                await submit(schedd, tmp_path, 1, "s-2")
            cid = next(iter(schedd.queue.clusters))
            assert f"cluster {cid} is kept" in failed.value.text and "s-2" in failed.value.text, failed.value.text
            again = await submit(schedd, tmp_path, 1, "s-2")
            assert again["ClusterId"] == cid and len(schedd.queue.clusters) == 1
            await schedd.commits.now()
            assert schedd.queue.store.submission("alice", "s-2") is not None  # on disk now

    asyncio.run(main())
