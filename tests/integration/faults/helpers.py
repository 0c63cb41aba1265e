"""What the fault tests share: the pool's addresses, a job that must run twice, event-log counts."""

from __future__ import annotations

from pathlib import Path

from htcondor2 import JobEventLog, JobEventType

from tests.e2e.pool import Pool, wait_for

SCHEDD = "schedd@s"
STARTD = "startd@a"

# A job that is killed on its first run and succeeds on its second: each start appends a line to
# <dir>/runs; the first one then sleeps long enough to outlive any lease here.
RERUN_SCRIPT = """#!/bin/sh
runs="$(dirname "$0")/runs"
echo start >> "$runs"
if [ "$(wc -l < "$runs")" -gt 1 ]; then exit 0; fi
exec sleep 120
"""


def events(log: Path) -> list[tuple[JobEventType, int, int]]:
    if not log.exists():
        return []
    return [(e.type, e.cluster, e.proc) for e in JobEventLog(str(log)).events(0)]


def count(log: Path, kind: JobEventType, cluster: int | None = None) -> int:
    return sum(1 for t, c, _p in events(log) if t == kind and (cluster is None or c == cluster))


def slot_states(pool: Pool) -> dict[str, tuple[str, str]]:
    return {a["Name"]: (a.get("State"), a.get("Activity")) for a in pool.ads("Machine", f'MyAddress == "{STARTD}"')}


def all_unclaimed(pool: Pool) -> dict | None:
    states = slot_states(pool)
    return states if len(states) == 2 and all(s == ("Unclaimed", "Idle") for s in states.values()) else None


def rerun_job(pool: Pool, tmp_path: Path, log: Path) -> int:
    job_dir = tmp_path / "rerun"
    job_dir.mkdir()
    script = job_dir / "job.sh"
    script.write_text(RERUN_SCRIPT)
    script.chmod(0o755)
    return pool.submit(SCHEDD, 1, cmd="/bin/sh", args=str(script), log=log)


def runs(tmp_path: Path) -> int:
    f = tmp_path / "rerun" / "runs"
    return len(f.read_text().splitlines()) if f.exists() else 0


def completed_once(pool: Pool, cluster: int, log: Path) -> dict:
    """The job's one history record, after the pool has settled: no claim left, nothing in the queue."""
    hist = wait_for(f"job {cluster}.0 in the history", lambda: pool.history(SCHEDD, f"ClusterId == {cluster}"), 60)
    wait_for("every slot unclaimed again", lambda: all_unclaimed(pool), 30)
    # Settled: late or repeated exit reports have been answered; nothing may have been added since.
    hist = pool.history(SCHEDD, f"ClusterId == {cluster}")
    assert len(hist) == 1, hist
    assert pool.jobs(SCHEDD, f"ClusterId == {cluster}") == []
    # The owner's shadow writes the job's events after their commit: the log is waited for, as
    # condor_wait does (a loaded run had the history and the slots settled before the log).
    wait_for(f"job {cluster}.0's terminated event in {log}", lambda: count(log, JobEventType.JOB_TERMINATED, cluster), 30)
    assert count(log, JobEventType.JOB_TERMINATED, cluster) == 1, events(log)
    return hist[0]
