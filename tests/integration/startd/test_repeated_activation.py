"""An activation the schedd asks again for (its answer never came) never runs the job twice."""

from __future__ import annotations

import pytest

from gridbus.console import Session
from tests.integration.startd.helpers import exit_report, startd_and_schedd, wait_until
from tests.integration.startd.test_jobs import claim_slot

pytestmark = pytest.mark.broker


def test_a_repeated_activation_of_a_job_that_ran_already_is_answered_not_run_again(amqp_url, tmp_path):
    job = {"ClusterId": 3, "ProcId": 0, "GlobalJobId": "fake#3.0#1", "Owner": "alice", "Cmd": "/bin/true",
           "Iwd": str(tmp_path)}
    with startd_and_schedd(amqp_url, tmp_path, num_slots=1) as (startd, _t, schedd), Session(amqp_url, timeout=10) as s:
        claim = claim_slot(s, startd, schedd)
        r = s.call(startd.address, "ActivateClaims", {"Activations": [{"ClaimId": claim, "JobAd": job}]})
        assert r.Results[0]["Status"] == 0, r.Results
        exit_report(schedd, claim)
        # The job ran and exited; the schedd, which never had the answer, asks again: same answer.
        r = s.call(startd.address, "ActivateClaims", {"Activations": [{"ClaimId": claim, "JobAd": job, "Repeat": True}]})
        assert r.Results[0]["Status"] == 0, r.Results
        assert startd.activation.counters["JobsStarted"] == 1
        # Not marked as a repeat (the job runs again, say after an eviction): it runs.
        r = s.call(startd.address, "ActivateClaims", {"Activations": [{"ClaimId": claim, "JobAd": job}]})
        assert r.Results[0]["Status"] == 0, r.Results
        wait_until(lambda: startd.activation.counters["JobsExited"] == 2)
        assert startd.activation.counters["JobsStarted"] == 2
