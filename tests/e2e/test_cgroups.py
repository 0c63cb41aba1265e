"""Jobs in cgroups through a real pool: an OOM kill is a hold with code 34 and the peak; suspend,
continue and vacate from the CLI change the job's state, the processes' freezer state and the user
log (read by htcondor2's JobEventLog); a startd killed with SIGKILL leaves nothing running once
its successor serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gridbus.agents.startd import cgroups
from tests.e2e.pool import Pool, logged, wait_for

GRIDBUS = Path(sys.executable).parent / "gridbus"

GROW = """import time
chunks = []
for i in range(100):
    chunks.append(bytearray(4 << 20))
    rss = [int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('RssAnon:')][0]
    print(rss, flush=True)
    time.sleep(0.01)
time.sleep(60)
"""

# A job that leaves a daemon behind (double fork, setsid) and writes the pids it runs as.
SLEEPER = """import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1] + '.daemon', 'w').write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
open(sys.argv[1], 'w').write(str(os.getpid()))
time.sleep(300)
"""


def cli(pool: Pool, *argv: str, ok: bool = True) -> str:
    done = subprocess.run([str(GRIDBUS), "--pool", pool.url, *argv], capture_output=True, text=True, timeout=60)
    assert (done.returncode == 0) == ok, (argv, done.stdout, done.stderr)
    return done.stdout + done.stderr


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def frozen(pid: int) -> bool:
    """Whether the process's cgroup is frozen (its v1 freezer group, or its v2 group)."""
    rel = cgroups.group_of_pid(pid)
    assert rel and rel != "/", f"process {pid} is in no job cgroup"
    v1 = f"/sys/fs/cgroup/freezer{rel}/freezer.state"
    if os.path.exists(v1):
        return open(v1).read().strip() == "FROZEN"
    events = open(f"/sys/fs/cgroup/unified{rel}/cgroup.events").read()
    return "frozen 1" in events


def job(pool: Pool, cid: int, attrs: list[str]) -> dict:
    found = pool.jobs("schedd@s", f"ClusterId == {cid}", attrs)
    return found[0] if found else {}


def test_oom_hold_suspend_continue_vacate_and_a_killed_startd(make_pool, tmp_path):
    try:
        cgroups.probe(f"gridbus-test/probe{os.getpid()}").remove_base()
    except cgroups.CgroupError as exc:
        pytest.skip(f"no cgroups here: {exc}")
    import htcondor2

    pool = make_pool()
    startd_env = {"GRIDBUS_NUM_CPUS": "2", "GRIDBUS_MEMORY": "2048", "GRIDBUS_SLOT_TYPE_1": "100%",
                  "GRIDBUS_NUM_SLOTS_TYPE_1": "1", "GRIDBUS_SLOT_TYPE_1_PARTITIONABLE": "true"}
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "x", **startd_env)
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
    (slot,) = pool.wait_slots(1)
    assert slot["HasCgroup"] is True and slot["CgroupVersion"] in (1, 2)

    (tmp_path / "grow.py").write_text(GROW)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    pidfile = tmp_path / "sleeper.pid"
    log = tmp_path / "job.log"
    hog = pool.submit("schedd@s", 1, cmd=sys.executable, args=str(tmp_path / "grow.py"), RequestMemory=64,
                      Out=str(tmp_path / "grow.out"))
    sleeper = pool.submit("schedd@s", 1, cmd=sys.executable, args=f"{tmp_path / 'sleeper.py'} {pidfile}", log=log)

    # The kernel's limit is the request as the startd sizes it at activation (64 MiB rounded up to
    # 128, as HTCondor's default quantize gives a dynamic slot): an OOM kill, held with code 34.
    held = wait_for("the hog held", lambda: (j := job(pool, hog, ["JobStatus", "HoldReasonCode", "HoldReason",
                                                                  "MemoryUsage"])).get("JobStatus") == 5 and j, 30)
    reached_mib = int((tmp_path / "grow.out").read_text().split()[-1]) / 1024
    assert held["HoldReasonCode"] == 34 and "memory limit of 128 megabytes" in held["HoldReason"]
    assert f"Peak usage: {held['MemoryUsage']} megabytes" in held["HoldReason"]
    assert abs(held["MemoryUsage"] - reached_mib) <= 0.1 * reached_mib, (held, reached_mib)

    # Suspend, continue and vacate from the CLI.
    wait_for("the sleeper and its daemon running", lambda: pidfile.exists() and Path(f"{pidfile}.daemon").exists(), 30)
    pids = [int(pidfile.read_text()), int(Path(f"{pidfile}.daemon").read_text())]
    assert f"Job {sleeper}.0 suspended" in cli(pool, "suspend", f"{sleeper}.0")
    wait_for("JobStatus Suspended", lambda: job(pool, sleeper, ["JobStatus"]).get("JobStatus") == 7, 15)
    assert all(frozen(p) for p in pids)
    cli(pool, "continue", f"{sleeper}")
    wait_for("JobStatus Running", lambda: job(pool, sleeper, ["JobStatus"]).get("JobStatus") == 2, 15)
    assert not any(frozen(p) for p in pids)
    assert f"Job {sleeper}.0 already running" in cli(pool, "continue", f"{sleeper}.0", ok=False)  # condor_continue's words
    pidfile.unlink()
    Path(f"{pidfile}.daemon").unlink()
    cli(pool, "vacate_job", "-fast", f"{sleeper}.0")
    wait_for("the vacated job's processes gone", lambda: not any(alive(p) for p in pids), 15)
    wait_for("the job evicted and running again", lambda: job(pool, sleeper, ["NumJobStarts"]).get("NumJobStarts") == 2, 30)
    logged(log, htcondor2.JobEventType.JOB_EVICTED, 1)  # the log follows the job's state closely
    codes = [e.type for e in htcondor2.JobEventLog(str(log)).events(0)
             if e.type != htcondor2.JobEventType.IMAGE_SIZE]  # usage updates come when they come
    assert codes[:5] == [htcondor2.JobEventType.SUBMIT, htcondor2.JobEventType.EXECUTE,
                         htcondor2.JobEventType.JOB_SUSPENDED, htcondor2.JobEventType.JOB_UNSUSPENDED,
                         htcondor2.JobEventType.JOB_EVICTED], codes
    suspended = [e for e in htcondor2.JobEventLog(str(log)).events(0) if e.type == htcondor2.JobEventType.JOB_SUSPENDED]
    assert suspended[0]["NumberOfPIDs"] == 2

    # A startd killed with SIGKILL leaves its job running; its successor kills it before it serves.
    wait_for("the rerun's processes", lambda: pidfile.exists() and Path(f"{pidfile}.daemon").exists(), 30)
    pids = [int(pidfile.read_text()), int(Path(f"{pidfile}.daemon").read_text())]
    pool.kill("startd@x", signal.SIGKILL)
    assert all(alive(p) for p in pids)
    pool.start("startd", "x", **startd_env)
    wait_for("the new startd serving", lambda: _serves(pool, "startd@x"), 30)
    assert not any(alive(p) for p in pids)


def _serves(pool: Pool, address: str) -> bool:
    try:
        return pool.console().call(address, "GetSlots", {}, timeout=1).ok
    except Exception:
        pool._drop_session()
        return False
