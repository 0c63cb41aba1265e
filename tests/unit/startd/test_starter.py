"""The starter with real processes (no broker): argv, environment, files, exit, signals, memory,
process trees, and the run-as policy."""

from __future__ import annotations

import asyncio
import os
import pwd
import signal
import sys
import time

import pytest

from gridbus.agents.startd import proctree
from gridbus.agents.startd.accounts import RunAsPolicy, RunAsRefused
from gridbus.agents.startd.starter import (
    HOLD_FAILED_TO_CREATE_PROCESS,
    HOLD_IWD,
    Job,
    Starter,
    StartFailed,
)

ALLOW_ROOT = RunAsPolicy(allow_runas_owner=False, allow_root_jobs=True)


def run_jobs(tmp_path, policy, ads, *, killing_timeout=5.0, check=0.1, during=None, memory_mib=None):
    """Start each ad, optionally act while they run, and return the reaped Jobs (in start order)."""

    async def main():
        exits: list[Job] = []
        starter = Starter(str(tmp_path / "execute"), policy, killing_timeout=killing_timeout,
                          on_exit=exits.append, check_interval=check)
        monitor = asyncio.create_task(starter.monitor())
        try:
            jobs = [starter.start(f"claim{i}", ad, f"slot{i + 1}@test", {"OMP_NUM_THREADS": "1"}, memory_mib)
                    for i, ad in enumerate(ads)]
            if during is not None:
                await during(starter, jobs)
            await asyncio.wait_for(asyncio.gather(*(j.done for j in jobs)), 30)
            assert exits == jobs or sorted(id(j) for j in exits) == sorted(id(j) for j in jobs)
            return jobs
        finally:
            monitor.cancel()
            await starter.shutdown()

    return asyncio.run(main())


def test_argv_environment_iwd_files_and_exit_code(tmp_path):
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    (iwd / "in.txt").write_text("from stdin\n")
    script = (
        "import os, sys; print(repr(sys.argv[1:])); print(os.getcwd()); "
        "print(os.environ['GREETING'], os.environ['OTHER'], os.environ['_CONDOR_SCRATCH_DIR']); "
        "print(sys.stdin.read().strip()); print('to stderr', file=sys.stderr); sys.exit(3)"
    )
    ad = {
        "Cmd": sys.executable,
        "Arguments": f"-c '{script.replace(chr(39), chr(39) * 2)}' 'two words' \"dq\" ''",
        "Iwd": str(iwd),
        "Environment": "GREETING='hello world' OTHER=x",
        "In": "in.txt",
        "Out": "out.txt",
        "Err": str(tmp_path / "err.txt"),
        "ClusterId": 1,
        "ProcId": 0,
    }
    (job,) = run_jobs(tmp_path, ALLOW_ROOT, [ad])
    assert job.exit["ExitCode"] == 3 and job.exit["ExitBySignal"] is False
    out = (iwd / "out.txt").read_text().splitlines()
    assert out[0] == repr(["two words", '"dq"', ""])
    assert out[1] == str(iwd)
    assert out[2] == f"hello world x {job.scratch}"
    assert out[3] == "from stdin"
    assert (tmp_path / "err.txt").read_text() == "to stderr\n"
    assert job.exit["RemoteUserCpu"] >= 0 and job.exit["ResidentSetSize"] > 0 and job.exit["MemoryUsage"] >= 1
    assert job.exit["MemoryExceeded"] is False


def test_old_style_args_env_default_files_and_scratch_cleanup(tmp_path):
    ad = {"Cmd": "/bin/sh", "Args": "-c pwd>$OUTFILE;echo$IFS$A>>$OUTFILE", "Env": f"A=1;OUTFILE={tmp_path}/o"}
    (job,) = run_jobs(tmp_path, ALLOW_ROOT, [ad])
    assert job.exit["ExitCode"] == 0
    lines = (tmp_path / "o").read_text().splitlines()
    assert lines == [job.scratch, "1"]  # no Iwd: the job starts in its scratch directory

    deadline = time.monotonic() + 5
    while os.path.exists(job.scratch) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(job.scratch)


def test_signal_is_reported(tmp_path):
    ad = {"Cmd": "/bin/sh", "Arguments": "-c 'kill -SEGV $$'"}
    (job,) = run_jobs(tmp_path, ALLOW_ROOT, [ad])
    assert job.exit["ExitBySignal"] is True and job.exit["ExitSignal"] == signal.SIGSEGV
    assert "ExitCode" not in job.exit


def test_memory_limit_breach_is_reported(tmp_path):
    ad = {"Cmd": sys.executable, "Arguments": "-c 'import time; x = b\"x\" * (200 << 20); time.sleep(30)'",
          "RequestMemory": 50}
    (job,) = run_jobs(tmp_path, ALLOW_ROOT, [ad], memory_mib=50)
    assert job.memory_exceeded and job.exit["MemoryExceeded"] is True
    assert job.exit["ExitBySignal"] is True and job.exit["ExitSignal"] == signal.SIGKILL
    assert job.exit["HoldReasonCode"] == 34 and "memory limit of 50 megabytes" in job.exit["HoldReason"]
    assert job.exit["MemoryUsage"] > 50


def test_stopped_job_tree_is_gone_within_the_kill_timeout(tmp_path):
    # The shell ignores SIGTERM (and so do its children, it is inherited); one grandchild moves to
    # another process group. Everything must be gone after the kill timeout.
    ad = {"Cmd": "/bin/sh", "Arguments": "-c 'trap \"\" TERM; sleep 300 & setsid_not=1; "
          + f"{sys.executable} -c \"import os,time; os.setpgid(0,0); time.sleep(300)\" & sleep 300; wait'"}
    seen: dict[str, object] = {}

    async def during(starter, jobs):
        (job,) = jobs
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            procs = proctree.scan({job.pid}).get(job.pid, [])
            if len(procs) >= 4 and any(p.pgrp != job.pid for p in procs):
                break
            await asyncio.sleep(0.05)
        seen["before"] = len(proctree.scan({job.pid}).get(job.pid, []))
        t0 = time.monotonic()
        await starter.stop_and_wait(job, graceful=True, reason="deactivate")
        seen["elapsed"] = time.monotonic() - t0
        seen["after"] = proctree.scan({job.pid}).get(job.pid, [])

    (job,) = run_jobs(tmp_path, ALLOW_ROOT, [ad], killing_timeout=1.0, during=during)
    assert seen["before"] >= 4
    assert 0.9 <= seen["elapsed"] < 3.0  # SIGTERM was ignored: SIGKILL after the 1 s timeout
    assert seen["after"] == []
    assert job.exit["ExitBySignal"] and job.exit["ExitSignal"] == signal.SIGKILL and job.stop_reason == "deactivate"


def test_start_failures_carry_hold_reasons(tmp_path):
    async def main():
        starter = Starter(str(tmp_path / "ex"), ALLOW_ROOT, on_exit=lambda j: None)
        with pytest.raises(StartFailed) as e:
            starter.start("c", {"Cmd": "/no/such/program"}, "slot1@t", {}, None)
        assert e.value.code == HOLD_FAILED_TO_CREATE_PROCESS and "/no/such/program" in e.value.reason
        with pytest.raises(StartFailed) as e:
            starter.start("c", {"Cmd": "/bin/true", "Iwd": str(tmp_path / "missing")}, "slot1@t", {}, None)
        assert e.value.code == HOLD_IWD
        with pytest.raises(StartFailed, match="no Cmd"):
            starter.start("c", {}, "slot1@t", {}, None)
        with pytest.raises(StartFailed, match="unterminated"):
            starter.start("c", {"Cmd": "/bin/true", "Arguments": "'x"}, "slot1@t", {}, None)
        assert os.listdir(tmp_path / "ex") == []  # no scratch directory left behind

    asyncio.run(main())


@pytest.mark.skipif(os.geteuid() != 0, reason="the run-as policy only applies to a startd running as root")
def test_run_as_policy_refuses_root_and_unknown_owners():
    strict = RunAsPolicy()
    with pytest.raises(RunAsRefused, match="will not run this job as root.*no-such-user-xyz"):
        strict.account_for("no-such-user-xyz")
    with pytest.raises(RunAsRefused, match="Owner is root"):
        strict.account_for("root")
    assert strict.account_for("nobody").name == "nobody"  # the Owner's own account
    fallback = RunAsPolicy(unprivileged_user="nobody")
    assert fallback.account_for("no-such-user-xyz").name == "nobody"
    assert fallback.account_for("root").name == "nobody"
    with pytest.raises(RunAsRefused, match="has no account"):
        RunAsPolicy(unprivileged_user="no-such-user-xyz").account_for("x")
    assert RunAsPolicy(allow_root_jobs=True).account_for("root").uid == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="switching accounts needs root")
def test_job_runs_as_nobody_and_refusal_is_a_hold(tmp_path):
    nobody = pwd.getpwnam("nobody")
    os.chmod(tmp_path, 0o777)
    ad = {"Cmd": "/usr/bin/id", "Arguments": "-u", "Owner": "no-such-user-xyz", "Out": str(tmp_path / "id.txt")}
    (job,) = run_jobs(tmp_path, RunAsPolicy(unprivileged_user="nobody"), [ad])
    assert job.exit["ExitCode"] == 0
    assert (tmp_path / "id.txt").read_text().strip() == str(nobody.pw_uid)
    assert os.stat(tmp_path / "id.txt").st_uid == nobody.pw_uid

    async def refused():
        starter = Starter(str(tmp_path / "ex2"), RunAsPolicy(), on_exit=lambda j: None)
        with pytest.raises(StartFailed) as e:
            starter.start("c", ad, "slot1@t", {}, None)
        assert e.value.code == 23 and "STARTER_UNPRIVILEGED_USER" in e.value.reason

    asyncio.run(refused())
    # nobody may not write where only root may: refused before the job starts
    private = tmp_path / "private"
    private.mkdir(mode=0o700)

    async def no_write():
        starter = Starter(str(tmp_path / "ex3"), RunAsPolicy(unprivileged_user="nobody"), on_exit=lambda j: None)
        with pytest.raises(StartFailed, match="may not write") as e:
            starter.start("c", {**ad, "Out": str(private / "x")}, "slot1@t", {}, None)
        assert e.value.code == 7

    asyncio.run(no_write())
