"""A claim's next job spawned while the job before it runs (STARTER_SPAWN_AHEAD): the successor is
made ready and execs the moment its predecessor exits, woken by the kernel; whatever the startd
does to the predecessor or the claim first (stop, suspend, withdraw, drain, release, its own stop)
takes the successor back before its exec, so it never runs where the start at the exit would not
have run it."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gridbus import classad
from gridbus.agents.startd import spawn
from gridbus.agents.startd.starter import Job, Starter
from tests.unit.startd.test_claims_without_broker import (
    DAEMON,
    SCHEDD,
    Schedd,
    claim_all,
    job,
    settled,
)
from tests.unit.startd.test_claims_without_broker import startd as simulated_startd
from tests.unit.startd.test_concurrent_spawn import ALLOW_ROOT

pytestmark = pytest.mark.skipif(not spawn.CONCURRENT, reason="the fast spawn's concurrent child is not built here")


def _devnull() -> tuple[int, int, int]:
    fd = os.open(os.devnull, os.O_RDWR)
    return fd, fd, fd


def _writer(marker: Path) -> list[str]:
    # The time of its exec, written by the successor itself.
    return ["/bin/sh", "-c", f"date +%s.%N > {marker}"]


def _begin(argv: list[str], after: int | None) -> spawn.Launching:
    return spawn.begin(argv, executable=argv[0], cwd=None, env={"PATH": "/usr/bin:/bin"}, fds=_devnull(),
                       account=ALLOW_ROOT.account_for(None), after=after)


# ---------------------------------------------------------------------- the spawn


def test_a_successor_execs_only_once_its_predecessor_has_exited(tmp_path):
    marker = tmp_path / "ran"
    began = time.time()
    pred = _begin(["/bin/sleep", "0.4"], None).result()
    pidfd = os.pidfd_open(pred.pid)
    try:
        after = _begin(_writer(marker), pidfd)
        time.sleep(0.2)
        assert not select.select([after.fileno()], [], [], 0)[0] and not marker.exists()  # ready, waiting
        os.waitpid(pred.pid, 0)
        assert after.result().pid == after.pid  # exec'd
        os.waitpid(after.pid, 0)
    finally:
        os.close(pidfd)
    assert float(marker.read_text()) >= began + 0.4  # (after the predecessor's sleep, never before)


def test_sigkill_takes_a_waiting_successor_before_its_exec(tmp_path):
    marker = tmp_path / "ran"
    pred = _begin(["/bin/sleep", "0.3"], None).result()
    pidfd = os.pidfd_open(pred.pid)
    try:
        after = _begin(_writer(marker), pidfd)
        os.kill(after.pid, signal.SIGKILL)
        after.result()  # its pipe closed: the outcome is known
        _, status = os.waitpid(after.pid, 0)
        os.waitpid(pred.pid, 0)
    finally:
        os.close(pidfd)
    time.sleep(0.1)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert not marker.exists()


WAITER = """
import os, sys, time
from gridbus import classad
from gridbus.agents.startd import spawn
from gridbus.agents.startd.accounts import RunAsPolicy, UserMap
root = RunAsPolicy(allow_runas_owner=False, allow_root_jobs=True,
                   user_map=UserMap.parse("*=root")).account_for(None)
null = os.open(os.devnull, os.O_RDWR)
def begin(argv, after=None):
    return spawn.begin(argv, executable=argv[0], cwd=None, env={}, fds=(null, null, null), account=root, after=after)
pred = begin(["/bin/sleep", "0.5"]).result()
succ = begin(["/bin/sh", "-c", "touch " + sys.argv[1]], os.pidfd_open(pred.pid))
print(pred.pid, succ.pid, flush=True)
time.sleep(60)
"""


def test_a_successor_dies_with_the_startd(tmp_path):
    """A startd killed while a successor waits never leaves it to start a job nobody watches,
    however soon after the spawn it dies."""
    marker = tmp_path / "ran"
    proc = subprocess.Popen([sys.executable, "-c", WAITER, str(marker)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout is not None
    pred, succ = (int(x) for x in proc.stdout.readline().split())
    proc.kill()
    proc.wait()
    succ_fd, pred_fd = os.pidfd_open(succ), os.pidfd_open(pred)
    try:
        assert select.select([succ_fd], [], [], 5)[0]  # gone, before its predecessor
        assert not select.select([pred_fd], [], [], 0)[0]
        assert select.select([pred_fd], [], [], 5)[0]
    finally:
        os.close(succ_fd)
        os.close(pred_fd)
    time.sleep(0.2)
    assert not marker.exists()


# ---------------------------------------------------------------------- the starter


def test_a_cancelled_successor_leaves_no_scratch_group_or_process(tmp_path, job_cgroups):
    async def main() -> tuple[Job, int]:
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None, cgroup=job_cgroups)
        try:
            pred = await starter.start_async("c", {"Cmd": "/bin/sleep", "Arguments": "5"}, "slot1@t", {}, None)
            beside = starter.begin_beside({"Cmd": "/bin/sh", "Arguments": f"-c 'touch {tmp_path}/ran'"},
                                          "slot1@t", {}, None, after=pred)
            assert pred.successor is beside
            pid = beside.launching.pid
            starter.stop(pred, graceful=False, reason="vacate")  # its successor first
            assert pred.successor is None and beside.cancelled
            await asyncio.wait_for(pred.done, 10)
            await asyncio.wait_for(asyncio.shield(beside.known), 10)
            await asyncio.sleep(0.05)  # (the abandon runs in the outcome's callback)
            return pred, pid
        finally:
            await starter.shutdown()

    pred, pid = asyncio.run(main())
    assert pred.exit is not None and not (tmp_path / "ran").exists()
    assert not os.path.exists(f"/proc/{pid}")
    assert os.listdir(tmp_path / "ex") == []
    if job_cgroups is not None:
        assert job_cgroups.leftovers() == []


# ---------------------------------------------------------------------- the startd


def startd(tmp_path: Path, schedd: Schedd) -> Any:
    """A startd running real processes (no cgroups: the process scan), root's jobs allowed."""
    return simulated_startd(tmp_path, schedd, simulate_jobs=False, allow_runas_owner=False, allow_root_jobs=True,
                            user_map=("*=root",))


def shell(proc: int, script: str, **attrs: Any) -> dict[str, Any]:
    return job(proc, Cmd="/bin/sh", Arguments=f"-c '{script}'", **attrs)


def ahead(cid: str, seq: int, ad: dict[str, Any]) -> dict[str, Any]:
    return {"ClaimId": cid, "Seq": seq, "JobAd": ad}


def events(schedd: Schedd) -> list[tuple[str, int]]:
    return [(r["Event"], r["ProcId"]) for r in schedd.reports if r["Event"] in ("exit", "activated", "execute")]


async def behind(s: Any, first: dict[str, Any], *queued: dict[str, Any]) -> str:
    """The startd's one claim running ``first``, with ``queued`` queued ahead behind it; its id."""
    cid = (await claim_all(s))[0]
    await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": cid, "JobAd": first}])
    s.activation.in_answer(SCHEDD, [], [ahead(cid, seq, ad) for seq, ad in enumerate(queued, 1)])
    return cid


def test_the_next_job_is_spawned_ahead_and_execs_at_the_exit(tmp_path):
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    marker = tmp_path / "ran1"

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = await behind(s, shell(0, "sleep 0.4"), shell(1, f"date +%s.%N > {marker}"))
            claim = s.claims.by_id[cid]
            assert claim.successor is not None and claim.ahead == []  # spawned, waiting
            assert os.path.exists(f"/proc/{claim.successor.beside.launching.pid}") and not marker.exists()
            await settled(lambda: ("exit", 1) in events(schedd))
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    assert events(schedd) == [("execute", 0), ("exit", 0), ("activated", 1), ("execute", 1), ("exit", 1)]
    assert next(r for r in schedd.reports if r["Event"] == "activated").get("Ahead") is True
    assert [r["ExitCode"] for r in schedd.reports if r["Event"] == "exit"] == [0, 0]
    assert marker.exists()


@pytest.mark.parametrize("action", ["WithdrawActivation", "DeactivateClaim", "ReleaseClaim", "Drain",
                                    "SuspendClaim", "the startd's stop"])
def test_whatever_the_startd_does_first_takes_the_successor_back(tmp_path, action):
    """Job 1 waits, spawned ahead of job 0's exit; then the action. Withdrawn, it never runs and
    job 2 runs next; deactivated, job 0 is evicted and job 1 starts anew at that exit, as without
    spawning ahead; released, drained or stopped with the startd, the claim runs nothing more;
    suspended, job 1 is taken back and spawned again when job 0 continues."""
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    marker = tmp_path / "ran1"

    async def scenario() -> None:
        stopped = False
        await s.on_start()
        try:
            first = "sleep 0.6" if action in ("Drain", "SuspendClaim") else "sleep 30"
            cid = await behind(s, shell(0, first), shell(1, f"touch {marker}"), shell(2, "exit 0"))
            claim = s.claims.by_id[cid]
            waiting = claim.successor
            assert waiting is not None and waiting.ad["ProcId"] == 1
            if action == "WithdrawActivation":
                out = await s.activation.WithdrawActivation(DAEMON, ClaimId=cid, ClusterId=7, ProcId=1)
                assert out == {"Withdrawn": True}
                await s.activation.DeactivateClaim(DAEMON, ClaimId=cid, Graceful=False)
                await settled(lambda: ("exit", 2) in events(schedd))
            elif action == "DeactivateClaim":
                await s.activation.DeactivateClaim(DAEMON, ClaimId=cid, Graceful=False)
                await settled(lambda: ("exit", 2) in events(schedd))
            elif action == "ReleaseClaim":
                await s.claims.ReleaseClaim(DAEMON, ClaimId=cid)
            elif action == "Drain":
                await s.claims.Drain(DAEMON, HowFast="graceful", OnCompletion="nothing", Reason="test")
                assert claim.successor is None
                await settled(lambda: ("exit", 0) in events(schedd))
                await asyncio.sleep(0.1)
            elif action == "SuspendClaim":
                await s.activation.SuspendClaim(DAEMON, ClaimId=cid)
                assert claim.successor is None and waiting.beside.cancelled
                await s.activation.ContinueClaim(DAEMON, ClaimId=cid)
                again = claim.successor
                assert again is not None and again.ad["ProcId"] == 1 and again is not waiting
                await settled(lambda: ("exit", 2) in events(schedd))
            elif action == "the startd's stop":
                stopped = True
                await s.on_stop()
                # The stop waited for it: gone and reaped by then (its pipe is read no more after
                # the stop; on a loaded machine it was left an unreaped child).
                assert not os.path.exists(f"/proc/{waiting.beside.launching.pid}")
            if action != "SuspendClaim":
                assert waiting.beside.cancelled
            await settled(lambda: not os.path.exists(f"/proc/{waiting.beside.launching.pid}"))
        finally:
            if not stopped:
                await s.on_stop()

    asyncio.run(scenario())
    ran = [proc for event, proc in events(schedd) if event == "execute"]
    if action == "WithdrawActivation":
        assert ran == [0, 2] and not marker.exists()
    elif action in ("DeactivateClaim", "SuspendClaim"):
        assert ran == [0, 1, 2] and marker.exists()
    else:
        assert ran == [0] and not marker.exists()


def test_a_job_writing_the_running_jobs_output_is_not_spawned_ahead(tmp_path):
    """A successor opens (truncates) its output when it is spawned: one that shares the running
    job's output file starts at the exit instead, so the file holds its own output only."""
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    out = str(tmp_path / "out.txt")

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = await behind(s, shell(0, "echo first-job-output-that-is-long; sleep 0.3", Out=out),
                               shell(1, "echo two", Out=out))
            assert s.claims.by_id[cid].successor is None
            await settled(lambda: ("exit", 1) in events(schedd))
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    assert Path(out).read_text() == "two\n"


def test_a_successor_is_checked_as_at_its_start_and_a_refused_one_waits_for_the_exit(tmp_path):
    """Checked against the slot as the job will find it (the claim Idle, the job before it gone), a
    job that asks for an idle slot is spawned ahead; one the slot refuses is not, and is refused
    at its start, behind the exit, as without spawning ahead."""
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    idle_only = classad.ExprTree('TARGET.Activity == "Idle" && TARGET.JobId =?= undefined')

    async def scenario() -> tuple[bool, bool]:
        await s.on_start()
        try:
            cid = await behind(s, shell(0, "sleep 0.3"), shell(1, "sleep 0.3", Requirements=idle_only),
                               shell(2, "exit 0", Requirements=classad.ExprTree("false")))
            first = s.claims.by_id[cid].successor is not None
            await settled(lambda: ("execute", 1) in events(schedd))
            second = s.claims.by_id[cid].successor is not None
            await settled(lambda: ("activated", 2) in events(schedd))
            return first, second
        finally:
            await s.on_stop()

    assert asyncio.run(scenario()) == (True, False)
    assert [e for e in events(schedd) if e[0] != "execute"] == [("exit", 0), ("activated", 1), ("exit", 1), ("activated", 2)]
    refused = [r for r in schedd.reports if r["Event"] == "activated" and r["ProcId"] == 2]
    assert refused[0]["Status"] != 0 and "Requirements" in refused[0]["Text"]


def test_a_successor_that_fails_before_its_wait_starts_anew_at_the_exit(tmp_path):
    """Job 1's Iwd is made by job 0: spawned ahead, its child cannot enter it yet; it is started
    again at job 0's exit, as without spawning ahead, and runs (never held for a directory that
    exists by its start)."""
    schedd = Schedd()
    s = startd(tmp_path, schedd)
    made = tmp_path / "made-by-job-0"

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = await behind(s, shell(0, "sleep 0.3"), shell(1, "pwd > where", Iwd=str(made)))
            successor = s.claims.by_id[cid].successor
            assert successor is not None
            await settled(successor.beside.known.done)  # its child failed to enter the Iwd
            made.mkdir()  # (as job 0 would, before its exit)
            await settled(lambda: ("exit", 1) in events(schedd))
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    exit1 = [r for r in schedd.reports if r["Event"] == "exit" and r["ProcId"] == 1][0]
    assert exit1.get("ExitCode") == 0 and "HoldReason" not in exit1
    assert (made / "where").read_text().strip() == str(made)


def test_a_stop_naming_a_job_that_has_exited_leaves_the_next_job_running(tmp_path):
    """The schedd stops a job it holds or removes by naming it: by then the job may have exited
    and the next one queued ahead started behind its exit. Only the job named is stopped, so
    that next job is not evicted (and run again) for another job's hold. Unnamed, the stop takes
    whatever the claim runs, as before."""
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> None:
        await s.on_start()
        try:
            cid = await behind(s, shell(0, "exit 0"), shell(1, "sleep 30"), shell(2, "sleep 30"))
            claim = s.claims.by_id[cid]
            await settled(lambda: ("execute", 1) in events(schedd))
            running = claim.job
            assert running is not None and running.ad["ProcId"] == 1
            out = await s.activation.DeactivateClaim(DAEMON, ClaimId=cid, Graceful=False, ClusterId=7, ProcId=0)
            assert out == {"Stopped": False}
            assert claim.job is running and running.exit is None and os.path.exists(f"/proc/{running.pid}")
            out = await s.activation.DeactivateClaim(DAEMON, ClaimId=cid, Graceful=False, ClusterId=7, ProcId=1)
            assert out == {"Stopped": True} and running.exit is not None
            await settled(lambda: ("execute", 2) in events(schedd))
            out = await s.activation.DeactivateClaim(DAEMON, ClaimId=cid, Graceful=False)  # (unnamed)
            assert out == {"Stopped": True}
            await settled(lambda: ("exit", 2) in events(schedd))
        finally:
            await s.on_stop()

    asyncio.run(scenario())
    exits = {r["ProcId"]: r for r in schedd.reports if r["Event"] == "exit"}
    assert exits[0]["ExitCode"] == 0
    assert exits[1].get("Evicted") and exits[2].get("Evicted")
