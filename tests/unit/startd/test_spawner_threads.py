"""The starter's launch on spawner threads (STARTER_SPAWN_THREADS > 0): same jobs, same failures,
nothing left unwatched when the startd stops during a launch."""

from __future__ import annotations

import asyncio
import os

import pytest

from gridbus.agents.startd.accounts import RunAsPolicy
from gridbus.agents.startd.starter import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    HOLD_IWD,
    Job,
    Starter,
    StartFailed,
)

ALLOW_ROOT = RunAsPolicy(allow_runas_owner=False, allow_root_jobs=True)


@pytest.mark.parametrize("threads", [0, 3])
def test_jobs_started_off_the_loop_run_and_exit(tmp_path, threads, job_cgroups):
    async def main():
        exits: list[Job] = []
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=exits.append, spawn_threads=threads,
                          cgroup=job_cgroups)
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


def test_start_failures_off_the_loop_carry_hold_reasons_and_leave_no_scratch(tmp_path):
    async def main():
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None, spawn_threads=2)
        try:
            with pytest.raises(StartFailed) as e:
                await starter.start_async("c", {"Cmd": "/no/such/program"}, "slot1@t", {}, None)
            assert e.value.code == HOLD_FAILED_TO_CREATE_PROCESS
            with pytest.raises(StartFailed) as e:
                await starter.start_async("c", {"Cmd": "/bin/true", "Iwd": str(tmp_path / "missing")}, "slot1@t", {}, None)
            assert e.value.code == HOLD_IWD
        finally:
            await starter.shutdown()
        assert os.listdir(tmp_path / "ex") == []

    asyncio.run(main())


class RecordingStarter(Starter):
    """Keeps every process it launched, to check what became of it."""

    launched: list = []

    def _launch(self, ad, slot, env_extra, memory_limit_mib=None):
        out = super()._launch(ad, slot, env_extra, memory_limit_mib)
        self.launched.append(out[0])
        return out


def test_a_cancelled_launch_does_not_leave_its_process_running(tmp_path):
    async def main():
        starter = RecordingStarter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None, spawn_threads=1)
        starter.launched = []
        task = asyncio.create_task(starter.start_async("c", {"Cmd": "/bin/sleep", "Arguments": "30"}, "slot1@t", {}, None))
        await asyncio.sleep(0)  # the launch is on its thread now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await starter.shutdown()  # waits for the launch, whose process is then killed and reaped
        return starter

    starter = asyncio.run(main())
    assert starter.running == {}
    assert [p.returncode for p in starter.launched] == [-9]
    assert os.listdir(tmp_path / "ex") == []
