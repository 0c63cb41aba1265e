"""The fast spawn's child running beside the startd (x86-64, aarch64): the startd's loop takes each
outcome when the child's pipe says it is known, and jobs, failures and cancellations come out as
when the loop waited for each exec."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest

from gridbus.agents.startd import spawn
from gridbus.agents.startd.accounts import RunAsPolicy, UserMap
from gridbus.agents.startd.starter import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    HOLD_IWD,
    Job,
    Starter,
    StartFailed,
)

pytestmark = pytest.mark.skipif(not spawn.CONCURRENT, reason="the fast spawn's concurrent child is not built here")

# The tests run as root and their jobs have no Owner (or one with no account): mapped to root.
ALLOW_ROOT = RunAsPolicy(allow_runas_owner=False, allow_root_jobs=True, user_map=UserMap.parse("*=root"))


def test_jobs_started_together_run_and_exit_each_with_its_code(tmp_path, job_cgroups):
    async def main():
        exits: list[Job] = []
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=exits.append, cgroup=job_cgroups)
        try:
            jobs = await asyncio.gather(*(
                starter.start_async(f"c{i}", {"Cmd": "/bin/sh", "Arguments": f"-c 'exit {i}'"}, f"slot{i}@t", {}, None)
                for i in range(12)))
            await asyncio.wait_for(asyncio.gather(*(j.done for j in jobs)), 30)
            return jobs, exits
        finally:
            await starter.shutdown()

    jobs, exits = asyncio.run(main())
    assert sorted(j.exit["ExitCode"] for j in exits) == list(range(12))
    assert [j.exit["ExitCode"] for j in jobs] == list(range(12))
    assert len({j.pid for j in jobs}) == 12


def test_start_failures_carry_hold_reasons_and_leave_no_scratch(tmp_path):
    async def main():
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None)
        try:
            with pytest.raises(StartFailed) as e:
                await starter.start_async("c", {"Cmd": "/no/such/program"}, "slot1@t", {}, None)
            assert e.value.code == HOLD_FAILED_TO_CREATE_PROCESS and "No such file" in e.value.reason
            with pytest.raises(StartFailed) as e:
                await starter.start_async("c", {"Cmd": "/bin/true", "Iwd": str(tmp_path / "missing")}, "slot1@t", {}, None)
            assert e.value.code == HOLD_IWD
            assert starter.launcher.launching == set()
        finally:
            await starter.shutdown()
        assert os.listdir(tmp_path / "ex") == []

    asyncio.run(main())


def test_a_start_cancelled_before_the_exec_leaves_nothing_running(tmp_path, monkeypatch, job_cgroups):
    pids: list[int] = []
    begin = spawn.begin

    def recording_begin(*args, **kwargs):
        launching = begin(*args, **kwargs)
        pids.append(launching.pid)
        return launching

    monkeypatch.setattr(spawn, "begin", recording_begin)

    async def main():
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None, cgroup=job_cgroups)
        task = asyncio.create_task(starter.start_async("c", {"Cmd": "/bin/sleep", "Arguments": "30"}, "slot1@t", {}, None))
        while not pids:
            await asyncio.sleep(0)
        task.cancel()  # the start waits for the child's outcome now
        with pytest.raises(asyncio.CancelledError):
            await task
        await starter.shutdown()  # waits for the outcome; the job is then killed and reaped
        return starter

    starter = asyncio.run(main())
    assert starter.running == {}
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # killed and reaped: no such process, not even a zombie
    assert os.listdir(tmp_path / "ex") == []


def test_the_spawn_returns_before_the_child_execs_and_its_result_waits_for_the_exec(tmp_path):
    # The child's first step (a join: it writes "0" into each descriptor it is given) is made to
    # wait: the descriptor is a pipe whose buffer is full, so the write waits for a reader.
    from gridbus.agents.startd import _spawn

    reader, writer = os.pipe2(os.O_CLOEXEC)
    os.set_blocking(writer, False)
    filled = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filled += os.write(writer, b"x" * 65536)
    os.set_blocking(writer, True)
    launch = _spawn.spawn(b"/bin/true", [b"true"], [], None, (0, 1, 2), -1, -1, [], [writer])
    try:
        assert launch.poll() is None  # the caller goes on while its child is held before its exec
        assert launch.poll() is None
        got = b""
        while len(got) < filled + 1:  # the reads make room for the child's write
            got += os.read(reader, 65536)
        pid = launch.result()  # waits for the exec
        assert pid == launch.pid and got[filled:] == b"0"
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    finally:
        os.close(reader)
        os.close(writer)
        del launch  # (never freed while the child may still read its spec: it waits)


def test_a_fast_spawned_job_whose_join_write_fails_never_runs_and_is_held(tmp_path, hierarchy_for, monkeypatch):
    # The fast spawn's child writes into join files the startd opened for the group's life; a
    # write the kernel refuses there (the group gone, a migration refused) stops the child before
    # its exec. Played with a descriptor open read-only, which every write refuses.
    from gridbus.agents.startd import cgroups

    h = hierarchy_for("cgroup")
    ran = tmp_path / "ran"
    refusing = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    real = cgroups.JobCgroup.join_fds
    monkeypatch.setattr(cgroups.JobCgroup, "join_fds", lambda self: (*real(self), refusing))

    async def refused_start() -> StartFailed:
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None, cgroup=h)
        try:
            with pytest.raises(StartFailed) as e:
                await starter.start_async("c", {"Cmd": "/usr/bin/touch", "Arguments": str(ran)}, "slot1@t", {}, None)
            return e.value
        finally:
            await starter.shutdown()

    try:
        failed = asyncio.run(refused_start())
    finally:
        os.close(refusing)
    assert not ran.exists()
    assert failed.code == HOLD_FAILED_TO_CREATE_PROCESS
    assert "cannot put the job in its cgroup" in failed.reason and "Bad file descriptor" in failed.reason
