"""A spooled job's user log and its owner's share of the spool, as HTCondor keeps them: the log is
rewritten into the job's spool (SUBMIT_UserLog keeps the submitter's) and comes back, appended to
the submitter's log, at retrieval; MAX_SPOOL_MB_PER_OWNER refuses input past the owner's share
and holds the job (HoldReasonCode 32, MaxTransferInputSizeExceeded)."""

from __future__ import annotations

import os
from pathlib import Path

import htcondor2
import pytest

from gridbus.console.schedd import Schedd
from gridbus.errors import HTCondorException
from gridbus.submit import Submit
from tests.e2e.pool import standard_pool, wait_for

pytestmark = pytest.mark.e2e
SLOTS = {"GRIDBUS_NUM_SLOTS": "1", "GRIDBUS_NUM_CPUS": "1", "GRIDBUS_MEMORY": "1024"}


@pytest.fixture(scope="module")
def spool_pool(broker_url, mgmt, tmp_path_factory):
    with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("spoolpool"), "spool", slots=SLOTS,
                       schedd_env={"GRIDBUS_MAX_SPOOL_MB_PER_OWNER": "1"}) as pool:
        yield pool


def _types(path: Path) -> list[str]:
    return [e.type.name for e in htcondor2.JobEventLog(str(path)).events(0)]


def test_a_spooled_job_s_log_stays_in_the_spool_until_retrieval(spool_pool, tmp_path, monkeypatch):
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho done\n")
    os.chmod(tmp_path / "job.sh", 0o755)
    monkeypatch.chdir(tmp_path)
    schedd = Schedd("schedd@s", url=spool_pool.url)
    result = schedd.submit(Submit({"executable": "job.sh", "should_transfer_files": "YES", "output": "job.out",
                                   "log": "job.log"}), spool=True)
    cluster = result.cluster()
    schedd.spool(result)
    done = wait_for("the spooled job completed", lambda: [
        j for j in schedd.query(f"ClusterId == {cluster}", ["JobStatus", "Iwd", "UserLog", "SUBMIT_UserLog"])
        if j["JobStatus"] == 4], 60)[0]
    assert done["SUBMIT_UserLog"] == str(tmp_path / "job.log") and done["UserLog"] == "job.log"
    spooled = Path(done["Iwd"]) / "job.log"
    # Until retrieval the events after the input was spooled are in the spool, not at the submitter's path.
    wait_for("the terminated event in the spooled log", lambda: "JOB_TERMINATED" in _types(spooled), 30)
    assert _types(tmp_path / "job.log") == ["SUBMIT"]
    schedd.retrieve(f"ClusterId == {cluster}")
    kinds = _types(tmp_path / "job.log")
    assert kinds[0] == "SUBMIT" and kinds[-1] == "JOB_TERMINATED" and "EXECUTE" in kinds, kinds
    assert (tmp_path / "job.out").read_text() == "done\n"
    assert not spooled.exists()


def test_input_past_the_owner_s_spool_share_is_refused_and_holds_the_job(spool_pool, tmp_path, monkeypatch):
    (tmp_path / "big.bin").write_bytes(b"x" * (3 << 19))  # 1.5 MiB, over MAX_SPOOL_MB_PER_OWNER = 1
    monkeypatch.chdir(tmp_path)
    schedd = Schedd("schedd@s", url=spool_pool.url)
    result = schedd.submit(Submit({"executable": "/bin/true", "transfer_executable": "false",
                                   "transfer_input_files": "big.bin", "should_transfer_files": "YES"}), spool=True)
    with pytest.raises(HTCondorException, match="over MAX_SPOOL_MB_PER_OWNER = 1 MiB"):
        schedd.spool(result)
    (job,) = schedd.query(f"ClusterId == {result.cluster()}", ["JobStatus", "HoldReasonCode", "HoldReason"])
    assert (job["JobStatus"], job["HoldReasonCode"]) == (5, 32)
    assert "big.bin" in job["HoldReason"] and "MAX_SPOOL_MB_PER_OWNER" in job["HoldReason"]
