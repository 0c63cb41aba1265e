"""Self-checkpointing jobs (HTCondor's checkpoint_exit_code), end to end on two startds: a job that
counts to N, checkpointing every k steps (it exits with its checkpoint code after each), is vacated
twice between checkpoints and restarts elsewhere each time from its last checkpoint, kept in the
schedd's spool; it finishes with every step counted exactly once, and its user log holds the
events HTCondor writes for it, read by htcondor2's JobEventLog."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from tests.e2e.pool import Pool, standard_pool, wait_for

SLOTS = {"GRIDBUS_NUM_SLOTS": "1", "GRIDBUS_NUM_CPUS": "1", "GRIDBUS_MEMORY": "1024"}
STEPS, EVERY, CODE = 12, 3, 85
STOPS = (5, 8)  # where the job waits to be vacated, once each (between two checkpoints)

# The job: resumes from saved-state if its input brought one; appends each step to steps.log;
# after every EVERY steps (but the last) it saves its count and exits with its checkpoint code.
# At a step of STOPS it waits to be vacated, the first time it gets there (a marker outside the
# sandbox says it was there already).
JOB = f"""#!/bin/sh
gate=$1
i=0
[ -f saved-state ] && i=$(cat saved-state)
echo "resuming after $i"
while [ $i -lt {STEPS} ]; do
  i=$((i + 1))
  echo "step $i" >> steps.log
  for stop in {' '.join(map(str, STOPS))}; do
    if [ $i -eq $stop ] && [ ! -e "$gate/stop-$i" ]; then
      echo $$ > "$gate/stop-$i"
      sleep 60
    fi
  done
  if [ $((i % {EVERY})) -eq 0 ] && [ $i -lt {STEPS} ]; then
    echo $i > saved-state
    exit {CODE}
  fi
done
echo done
"""


@pytest.fixture(scope="module")
def cpool(broker_url, mgmt, tmp_path_factory):
    with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("ckptpool"), "ckpt", slots=SLOTS,
                       schedd_env={"GRIDBUS_SPOOL_SWEEP_INTERVAL": "1"}) as pool:
        pool.start("startd", "b", **SLOTS)
        pool.wait_slots(2)
        yield pool


def _job(pool: Pool, cluster: int) -> dict:
    jobs = pool.jobs("schedd@s", f"ClusterId == {cluster}")
    return jobs[0] if jobs else {}


def _wait_at(gate: Path, step: int) -> int:
    """The job's process group, once it waits at ``step``."""
    return int(wait_for(f"the job waiting at step {step}", lambda: (gate / f"stop-{step}").exists()
                        and (gate / f"stop-{step}").read_text().strip(), 30, interval=0.05))


def _submit(pool: Pool, tmp_path: Path) -> tuple[int, Path, Path, Path]:
    """The counting job (condor_submit's attributes for checkpoint_exit_code = 85,
    transfer_checkpoint_files = saved-state, steps.log and transfer_output_files = steps.log),
    which may not restart where it last ran: (cluster, submit directory, gate, user log)."""
    submit_dir, gate = tmp_path / "submit", tmp_path / "gate"
    submit_dir.mkdir()
    gate.mkdir()
    job = submit_dir / "count.sh"
    job.write_text(JOB)
    os.chmod(job, 0o755)
    log = submit_dir / "job.log"
    cluster = pool.submit(
        "schedd@s", 1, cmd=str(job), args=str(gate), log=log, Iwd=str(submit_dir),
        requirements="TARGET.Name =!= MY.LastRemoteHost && TARGET.HasSelfCheckpointTransfers",
        ShouldTransferFiles="YES", WhenToTransferOutput="ON_EXIT", Out="job.out", Err="job.err",
        SuccessCheckpointExitCode=CODE, WantFTOnCheckpoint=True, TransferCheckpoint="saved-state, steps.log",
        TransferOutput="steps.log",
    )
    return cluster, submit_dir, gate, log


def _completed(pool: Pool, cluster: int, submit_dir: Path) -> dict:
    """The completed job, once it has counted every step exactly once."""
    done = wait_for("the job completed", lambda: next(iter(pool.history("schedd@s", f"ClusterId == {cluster}")), None),
                    60)
    assert done["JobStatus"] == 4 and done["ExitCode"] == 0, done
    # Every step once: the steps a stopped run made after its checkpoint were made again, from it.
    assert (submit_dir / "steps.log").read_text().splitlines() == [f"step {i}" for i in range(1, STEPS + 1)]
    return done


def _vacate_at(pool: Pool, cluster: int, gate: Path, step: int) -> str:
    """Wait for the job to wait at ``step``, note where it runs, vacate it; the host it ran on."""
    _wait_at(gate, step)
    host = wait_for("the job running", lambda: _job(pool, cluster).get("JobStatus") == 2
                    and _job(pool, cluster).get("RemoteHost"), 10)
    pool.call("schedd@s", "Vacate", {"Constraint": f"ClusterId == {cluster}", "Reason": "checkpoint test"})
    return str(host)


@pytest.mark.e2e
def test_a_vacated_self_checkpointing_job_restarts_elsewhere_from_its_checkpoint(cpool, tmp_path):
    from htcondor2 import FileTransferEventType, JobEventLog, JobEventType

    cluster, submit_dir, gate, log = _submit(cpool, tmp_path)
    spool = cpool.workdir / "schedd-s"
    hosts = [_vacate_at(cpool, cluster, gate, STOPS[0])]
    # The first checkpoint is in the schedd's spool (the vacated run's later steps are not).
    saved = list(spool.rglob(f"checkpoints/{cluster}/0/current/saved-state"))
    assert [p.read_text() for p in saved] == ["3\n"], saved
    hosts.append(_vacate_at(cpool, cluster, gate, STOPS[1]))

    done = _completed(cpool, cluster, submit_dir)
    # stdout is appended to across the restarts in place and travels with each checkpoint: each
    # checkpoint resumed from once.
    resumed = [f"resuming after {i}" for i in range(0, STEPS, EVERY)]
    assert (submit_dir / "job.out").read_text().splitlines() == [*resumed, "done"]
    # In-place restarts are no starts: three runs, on three claims.
    assert done["CheckpointNumber"] == 2 and done["NumJobStarts"] == 3, done

    events = [e for e in JobEventLog(str(log)).events(0)]
    types = [e.type for e in events]
    transfer, execute, evicted = JobEventType.FILE_TRANSFER, JobEventType.EXECUTE, JobEventType.JOB_EVICTED
    checkpoint = [transfer, transfer]
    assert types == [JobEventType.SUBMIT, execute, *checkpoint, evicted, execute, *checkpoint, evicted, execute,
                     *checkpoint, JobEventType.JOB_TERMINATED], types
    assert [e["Type"] for e in events if e.type == transfer] == [
        FileTransferEventType.OUT_STARTED, FileTransferEventType.OUT_FINISHED] * 3
    ran_on = [e["ExecuteHost"] for e in events if e.type == execute]
    assert ran_on[:2] == hosts and ran_on[1] != ran_on[0] and ran_on[2] != ran_on[1], ran_on
    # The checkpoints leave the spool with the job.
    wait_for("the job's checkpoints swept from the spool",
             lambda: not list(spool.rglob(f"checkpoints/{cluster}/0")), 20)


@pytest.mark.e2e
def test_a_self_checkpointing_job_whose_startd_crashed_restarts_elsewhere_from_its_checkpoint(cpool, tmp_path):
    from htcondor2 import JobEventLog, JobEventType

    cluster, submit_dir, gate, log = _submit(cpool, tmp_path)
    (gate / f"stop-{STOPS[1]}").write_text("0")  # one stop only: where its startd is killed
    group = _wait_at(gate, STOPS[0])
    host = _job(cpool, cluster).get("RemoteHost")
    startd = next(a["MyAddress"] for a in cpool.ads("Machine") if a.get("Name") == host)
    cpool.kill(startd)  # SIGKILL: no exit report; the claim's lease runs out at the schedd
    os.killpg(group, signal.SIGKILL)  # what a new startd would do to its predecessor's job
    done = _completed(cpool, cluster, submit_dir)
    assert done["LastRemoteHost"] != host and done["CheckpointNumber"] >= 1, done
    types = [e.type for e in JobEventLog(str(log)).events(0)]
    assert types.count(JobEventType.JOB_EVICTED) == 1 and types.count(JobEventType.EXECUTE) == 2, types


@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="running the owner's shadow and the job as nobody needs root")
def test_as_another_account_the_checkpoint_is_written_and_read_back_by_the_owner_s_shadow(broker_url, mgmt,
                                                                                          tmp_path_factory):
    """Owners map to nobody: the owner's shadow writes each checkpoint into the spool as nobody,
    reads it back as nobody for the restart, and the job resumes from it."""
    nobody = pwd.getpwnam("nobody")
    as_nobody = {"GRIDBUS_USER_MAP": "*=nobody", "GRIDBUS_STARTER_ALLOW_ROOT_JOBS": "false"}
    d = Path(tempfile.mkdtemp(prefix="gridbus-ckpt-", dir="/tmp"))  # passable by nobody, unlike pytest's
    try:
        os.chmod(d, 0o755)
        (d / "spool").mkdir(mode=0o755)
        (d / "gate").mkdir(mode=0o777)
        submit_dir = d / "submit"
        submit_dir.mkdir()
        job = submit_dir / "count.sh"
        job.write_text(JOB)
        os.chmod(job, 0o755)
        for path in (submit_dir, job):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        for step in STOPS:  # no stops: it only checkpoints
            (d / "gate" / f"stop-{step}").write_text("0")
        with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("ckptnobody"), "ckpt-nobody",
                           slots={**SLOTS, **as_nobody, "GRIDBUS_EXECUTE": str(d / "execute")},
                           schedd_env={**as_nobody, "GRIDBUS_SPOOL": str(d / "spool")}) as pool:
            cluster = pool.submit(
                "schedd@s", 1, cmd=str(job), args=str(d / "gate"), Iwd=str(submit_dir), ShouldTransferFiles="YES",
                WhenToTransferOutput="ON_EXIT", Out="job.out", Err="job.err", SuccessCheckpointExitCode=CODE,
                WantFTOnCheckpoint=True, TransferCheckpoint="saved-state, steps.log", TransferOutput="steps.log",
            )
            done = _completed(pool, cluster, submit_dir)
        checkpoints = len(range(EVERY, STEPS, EVERY))  # at 3, 6 and 9, numbered from 0; all in place
        assert done["CheckpointNumber"] == checkpoints - 1 and done["NumJobStarts"] == 1, done
        resumed = [f"resuming after {i}" for i in range(0, STEPS, EVERY)]
        assert (submit_dir / "job.out").read_text().splitlines() == [*resumed, "done"]
        assert os.stat(submit_dir / "steps.log").st_uid == nobody.pw_uid
    finally:
        shutil.rmtree(d, ignore_errors=True)
