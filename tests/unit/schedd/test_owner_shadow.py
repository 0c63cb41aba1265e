"""The owner's shadow (agents/schedd/owner_shadow.py): a user's files are read and written by a
process running as the owner, so a root schedd hands out nothing the owner could not read."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gridbus.agents.schedd import owner_shadow
from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowRefused
from gridbus.agents.startd.accounts import Account, RunAsPolicy, RunAsRefused, UserMap

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account needs root")


def _me(owner: str) -> Account:
    """Every owner acts as the test's own account."""
    return Account("me", os.geteuid(), os.getegid(), (), "/")


def _nobody(owner: str) -> Account:
    pw = pwd.getpwnam("nobody")
    return Account("nobody", pw.pw_uid, pw.pw_gid, (pw.pw_gid,), "/")


@pytest.fixture
def open_dir():
    """A directory others may enter (pytest's tmp_path is under a root-only directory)."""
    d = Path(tempfile.mkdtemp(prefix="gridbus-shadow-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@root_only
def test_a_root_only_file_is_neither_read_nor_written_and_each_refusal_is_a_sentence(open_dir):
    tmp_path = open_dir
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    os.chmod(secret, 0o600)
    public = tmp_path / "public"
    public.write_text("hello\n")
    os.chmod(public, 0o644)

    async def go() -> None:
        shadows = OwnerShadows(_nobody)
        try:
            assert await shadows.uid_of("alice") == pwd.getpwnam("nobody").pw_uid
            assert await shadows.read("alice", str(public), 0, 0, 100) == "hello\n"
            # The sentence names the account that tried: alice has no account here, nobody acts.
            with pytest.raises(ShadowRefused, match=r"alice \(as the Unix account nobody\) cannot read .*secret: Permission denied"):
                await shadows.read("alice", str(secret), 0, 0, 100)
            with pytest.raises(ShadowRefused, match=r"alice \(as the Unix account nobody\) cannot write .*secret: Permission denied"):
                await shadows.append("alice", str(secret), "appended\n")
            with pytest.raises(ShadowRefused, match="Permission denied"):
                await shadows.append("alice", str(tmp_path / "new.log"), "x")  # directory is root's
            # A shadow that dies is started again for the next request.
            pid = shadows.running()["alice"]
            os.kill(pid, 9)
            assert await shadows.read("alice", str(public), 0, 5, 100) == "hello"
            assert shadows.running()["alice"] != pid
            await shadows.retain([])  # alice has no running jobs: her shadow stops
            assert shadows.running() == {}
        finally:
            await shadows.stop_all()

    asyncio.run(go())
    assert secret.read_text() == "root's secret\n"
    assert not (tmp_path / "new.log").exists()


def test_a_schedd_that_is_not_root_runs_the_shadow_as_itself(tmp_path):
    log = tmp_path / "job.log"

    async def go() -> None:
        shadows = OwnerShadows(_me)
        try:
            await shadows.append("alice", str(log), "event 1\n")
            await shadows.append("alice", str(log), "event 2\n")
            assert await shadows.read("alice", str(log), -8, 0, 100) == "event 2\n"
            assert await shadows.uid_of("alice") == os.geteuid()
            with pytest.raises(ShadowRefused, match="No such file"):
                await shadows.read("alice", str(tmp_path / "missing"), 0, 0, 10)
        finally:
            await shadows.stop_all()

    asyncio.run(go())
    assert log.read_text() == "event 1\nevent 2\n"


@root_only
def test_an_owner_without_an_account_gets_no_shadow():
    policy = RunAsPolicy(user_map=UserMap.parse(["*=no-such-account-here"]))
    with pytest.raises(RunAsRefused):
        policy.account_for("alice")

    async def go() -> None:
        shadows = OwnerShadows(policy)
        with pytest.raises(ShadowRefused, match="no account to act as alice"):
            await shadows.read("alice", "/etc/hostname", 0, 0, 10)

    asyncio.run(go())


def test_a_shadow_with_a_transfer_expected_is_not_stopped_and_one_without_a_broker_refuses_transfers():
    async def go() -> None:
        shadows = OwnerShadows(_me)  # no broker URL: no transfer
        try:
            with pytest.raises(ShadowRefused, match="no broker"):
                await shadows.expect("alice", "tok", "in", {"Iwd": "/"})
            sh = shadows._shadow("alice")
            answer = await sh.request({"op": "expect", "token": "tok", "direction": "in", "spec": {"Iwd": "/"}})
            assert answer["ok"]
            assert (await sh.request({"op": "busy"}))["count"] == 1
            bad = await sh.request({"op": "expect", "token": "t2", "direction": "sideways", "spec": {}})
            assert not bad["ok"] and "direction in or out" in bad["error"]
            sh.queue = "amq.gen-pretend"  # as if connected: retain asks the shadow whether it is busy
            await shadows.retain([])
            assert "alice" in shadows.running()  # a transfer is expected: kept
            await sh.request({"op": "forget", "token": "tok"})
            await shadows.retain([])
            assert shadows.running() == {}
        finally:
            await shadows.stop_all()

    asyncio.run(go())


def test_a_shadow_asked_for_while_found_idle_is_kept_not_stopped_and_doubled(tmp_path):
    """The schedd stops an owner's shadow once the owner runs nothing; a request that waits for
    the shadow at that moment (a transfer's set-up behind a user-log line) keeps it: the check
    passes it by, and the request is answered by the same process, never by a second one started
    beside a stopping first."""
    log = tmp_path / "job.log"

    async def go() -> None:
        shadows = OwnerShadows(_me)
        try:
            await shadows.append("alice", str(log), "event 1\n")
            sh = shadows._shadows["alice"]
            first = shadows.running()["alice"]
            sh.queue = "q"  # as if connected for transfers: the idle check asks it whether it transfers
            check = asyncio.create_task(shadows.retain([]))  # alice runs nothing
            await asyncio.sleep(0)  # the check waits for the shadow's answer...
            asked = asyncio.create_task(shadows.append("alice", str(log), "event 2\n"))  # ...and this behind it
            await check
            await asked
            assert sh.starts == 1 and shadows.running() == {"alice": first}
            sh.queue = ""
            await shadows.retain([])  # nothing waits now: stopped
            assert shadows.running() == {}
        finally:
            await shadows.stop_all()

    asyncio.run(go())
    assert log.read_text() == "event 1\nevent 2\n"


def test_a_shadow_whose_schedd_is_gone_ends_quietly():
    """Its answers go nowhere (the schedd was killed): it ends as at the end of its requests,
    with no BrokenPipeError traceback in the schedd's log."""
    proc = subprocess.Popen([sys.executable, "-I", "-c", owner_shadow._CHILD_SOURCE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    try:
        proc.stdin.write(b'{"op": "whoami"}\n' * 3)
        proc.stdin.close()
    except BrokenPipeError:  # (it may have ended already)
        pass
    assert proc.wait(30) == 0
    assert proc.stderr.read() == b""
