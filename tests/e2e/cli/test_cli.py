"""The installed `gridbus` command against a running pool (tests/e2e harness): submit, wait, q in its
layouts, status, history, rm, hold/release, and the one-line errors with their exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.pool import wait_for

pytestmark = pytest.mark.e2e

GRIDBUS = Path(sys.executable).with_name("gridbus")


def run(pool, *argv: str, cwd: Path | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(GRIDBUS), "--pool", pool.url, *argv], capture_output=True, text=True, timeout=60, cwd=cwd)
    if ok:
        assert done.returncode == 0, f"gridbus {' '.join(argv)} failed: {done.stderr}"
    return done


def test_submit_wait_q_status_history_rm(pool, tmp_path: Path):
    (tmp_path / "true.sub").write_text(
        "executable = /bin/true\nlog = true.log\nrequest_memory = 16MB\nbatch_name = quick\nqueue 3\n"
    )
    out = run(pool, "submit", "true.sub", cwd=tmp_path).stdout
    m = re.search(r"^3 job\(s\) submitted to cluster (\d+)\.$", out, re.M)
    assert m, out
    cluster = int(m.group(1))
    waited = run(pool, "wait", "-quiet", "-wait", "60", str(tmp_path / "true.log"))
    assert waited.stdout.strip() == "All jobs done."

    hist = wait_for("3 jobs in the history", lambda: run(pool, "history", str(cluster), "-af", "ProcId", "JobStatus", "ExitCode").stdout.split("\n")[:3] if len(run(pool, "history", str(cluster), "-af", "ProcId").stdout.split()) >= 3 else None, timeout=30)
    assert sorted(hist) == ["0 4 0", "1 4 0", "2 4 0"]

    (tmp_path / "held.sub").write_text("executable = /bin/sleep\narguments = 300\nhold = true\nqueue 2\n")
    held = int(re.search(r"cluster (\d+)", run(pool, "submit", "held.sub", cwd=tmp_path).stdout).group(1))

    q = run(pool, "q").stdout
    assert re.search(r"^-- Schedd: \S+ : \S+ @ \d\d/\d\d/\d\d \d\d:\d\d:\d\d$", q, re.M), q
    assert "OWNER    BATCH_NAME    SUBMITTED   DONE   RUN    IDLE   HOLD  TOTAL JOB_IDS" in q
    row = next(line for line in q.splitlines() if f"ID: {held}" in line)
    assert re.fullmatch(rf"guest\s+ID: {held}\s+\d+/\d+\s+\d\d:\d\d\s+_\s+_\s+_\s+2\s+2 {held}\.0-1", row), row
    assert "\nTotal for query: 2 jobs; 0 completed, 0 removed, 0 idle, 0 running, 2 held, 0 suspended\n" in q
    assert "Total for guest: 2 jobs; 0 completed, 0 removed, 0 idle, 0 running, 2 held, 0 suspended" in q
    assert "Total for all users: 2 jobs;" in q

    nobatch = run(pool, "q", "-nobatch").stdout
    assert " ID      OWNER            SUBMITTED     RUN_TIME ST PRI SIZE CMD" in nobatch
    lines = [line for line in nobatch.splitlines() if re.match(rf"\s*{held}\.\d", line)]
    assert len(lines) == 2 and all(re.search(r"  0\+00:00:00 H  0 .* sleep 300 {9}$", line) for line in lines), lines

    assert run(pool, "q", "-af", "ClusterId", "ProcId", "JobStatus", "Cmd").stdout.splitlines() == [
        f"{held} 0 5 /bin/sleep", f"{held} 1 5 /bin/sleep"]
    ads = json.loads(run(pool, "q", "-json").stdout)
    assert [(a["ClusterId"], a["ProcId"], a["HoldReasonCode"]) for a in ads] == [(held, 0, 15), (held, 1, 15)]
    totals = run(pool, "q", "-totals").stdout
    assert "OWNER" not in totals and "Total for query: 2 jobs;" in totals
    assert run(pool, "q", "-limit", "1", "-af", "ProcId").stdout.strip() in ("0", "1")
    assert "HoldReason = \"submitted on hold at user's request\"" in run(pool, "q", "-l", f"{held}.0").stdout

    released = run(pool, "release", f"{held}.1").stdout
    assert released.strip() == f"Job {held}.1 released"  # condor_release's words
    removed = run(pool, "rm", str(held)).stdout
    assert removed.strip() == f"All jobs in cluster {held} have been marked for removal"
    wait_for("an empty queue", lambda: "Total for query: 0 jobs;" in run(pool, "q").stdout, timeout=20)
    missing = run(pool, "rm", "99999", ok=False)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "99999" in missing.stderr

    status = run(pool, "status").stdout
    assert status.startswith("Name               OpSys      Arch   State     Activity LoadAv Mem    ActvtyTime\n")
    assert len([line for line in status.splitlines() if "@" in line and "LINUX" in line]) >= 5
    assert re.search(r"^\s+Total\s+\d+\s+\d+", status, re.M)
    names = run(pool, "status", "-af", "Name").stdout.split()
    assert len(names) >= 5 and all("@" in n for n in names)
    slots = json.loads(run(pool, "status", "-json").stdout)
    assert {s["MyType"] for s in slots} == {"Machine"}
    assert "Total" in run(pool, "status", "-total").stdout
    # -format takes expressions, as condor_status's does
    assert set(run(pool, "status", "-format", "%s|", "Name", "-format", "%d\n", "Cpus * 10").stdout.splitlines()) == {
        f"{s['Name']}|{s['Cpus'] * 10}" for s in slots}


def test_errors_are_one_line_with_exit_status_1(pool, tmp_path: Path):
    bad_url = "amqp://guest:guest@127.0.0.1:1/"
    done = subprocess.run([str(GRIDBUS), "--pool", bad_url, "q"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "amqp://guest@127.0.0.1:1/" in done.stderr
    (tmp_path / "typo.sub").write_text("excutable = /bin/false\nqueue\n")
    typo = run(pool, "submit", "typo.sub", cwd=tmp_path, ok=False)
    assert typo.returncode == 1 and typo.stdout == ""
    assert typo.stderr.splitlines() == [
        "WARNING: typo.sub: line 1: the line 'excutable = /bin/false' was unused by gridbus. Is it a typo?",
        "gridbus submit: typo.sub: no executable given: add 'executable = /path/to/program'"]
