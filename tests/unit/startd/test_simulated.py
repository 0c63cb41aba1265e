"""The scale-test starter: a job is a timer (a sleep job's own seconds), a stop ends it at once."""

from __future__ import annotations

import asyncio

import pytest

from gridbus.agents.startd.settings import StartdSettings
from gridbus.agents.startd.simulated import SimulatedStarter, runtime_of


def test_runtime_is_a_sleep_jobs_own_else_the_default():
    assert runtime_of({"Cmd": "/bin/sleep", "Arguments": "2.5"}, 7) == 2.5
    assert runtime_of({"Cmd": "sleep", "Args": "3"}, 7) == 3
    assert runtime_of({"Cmd": "/bin/true"}, 7) == 7
    assert runtime_of({"Cmd": "/bin/sleep", "Arguments": "forever"}, 7) == 7


def test_a_job_ends_with_exit_0_and_a_stopped_one_by_sigkill():
    async def main():
        exits = []
        st = SimulatedStarter(on_exit=exits.append, runtime=0.01)
        short = await st.start_async("a", {"Cmd": "/nonexistent"}, "slot1@t", {}, None)
        long = st.start("b", {"Cmd": "/bin/sleep", "Arguments": "600"}, "slot2@t", {}, None)
        await asyncio.wait_for(short.done, 5)
        assert set(st.running) == {"b"}
        st.stop(long, graceful=True, reason="vacate")
        await asyncio.wait_for(long.done, 1)
        return exits

    short, long = asyncio.run(main())
    assert short.exit["ExitCode"] == 0 and not short.exit["ExitBySignal"]
    assert long.exit == {**long.exit, "ExitBySignal": True, "ExitSignal": 9} and long.stop_reason == "vacate"


def test_the_knobs():
    from gridbus.config import Config

    cfg = Config.load(env={"GRIDBUS_STARTD_SIMULATE_JOBS": "true", "GRIDBUS_SIMULATED_JOB_RUNTIME": "4"})
    s = StartdSettings.from_config(cfg)
    assert s.simulate_jobs is True and s.simulated_runtime == 4.0


def test_it_spawns_nothing_beside_and_takes_a_sandbox_as_the_real_starter_does():
    from gridbus.agents.startd.job import StartFailed

    async def main():
        st = SimulatedStarter(on_exit=lambda job: None, runtime=600)
        assert not st.spawns_beside and not st.spawns_ahead and not st.shares_output({"Out": "o"}, {"Out": "o"})
        job = await st.start_async("a", {"Cmd": "/bin/true"}, "slot1@t", {}, None, sandbox="/execute/dir_1_t1")
        plain = await st.start_async("b", {"Cmd": "/bin/true"}, "slot2@t", {}, None)
        with pytest.raises(StartFailed) as failed:
            st.begin_beside({"Cmd": "/bin/true"}, "slot1@t", {}, None, after=job)
        st.cancel_successor(job)  # (nothing to cancel: no successor is spawned here)
        await st.shutdown()
        return job, plain, failed.value

    job, plain, failed = asyncio.run(main())
    assert job.sandbox and not plain.sandbox and job.successor is None
    assert "spawns nothing beside" in failed.reason and failed.code == 6
