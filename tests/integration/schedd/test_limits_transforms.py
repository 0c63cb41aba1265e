"""The schedd's submit limits and job transforms as a user of the Python API meets them, on the
real broker: a refused submit raises with condor_submit's sentence, a transformed job is queued
as transformed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.console import Schedd
from gridbus.rpc import CallFailed
from gridbus.status import Status
from gridbus.submit import Submit
from gridbus.transforms import parse


def test_a_user_meets_the_limits_sentence_and_the_transform(make_schedd, amqp_url, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    site = parse("JOB_TRANSFORM_Site", 'DEFAULT AccountingGroup "group_physics"\nSET Site "$(MY.Owner)-site"')
    make_schedd(max_jobs_per_submission=2, max_jobs_per_owner=3, job_transforms=(site,))
    with Schedd(url=amqp_url) as s:
        with pytest.raises(CallFailed) as err:
            s.submit(Submit("executable = /bin/true\nqueue 3\n"))
        assert err.value.result.status == Status.USER + 5
        assert err.value.result.text.startswith("Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION")
        result = s.submit(Submit("executable = /bin/true\nqueue 2\n"))
        with pytest.raises(CallFailed) as err:
            s.submit(Submit("executable = /bin/true\nqueue 2\n"))
        assert err.value.result.status == Status.USER + 4
        assert err.value.result.text.startswith("Number of submitted jobs would exceed MAX_JOBS_PER_OWNER")
        jobs = s.query(f"ClusterId == {result.cluster()}", ["AccountingGroup", "Site", "Owner"])
    assert len(jobs) == 2
    assert {(j["AccountingGroup"], j["Site"]) for j in jobs} == {("group_physics", f"{jobs[0]['Owner']}-site")}
