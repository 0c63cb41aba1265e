"""A graceful stop of the schedd, without a broker: the last claim change is on disk, and nothing
touches the SQLite file after it is closed (no "Cannot operate on a closed database")."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import pytest

from gridbus.agents.schedd.agent import Schedd
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import Claim


def claim(claim_id: str) -> Claim:
    return Claim(claim_id, "startd@a", "slot1@a", "alice", {"Requirements": True}, time.time() + 600)


def stored_claims(spool: Path) -> set[str]:
    db = sqlite3.connect(str(spool / "job_queue.sqlite3"))
    try:
        return {row[0] for row in db.execute("SELECT claim_id FROM shadow_claims")}
    finally:
        db.close()


def test_claim_changes_made_while_stopping_are_in_the_last_commit(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)

    async def main() -> Schedd:
        # The URL is never dialled: setup() and stop() run without a connection.
        schedd = Schedd("t", "amqp://guest:guest@127.0.0.1:1/", settings=ScheddSettings(spool=tmp_path))
        await schedd.setup()
        first = claim("c1")
        schedd.claims.by_id["c1"] = first
        schedd.claims.changed(first)  # waits for the write-behind commit
        cancelled = asyncio.Event()

        async def ends_while_stopping() -> None:
            # Work that finishes as the stop cancels it (a claim dropped, another made), after
            # on_stop's commit: what used to be written by a timer firing after the close.
            try:
                await asyncio.Future()
            finally:
                cancelled.set()
                schedd.claims.drop(first)
                late = claim("c2")
                schedd.claims.by_id["c2"] = late
                schedd.claims.changed(late)

        schedd.spawn(ends_while_stopping(), "ends-while-stopping")
        await asyncio.sleep(0)  # let it start
        await schedd.stop()
        assert cancelled.is_set()
        assert not schedd.commits.pending
        # Give a timer the stop might have left behind the time to fire: it would log the error.
        await asyncio.sleep(max(0.05, 5 * schedd.settings.write_behind))
        await schedd.stop()  # a second stop is harmless
        return schedd

    asyncio.run(main())
    assert stored_claims(tmp_path) == {"c2"}
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not errors, [r.getMessage() for r in errors]
    assert not any("closed database" in r.getMessage() for r in caplog.records)


def test_a_commit_after_the_close_is_refused_not_lost_silently(tmp_path: Path):
    async def main() -> None:
        schedd = Schedd("t", "amqp://guest:guest@127.0.0.1:1/", settings=ScheddSettings(spool=tmp_path))
        await schedd.setup()
        await schedd.stop()
        schedd.commits.soon()  # a stray change after the stop schedules nothing
        assert not schedd.commits.pending
        with pytest.raises(RuntimeError, match="closed"):
            await schedd.commits.now()

    asyncio.run(main())


def test_claim_rows_and_the_job_queue_commit_in_one_transaction(tmp_path: Path):
    async def main() -> None:
        schedd = Schedd("t", "amqp://guest:guest@127.0.0.1:1/", settings=ScheddSettings(spool=tmp_path))
        await schedd.setup()
        writes_before = schedd.queue.store.writes
        cid = schedd.queue.new_cluster_id()
        schedd.queue.add_cluster(cid, "alice", {"Owner": "alice", "ClusterId": cid, "Cmd": "/bin/true"}, None, 2)
        c = claim("c1")
        schedd.claims.by_id["c1"] = c
        schedd.claims.changed(c)
        assert schedd.commits.pending  # one write-behind timer for both
        await schedd.commits.now()
        assert schedd.queue.store.writes == writes_before + 1
        assert stored_claims(tmp_path) == {"c1"}
        db = sqlite3.connect(str(tmp_path / "job_queue.sqlite3"))
        try:
            assert db.execute("SELECT COUNT(*) FROM procs WHERE cluster_id = ?", (cid,)).fetchone()[0] == 2
        finally:
            db.close()
        await schedd.stop()

    asyncio.run(main())
