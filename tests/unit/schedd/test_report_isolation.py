"""One JobReports entry that cannot be applied fails alone: the others in its batch are applied,
the answer is OK (so the startd does not send the bad one again for ever), the entry is listed
in Failed, and its job is held rather than left Running on a released claim."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.unit.schedd.inproc import call, exit_report, make_schedd, run_on_claim, submit

HELD = 5


def test_a_report_that_raises_fails_only_itself(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        bad, good = submit(schedd), submit(schedd)
        await run_on_claim(schedd, bad, 0, "c-bad")
        await run_on_claim(schedd, good, 0, "c-good")
        exited = schedd.state.job_exited

        async def breaks_on_bad(cluster: int, proc: int, report: dict) -> None:
            if cluster == bad:
                raise ValueError("a report this schedd cannot digest")
            await exited(cluster, proc, report)

        schedd.state.job_exited = breaks_on_bad  # type: ignore[method-assign]
        out = await schedd.reports.JobReports(call("JobReports", user="startd"),
                                      Reports=[exit_report(bad, 0, "c-bad"), exit_report(good, 0, "c-good")])
        assert [(f["ClaimId"], f["ClusterId"]) for f in out["Failed"]] == [("c-bad", bad)]
        assert "cannot digest" in out["Failed"][0]["Text"]
        assert schedd.queue.get(good, 0) is None and schedd.queue.finished_ad(good, 0)["JobStatus"] == 4
        held = schedd.queue.get(bad, 0)
        assert held["JobStatus"] == HELD and "exit report" in held["HoldReason"]
        assert "c-bad" not in schedd.claims.by_id and (bad, 0) not in schedd.claims.by_job
        await asyncio.sleep(0)
        await schedd.commits.close()

    asyncio.run(main())
