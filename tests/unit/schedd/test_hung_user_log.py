"""A user log that hangs (a hung NFS mount; here a FIFO nobody reads, which blocks its writer in
open()) stalls only that owner's later log text: the schedd answers other calls meanwhile, and
another owner's Submit is answered with its submit event in its own log."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from gridbus.classad import ExprTree
from tests.unit.schedd.inproc import call, make_schedd, run_on_claim, submit


def test_the_schedd_answers_while_a_user_log_write_hangs(tmp_path: Path):
    fifo = tmp_path / "bob.log"
    os.mkfifo(fifo)
    alice_log = tmp_path / "alice.log"

    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool")
        await schedd.setup()
        try:
            bob = submit(schedd, owner="bob", UserLog=str(fifo), Iwd=str(tmp_path))
            claim = await run_on_claim(schedd, bob, 0)  # its execute event goes to the FIFO
            claim.owner = "bob"
            deadline = time.monotonic() + 10
            while "bob" not in schedd.owner_shadows.running():
                assert time.monotonic() < deadline, "bob's shadow never started writing"
                await asyncio.sleep(0.01)
            assert not await schedd.user_logs.written(["bob"], timeout=0.2)  # the write hangs

            started = time.monotonic()
            parts = [p async for p in schedd.queries.Query(call("Query"), Constraint="true", Projection=["ClusterId"],
                                                   Limit=-1, Opts=0, Compact=False)]
            query_seconds = time.monotonic() - started
            assert len(parts[0]["Jobs"]) == 1
            ad = {"Cmd": "/bin/true", "Requirements": ExprTree("true"), "JobUniverse": 5, "Iwd": str(tmp_path),
                  "UserLog": str(alice_log)}
            answer = await asyncio.wait_for(
                schedd.submission.Submit(call("Submit"), Ad=ad, Procs=[], Count=1, Submit={}, SubmissionId="", ClusterId=0), 5)
            assert "000 (" in alice_log.read_text()  # alice's submit event, written meanwhile
            assert answer["NumProcs"] == 1
            assert not await schedd.user_logs.written(["bob"], timeout=0)  # still hanging
            print(f"Query answered in {query_seconds * 1000:.1f} ms while a user-log write hung")
        finally:
            # A reader releases the shadow's open(); then everything stops.
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            try:
                assert await schedd.user_logs.written(["bob"], timeout=10)
            finally:
                os.close(reader)
            await schedd.commits.close()
            await schedd.user_logs.close()

    asyncio.run(main())
