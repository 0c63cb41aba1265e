"""A schedd that died leaves its scheduler universe jobs running (a DAGMan lives on, orphaned); the
next schedd on the same spool kills them before it starts the jobs again, so one DAGMan runs a DAG,
never two."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from gridbus.agents.startd import proctree
from tests.unit.schedd.inproc import make_schedd, submit


def test_a_dead_schedd_s_local_job_is_killed_by_the_next_one(tmp_path: Path):
    spool = tmp_path / "spool"
    first = make_schedd(spool, local_jobs_as_self=True)
    cid = submit(first, owner=os.environ.get("USER", "root"), JobUniverse=7, Cmd="/bin/sh",
                 Arguments="-c 'sleep 60 & sleep 60'", Iwd=str(tmp_path))

    async def start() -> int:
        p = first.queue.proc(cid, 0)
        await first.local._start_local(p, first.queue.ad(p))
        return first.local._jobs[(cid, 0)].pid

    pid = asyncio.run(start())  # the loop ends, the process lives on: a schedd SIGKILLed
    try:
        assert os.path.exists(f"/proc/{pid}")
        second = make_schedd(spool, local_jobs_as_self=True)
        assert second.local.kill_leftovers() == 1
        deadline = time.monotonic() + 10
        while True:  # SIGKILLed: a zombie or reaped (asyncio's child watcher may reap it first)
            st = proctree.read_stat(pid)
            if st is None or st.state == "Z":
                break
            assert time.monotonic() < deadline, "the job was not killed"
            time.sleep(0.02)
        assert not any((spool / "local_jobs").iterdir())
        assert second.local.kill_leftovers() == 0  # nothing recorded any more
    finally:
        try:
            os.killpg(pid, 9)
        except ProcessLookupError:
            pass
