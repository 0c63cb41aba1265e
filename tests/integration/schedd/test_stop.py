"""A graceful stop of a schedd on the broker: the job queue and the last claim change are on
disk, and the log has no error (such as "Cannot operate on a closed database")."""

from __future__ import annotations

import logging
import sqlite3
import time

import pytest

from gridbus.agents.schedd.shadows import Claim
from tests.integration.schedd.conftest import job_ad


def test_graceful_stop_keeps_the_last_claim_change_and_logs_no_error(make_schedd, session, tmp_path,
                                                                      caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO)
    t = make_schedd("stop1", write_behind=0.05)
    answer = session.call(t.agent.address, "Submit", {"Ad": job_ad(tmp_path), "Count": 3}, timeout=10)
    assert answer.ok, answer.text
    cluster = answer.outArgs["ClusterId"]

    async def claim_then_change() -> None:
        schedd = t.agent
        c = Claim("c-last", "startd@x", "slot1@x", "guest", {"Requirements": True}, time.time() + 600)
        schedd.claims.by_id[c.claim_id] = c
        schedd.claims.changed(c)
        c.jobs_run = 7  # changed again just before the stop, inside the write-behind window
        schedd.claims.changed(c)

    t.call(claim_then_change())
    t.stop()

    db = sqlite3.connect(str(tmp_path / "spool-stop1" / "job_queue.sqlite3"))
    try:
        records = {cid: Claim.from_record(blob) for cid, blob in db.execute("SELECT claim_id, record FROM shadow_claims")}
        procs = db.execute("SELECT COUNT(*) FROM procs WHERE cluster_id = ?", (cluster,)).fetchone()[0]
    finally:
        db.close()
    assert procs == 3
    assert set(records) == {"c-last"} and records["c-last"].jobs_run == 7
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors
