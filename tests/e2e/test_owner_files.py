"""A job's files are touched by its owner's shadow, as the owner: a root schedd hands out
nothing and writes nothing its owner could not. Owners map to ``nobody`` here (USER_MAP)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from gridbus.classad import ExprTree
from tests.e2e.pool import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a root schedd is what this is about")


@pytest.fixture
def open_dir():
    d = Path(tempfile.mkdtemp(prefix="gridbus-owner-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_root_only_output_and_log_are_neither_read_nor_written(make_pool, open_dir):
    secret, log = open_dir / "secret", open_dir / "root.log"
    secret.write_text("root's secret\n")
    log.write_text("root's log\n")
    for f in (secret, log):
        os.chmod(f, 0o600)
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("schedd", "s", GRIDBUS_USER_MAP="*=nobody", GRIDBUS_STARTER_ALLOW_ROOT_JOBS="false")
    pool.wait_serving("collector@c", "schedd@s")
    s = pool.console()
    ad = {"Cmd": "/bin/true", "Iwd": str(open_dir), "JobUniverse": 5, "Requirements": ExprTree("true"),
          "RequestCpus": 1, "RequestMemory": 16, "Out": str(secret), "Err": str(secret), "UserLog": str(log)}
    cluster = s.call("schedd@s", "Submit", {"Ad": ad, "Count": 1}).check("Submit").ClusterId
    job = f"{cluster}.0"

    # The submit event could not go to the log as its owner: the job is held with HTCondor's
    # UnableToInitUserLog and a sentence saying so.
    held = wait_for("the job held for its user log", lambda: [
        j for j in pool.jobs("schedd@s", f"ClusterId == {cluster}", ["JobStatus", "HoldReason", "HoldReasonCode"])
        if j.get("JobStatus") == 5], 30)[0]
    assert held["HoldReasonCode"] == 22
    assert held["HoldReason"].startswith("Cannot write the user log: ") and str(log) in held["HoldReason"]
    assert "Permission denied" in held["HoldReason"]

    for which in ("Out", "Err", "UserLog"):
        r = s.call("schedd@s", "Fetch", {"Id": job, "File": which}, timeout=20)
        assert r.status == 6, (which, r.status, r.text)
        assert r.text.startswith("Fetch: ") and "Permission denied" in r.text and "cannot read" in r.text
        assert "root's" not in r.text and not r.outArgs.get("Data")

    assert secret.read_text() == "root's secret\n"
    assert log.read_text() == "root's log\n"
