"""The scheduler universe (DAGMan) runs a job under the account its owner's shadow runs as, the
run-as knobs included: in a personal pool started by root, root's DAGMan runs as the pool's
STARTER_UNPRIVILEGED_USER, as root's other jobs do (it used to be held: "will not run this job as
root")."""

from __future__ import annotations

import asyncio
import os
import pwd
from pathlib import Path

import pytest

from gridbus.agents.schedd.agent import Schedd
from gridbus.agents.schedd.owner_shadow import OwnerShadows
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.startd.accounts import Account, RunAsPolicy
from tests.unit.schedd.inproc import URL, Startds, submit

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing a job's account needs root")


def test_root_s_scheduler_universe_job_runs_as_the_unprivileged_user_its_shadow_runs_as(tmp_path: Path):
    nobody = pwd.getpwnam("nobody")
    policy = RunAsPolicy(unprivileged_user="nobody")  # what `gridbus pool up` as root configures
    seen: list[str] = []

    def account_for(owner: str) -> Account:
        seen.append(owner)
        return policy.account_for(owner)

    schedd = Schedd("t", URL, settings=ScheddSettings(spool=tmp_path / "spool", claim_worklife=1e9),
                    owner_shadows=OwnerShadows(account_for))
    schedd._client = Startds()  # type: ignore[assignment]
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    out = work / "id.out"
    cid = submit(schedd, owner="root", JobUniverse=7, Cmd="/bin/sh", Arguments="-c 'id -u; pwd'",
                 Out=str(out), Iwd=str(work))

    async def main() -> None:
        p = schedd.queue.proc(cid, 0)
        await schedd.local._start_local(p, schedd.queue.ad(p))
        await asyncio.wait_for(schedd.local._jobs[(cid, 0)].wait(), 10)

    asyncio.run(main())
    assert seen == ["root"]
    assert out.read_text().split() == [str(nobody.pw_uid), str(work)]  # it ran (not held), as nobody


def test_a_scheduler_universe_job_s_files_are_opened_only_where_its_account_may(tmp_path: Path):
    # A root schedd opens the job's Out for it: it must not append the output of a job that runs as
    # nobody to a file only root may write (a user's DAG naming /etc/cron.d/x as its output).
    policy = RunAsPolicy(unprivileged_user="nobody")
    schedd = Schedd("t", URL, settings=ScheddSettings(spool=tmp_path / "spool", claim_worklife=1e9),
                    owner_shadows=OwnerShadows(policy.account_for))
    schedd._client = Startds()  # type: ignore[assignment]
    private = tmp_path / "private"
    private.mkdir(mode=0o700)  # root's only
    target = private / "out"
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    bad = submit(schedd, owner="root", JobUniverse=7, Cmd="/bin/echo", Arguments="owned", Out=str(target),
                 Iwd=str(work))
    good = submit(schedd, owner="root", JobUniverse=7, Cmd="/bin/echo", Arguments="mine", Out="made.out",
                  Iwd=str(work))

    async def main() -> None:
        for cid in (bad, good):
            p = schedd.queue.proc(cid, 0)
            await schedd.local._start_local(p, schedd.queue.ad(p))
        await asyncio.wait_for(schedd.local._jobs[(good, 0)].wait(), 10)

    asyncio.run(main())
    held = schedd.queue.proc(bad, 0)
    assert held.status == 5 and f"nobody may not write Out file {target}" in held.get("HoldReason")
    assert not target.exists()
    made = work / "made.out"
    assert made.read_text() == "mine\n" and made.stat().st_uid == pwd.getpwnam("nobody").pw_uid
