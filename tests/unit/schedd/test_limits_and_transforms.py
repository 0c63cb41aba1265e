"""The schedd's limits and job transforms, in an in-process schedd (no broker):

- MAX_JOBS_PER_SUBMISSION and MAX_JOBS_PER_OWNER refuse a Submit with condor_submit's sentence,
  nothing of it queued; MAX_JOBS_RUNNING stops Match and the resource requests, and claim reuse,
  logging HTCondor's "Reached MAX_JOBS_RUNNING: no more can run"; lowered, it vacates the excess;
- JOB_TRANSFORM_NAMES: the transforms change the queued jobs (every proc), before the
  SUBMIT_REQUIREMENT_NAMES checks, which see the transformed job; from the configuration too.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from gridbus.agents.schedd.limits import preempt_over_limit
from gridbus.agents.schedd.settings import ScheddSettings, SubmitRequirement
from gridbus.classad import ExprTree
from gridbus.config import Config
from gridbus.status import MethodError, Status
from gridbus.transforms import parse
from tests.unit.schedd.inproc import call, exit_report, make_schedd, run_on_claim, settle, submit

SL6_TO_DOCKER = """
   REQUIREMENTS JobUniverse==5 && WantSL6 && DockerImage =?= undefined
   SET  WantDocker = true
   SET  DockerImage = "SL6"
   SET  Requirements = TARGET.HasDocker && $(MY.Requirements)
"""


def _submit(schedd: Any, tmp_path: Path, count: int = 1, user: str = "alice", procs: list | None = None,
            **attrs: Any) -> Any:
    ad = {"Cmd": "/bin/true", "Requirements": ExprTree("TARGET.Memory > 1"), "JobUniverse": 5,
          "Iwd": str(tmp_path), **attrs}
    return schedd.submission.Submit(call("Submit", user=user), Ad=ad, Procs=procs or [], Count=count, Submit={},
                                    SubmissionId="", ClusterId=0)


async def _refusal(coro: Any) -> MethodError:
    with pytest.raises(MethodError) as err:
        await coro
    return err.value


def _in_queue(schedd: Any, owner: str) -> int:
    return sum(schedd.queue.counts.get(owner, ()))


def test_max_jobs_per_submission_refuses_the_whole_cluster(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", max_jobs_per_submission=3)
        err = await _refusal(_submit(schedd, tmp_path, 4))
        assert err.status == Status.USER + 5
        assert err.text.startswith("Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION")
        assert "4 jobs; the limit is 3" in err.text and _in_queue(schedd, "alice") == 0
        assert (await _submit(schedd, tmp_path, 3))["NumProcs"] == 3
        await schedd.commits.close()

    asyncio.run(main())


def test_max_jobs_per_owner_counts_the_owners_jobs_in_the_queue(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", max_jobs_per_owner=5)
        await _submit(schedd, tmp_path, 3)
        err = await _refusal(_submit(schedd, tmp_path, 3))
        assert err.status == Status.USER + 4
        assert err.text == ("Number of submitted jobs would exceed MAX_JOBS_PER_OWNER: alice has 3 jobs in "
                            "this schedd's queue and submits 3; the limit is 5")
        assert _in_queue(schedd, "alice") == 3
        await _submit(schedd, tmp_path, 3, user="bob")  # another owner has a count of their own
        await _submit(schedd, tmp_path, 2)  # up to the limit exactly
        assert _in_queue(schedd, "alice") == 5
        await _refusal(_submit(schedd, tmp_path, 1))
        await schedd.commits.close()

    asyncio.run(main())


def _matches(acid: int, n: int) -> list[dict[str, Any]]:
    return [{"AutoClusterId": acid, "ClaimId": f"c{i}", "Slot": f"slot{i}@a", "Startd": "startd@a"} for i in range(n)]


async def _requests(schedd: Any) -> list[dict[str, Any]]:
    out = await schedd.negotiation.GetResourceRequests(call("GetResourceRequests", user="negotiator"), Owner="alice",
                                                      Limit=10, After=-1, AutoClusterAttrs=[], WholeAds=False)
    return out["Requests"]


def test_max_jobs_running_stops_matches_requests_and_claim_reuse(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", max_jobs_running=2)
        await schedd.setup()
        submit(schedd, count=5)
        acid = (await _requests(schedd))[0]["AutoClusterId"]
        out = await schedd.negotiation.Match(call("Match", user="negotiator"), Matches=_matches(acid, 5))
        assert out["Accepted"] == 2
        await settle(schedd)
        assert len(schedd.claims.by_job) == 2
        with caplog.at_level(logging.WARNING, logger="gridbus.schedd.limits"):
            assert await _requests(schedd) == []
            await _requests(schedd)
        assert [r.getMessage() for r in caplog.records] == ["Reached MAX_JOBS_RUNNING: no more can run"]
        assert (await schedd.negotiation.Match(call("Match", user="negotiator"), Matches=_matches(acid, 1))
                )["Accepted"] == 0
        await schedd.commits.close()

    asyncio.run(main())


def test_a_claim_is_not_reused_past_max_jobs_running(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool")
        await schedd.setup()
        cid = submit(schedd, count=3)
        await run_on_claim(schedd, cid, 0, "c1")
        await run_on_claim(schedd, cid, 1, "c2")
        schedd.settings.max_jobs_running = 1
        report = exit_report(cid, 0, "c1", ClaimEnded=False)
        await schedd.reports.JobReports(call("JobReports", user="startd"), Reports=[report])
        await settle(schedd)
        methods = [m for _a, m, _args in schedd._client.calls]
        assert "ReleaseClaim" in methods and "c1" not in schedd.claims.by_id
        assert schedd.queue.status(cid, 2) == 1  # still Idle: the claim was not reused for it
        await schedd.commits.close()

    asyncio.run(main())


def test_lowering_max_jobs_running_vacates_the_excess(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool")
        await schedd.setup()
        cid = submit(schedd, count=3)
        for p in range(3):
            await run_on_claim(schedd, cid, p, f"c{p}")
        schedd.settings.max_jobs_running = 1
        assert await preempt_over_limit(schedd.claims, schedd.settings) == 2
        vacated = [args for _a, m, args in schedd._client.calls if m == "DeactivateClaim"]
        assert len(vacated) == 2 and all(a["Graceful"] for a in vacated)
        assert await preempt_over_limit(schedd.claims, ScheddSettings(spool=tmp_path, max_jobs_running=3)) == 0
        await schedd.commits.close()

    asyncio.run(main())


def test_transforms_change_every_proc_before_the_submit_requirements(tmp_path: Path):
    async def main() -> None:
        transforms = (parse("JOB_TRANSFORM_SL6ToDocker", SL6_TO_DOCKER),
                      parse("JOB_TRANSFORM_Site", 'DEFAULT AccountingGroup strcat("group_", Owner)\n'
                                                  'SET RequestMemory 2048\nSET Owner "root"\nDELETE Scratch'))
        # A requirement only the transformed job meets.
        reqs = (SubmitRequirement("HasGroup", "AccountingGroup =!= undefined && TARGET.Name =!= undefined"),)
        schedd = make_schedd(tmp_path / "spool", job_transforms=transforms, submit_requirements=reqs)
        out = await _submit(schedd, tmp_path, procs=[{"RequestMemory": 1, "Scratch": 1}, {"RequestMemory": 2}],
                            WantSL6=True)
        cid = out["ClusterId"]
        for proc in (0, 1):
            job = schedd.queue.get(cid, proc)
            assert job["DockerImage"] == "SL6" and job["WantDocker"] is True
            assert str(job["Requirements"]) == "TARGET.HasDocker && TARGET.Memory > 1"
            assert job["RequestMemory"] == 2048 and "Scratch" not in job
            assert str(job["AccountingGroup"]) == 'strcat("group_",Owner)'
            assert job["Owner"] == "alice"  # what the schedd assigns, no transform changes
        # A job the first transform leaves alone is still changed by the second.
        plain = schedd.queue.get((await _submit(schedd, tmp_path))["ClusterId"], 0)
        assert "DockerImage" not in plain and plain["RequestMemory"] == 2048
        await schedd.commits.close()

    asyncio.run(main())


def test_a_transform_that_fails_refuses_the_submit(tmp_path: Path):
    async def main() -> None:
        broken = parse("JOB_TRANSFORM_Broken", "SET Requirements $(MY.Requirements) &&")
        schedd = make_schedd(tmp_path / "spool", job_transforms=(broken,))
        err = await _refusal(_submit(schedd, tmp_path))
        assert err.status == Status.USER + 6
        assert err.text.startswith("Failed to apply a required job transform: JOB_TRANSFORM_Broken line 1: "
                                   "SET Requirements: invalid expression")
        assert _in_queue(schedd, "alice") == 0
        await schedd.commits.close()

    asyncio.run(main())


def test_transforms_and_limits_from_the_configuration(tmp_path: Path):
    conf = tmp_path / "gridbus.toml"
    conf.write_text(
        'JOB_TRANSFORM_NAMES = "SL6ToDocker, Tag"\n'
        f"JOB_TRANSFORM_SL6ToDocker = '''{SL6_TO_DOCKER}'''\n"
        "JOB_TRANSFORM_Tag = '''\n  site = $(POOL)\n  SET Site \"$(site)\"\n'''\n"
        'POOL = "blue"\nMAX_JOBS_PER_OWNER = 7\nMAX_JOBS_RUNNING = 0\n')
    cfg = Config.load(conf, env={})
    settings = ScheddSettings.from_config(cfg, spool=tmp_path)
    assert [t.name for t in settings.job_transforms] == ["JOB_TRANSFORM_SL6ToDocker", "JOB_TRANSFORM_Tag"]
    assert settings.max_jobs_per_owner == 7 and settings.max_jobs_running == 0
    assert settings.job_transforms[1].apply({}) == {"Site": "blue"}
    assert dict((n, v) for n, v, _s in cfg.items())["JOB_TRANSFORM_TAG"].strip().startswith("site = $(POOL)")
    conf.write_text('JOB_TRANSFORM_NAMES = "Missing"\n')
    with pytest.raises(ValueError, match="JOB_TRANSFORM_NAMES names Missing but JOB_TRANSFORM_Missing is not set"):
        ScheddSettings.from_config(Config.load(conf, env={}), spool=tmp_path)


def test_the_scheduler_ad_says_its_limits(tmp_path: Path):
    schedd = make_schedd(tmp_path / "spool", max_jobs_running=9, max_jobs_per_owner=8, max_jobs_per_submission=7)
    ad = schedd.daemon_ad()
    assert (ad["MaxJobsRunning"], ad["MaxJobsPerOwner"], ad["MaxJobsPerSubmission"]) == (9, 8, 7)
    schedd.queue.store.close()


def test_a_reconfig_applies_the_transforms_and_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    conf = tmp_path / "gridbus.toml"
    conf.write_text("MAX_JOBS_RUNNING = 10\n")
    monkeypatch.setenv("GRIDBUS_CONFIG", str(conf))

    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool")
        schedd.config = Config.load(daemon="schedd")
        await schedd.setup()
        cid = submit(schedd, count=2)
        for p in range(2):
            await run_on_claim(schedd, cid, p, f"c{p}")
        conf.write_text('JOB_TRANSFORM_NAMES = "Tag"\n'
                        "JOB_TRANSFORM_Tag = '''\n  v = $(MY.Owner)\n  SET Tag \"$(v)\"\n'''\n"
                        "MAX_JOBS_RUNNING = 1\nMAX_JOBS_PER_OWNER = 50\n")
        applied = await schedd.reconfig()
        assert set(applied) == {"JOB_TRANSFORM_NAMES", "JOB_TRANSFORM_TAG", "MAX_JOBS_RUNNING", "MAX_JOBS_PER_OWNER"}
        assert schedd.settings.max_jobs_per_owner == 50 and len(schedd.settings.job_transforms) == 1
        await settle(schedd)  # the excess job is vacated
        assert [m for _a, m, _args in schedd._client.calls].count("DeactivateClaim") == 1
        job = schedd.queue.get((await _submit(schedd, tmp_path))["ClusterId"], 0)
        assert job["Tag"] == "alice"
        await schedd.commits.close()

    asyncio.run(main())


def test_a_factory_keeps_at_most_max_jobs_per_submission_in_the_queue(tmp_path: Path):
    """A cluster materialized late is not refused for its size: MAX_JOBS_PER_SUBMISSION bounds the
    procs its factory keeps in the queue at once, as HTCondor's."""

    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", max_jobs_per_submission=3)
        out = await _submit(schedd, tmp_path, 50, JobMaterializeMaxIdle=10)
        assert out["NumProcs"] == 50 and _in_queue(schedd, "alice") == 3
        schedd.settings.max_jobs_per_submission = 0
        err = await _refusal(_submit(schedd, tmp_path, 50, JobMaterializeMaxIdle=10))
        assert err.text.startswith("Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION")
        await schedd.commits.close()

    asyncio.run(main())


def test_procs_that_differ_in_what_a_transform_reads_are_transformed_each_as_itself(tmp_path: Path):
    """HTCondor transforms every job: a proc's own attributes decide for that proc."""

    async def main() -> None:
        big = parse("JOB_TRANSFORM_BigMem", 'REQUIREMENTS RequestMemory > 4000\nSET AccountingGroup "bigmem"\n'
                                             "DELETE Scratch\nSET Note \"$(MY.Args)\"")
        schedd = make_schedd(tmp_path / "spool", job_transforms=(big,))
        procs = [{"RequestMemory": 8000, "Args": "a"}, {"RequestMemory": 1000, "Args": "b"},
                 {"RequestMemory": 9000, "Args": "c"}]
        cid = (await _submit(schedd, tmp_path, procs=procs, Scratch=1))["ClusterId"]
        jobs = [schedd.queue.get(cid, p) for p in range(3)]
        assert [j.get("AccountingGroup") for j in jobs] == ["bigmem", None, "bigmem"]
        assert [j.get("Note") for j in jobs] == ["a", None, "c"]
        assert [str(j.get("Scratch")) for j in jobs] == ["undefined", "1", "undefined"]
        await schedd.commits.close()

    asyncio.run(main())
