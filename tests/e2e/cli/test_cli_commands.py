"""The installed `gridbus` command against one running pool shared by this module: q -run, q -hold,
q -autocluster (the schedd's own autoclusters), edit, analyze, userprio, drain, and a refusal
between two broker users. Each test checks the output and the exit status."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import start_standard
from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.e2e

GRIDBUS = Path(sys.executable).with_name("gridbus")


def run(url: str, *argv: str, cwd: Path | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(GRIDBUS), "--pool", url, *argv], capture_output=True, text=True, timeout=60, cwd=cwd)
    if ok:
        assert done.returncode == 0, f"gridbus {' '.join(argv)} failed ({done.returncode}): {done.stderr}"
    return done


def one_line_failure(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, done
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


@pytest.fixture(scope="module")
def pool(mgmt, broker_url, tmp_path_factory) -> Iterator[Pool]:
    """One pool for the module: collector, negotiator, schedd, a static and a partitionable startd."""
    vhost = f"gridbus-test-cli-commands-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    p = Pool(broker_url.with_vhost(vhost).url, tmp_path_factory.mktemp("cli-pool"))
    try:
        yield start_standard(p)
    finally:
        p.stop()
        mgmt.delete_vhost(vhost)


@pytest.fixture(scope="module")
def clusters(pool: Pool, tmp_path_factory) -> dict[str, int]:
    """Three clusters: two running sleeps, two held jobs, and four jobs no slot can run (two autoclusters)."""
    work = tmp_path_factory.mktemp("cli-jobs")
    (work / "jobs.sub").write_text(
        "executable = /bin/sleep\narguments = 120\nrequest_memory = 16MB\nbatch_name = runners\nqueue 2\n")
    (work / "held.sub").write_text("executable = /bin/sleep\narguments = 300\nhold = true\nqueue 2\n")
    # two queue statements, two autoclusters (different memory requests); no slot has 900 cpus
    (work / "stuck.sub").write_text(
        "executable = /bin/true\nrequirements = Cpus >= 900\nrequest_memory = 10MB\nqueue 3\n"
        "request_memory = 20MB\nqueue 1\n")
    ids = {}
    for name in ("jobs", "held", "stuck"):
        out = run(pool.url, "submit", f"{name}.sub", cwd=work).stdout
        ids[name] = int(re.search(r"submitted to cluster (\d+)\.", out).group(1))
    return ids


def test_q_run_lists_running_jobs_and_their_slots(pool: Pool, clusters: dict[str, int]):
    c = clusters["jobs"]
    out = wait_for("two running jobs in q -run",
                   lambda: (o := run(pool.url, "q", "-run").stdout).count(f" {c}.") == 2 and o, timeout=30)
    assert " ID      OWNER            SUBMITTED     RUN_TIME HOST(S)" in out
    rows = [line for line in out.splitlines() if re.match(rf"\s*{c}\.\d", line)]
    assert all(re.fullmatch(rf"\s*{c}\.[01]\s+guest\s+\d+/\d+\s+\d\d:\d\d\s+\d+\+\d\d:\d\d:\d\d slot\S+@\S+", r) for r in rows), rows
    assert re.search(r"^-- Schedd: \S+ : \S+ @ \d\d/\d\d/\d\d \d\d:\d\d:\d\d$", out, re.M)
    assert "\nTotal for query: 2 jobs; 0 completed, 0 removed, 0 idle, 2 running, 0 held, 0 suspended\n" in out
    assert "Total for guest: 8 jobs; 0 completed, 0 removed, 4 idle, 2 running, 2 held, 0 suspended" in out
    assert "Total for all users: 8 jobs;" in out


def test_q_hold_shows_why(pool: Pool, clusters: dict[str, int]):
    c = clusters["held"]
    out = run(pool.url, "q", "-hold").stdout
    assert " ID      OWNER          HELD_SINCE  HOLD_REASON" in out
    rows = [line for line in out.splitlines() if re.match(rf"\s*{c}\.\d", line)]
    assert len(rows) == 2 and all(r.endswith("submitted on hold at user's request") for r in rows), rows
    assert "Total for query: 2 jobs; 0 completed, 0 removed, 0 idle, 0 running, 2 held, 0 suspended" in out


def test_q_autocluster_uses_the_schedds_groups(pool: Pool, clusters: dict[str, int]):
    c = clusters["stuck"]
    groups = json.loads(run(pool.url, "q", "-autocluster", "-json", str(c)).stdout)
    assert sorted((g["JobCount"], g["RequestMemory"]) for g in groups) == [(1, 20), (3, 10)]
    assert all(isinstance(g["AutoClusterId"], int) for g in groups)
    assert sorted(j for g in groups for j in g["JobIds"]) == [f"{c}.{p}" for p in range(4)]
    table = run(pool.url, "q", "-autocluster", str(c)).stdout.splitlines()
    assert table[0] == " AUTO_ID  COUNT OWNER    CPUS  MEMORY     DISK REQUIREMENTS"
    assert sorted(re.split(r"\s+", line.strip())[1] for line in table[1:3]) == ["1", "3"]
    assert table[-1] == "2 autoclusters; 4 idle jobs"


def test_edit_sets_an_attribute_and_refuses_bad_values(pool: Pool, clusters: dict[str, int]):
    c = clusters["stuck"]
    out = run(pool.url, "edit", str(c), "JobPrio", "7").stdout
    assert out.strip() == 'Set attribute "JobPrio" for 4 matching jobs.'
    assert run(pool.url, "q", str(c), "-af", "JobPrio").stdout.split() == ["7"] * 4
    run(pool.url, "edit", f"{c}.0", "Project", '"gridbus"')
    assert run(pool.url, "q", f"{c}.0", "-af", "Project").stdout.strip() == "gridbus"
    bad = one_line_failure(run(pool.url, "edit", str(c), "ClusterId", "99", ok=False))
    assert bad.startswith("gridbus edit: ") and "ClusterId" in bad
    assert "say which jobs" in one_line_failure(run(pool.url, "edit", "JobPrio", "1", ok=False))


def test_analyze_explains_an_idle_job(pool: Pool, clusters: dict[str, int]):
    c = clusters["stuck"]
    out = run(pool.url, "analyze", f"{c}.0").stdout
    m = re.search(rf"^{c:03d}\.000:  Run analysis summary ignoring user priority\.  Of (\d+) slots on \d+ machines,$", out, re.M)
    assert out.startswith(f"The Requirements expression for job {c}.000 is\n") and m, out
    slots = int(m.group(1))
    assert slots >= 5
    assert re.search(rf"^\s+{slots} slots are rejected by your job's requirements$", out, re.M), out
    assert re.search(r"^\s+0 slots match and are willing to run your job$", out, re.M), out
    # condor_q's condition table: the condition no slot meets, with its count in condor_q's columns
    assert "        Slots\nStep   Matched  Condition\n----- --------- ---------\n[0]           0  Cpus >= 900\n" in out, out
    assert "No machines matched the job's constraints" in out
    # condor_q's spelling of the same, for every idle job of the cluster
    q = run(pool.url, "q", "-better-analyze", str(c)).stdout
    assert f"The Requirements expression for job {c}.000 is" in q and "No machines matched" in q, q
    assert "not a job id" in one_line_failure(run(pool.url, "analyze", "abc", ok=False))
    assert "99999.0" in one_line_failure(run(pool.url, "analyze", "99999.0", ok=False))


def test_userprio_lists_and_sets_factors(pool: Pool, clusters: dict[str, int]):
    out = wait_for("guest in userprio", lambda: "guest" in (o := run(pool.url, "userprio").stdout) and o, timeout=30)
    lines = out.splitlines()
    assert lines[0] == "User Name                      Effective Priority Priority Factor  In Use  Usage (wghted-hrs)"
    assert lines[1] == lines[-2] == f"{'-' * 30} {'-' * 18} {'-' * 15} {'-' * 7} {'-' * 19}"
    assert re.fullmatch(r"Number of users: \d+\s*", lines[-1])
    assert any(re.fullmatch(r"guest\S*\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\s+\d+\.\d\d", line) for line in lines), out
    assert run(pool.url, "userprio", "-setfactor", "guest", "5").stdout.strip() == "The priority factor of guest was set to 5"
    rows = json.loads(run(pool.url, "userprio", "-json").stdout)
    assert [r["PriorityFactor"] for r in rows if r["Name"].split("@")[0] == "guest"] == [5.0]
    assert "-setfactor takes a number" in one_line_failure(run(pool.url, "userprio", "-setfactor", "guest", "x", ok=False))


def test_another_user_may_not_hold_my_job(pool: Pool, clusters: dict[str, int], mgmt, broker_url):
    vhost = pool.url.rsplit("/", 1)[1]
    mgmt.put_user("bob", "pw-bob")
    try:
        mgmt.put_permissions(vhost, "bob", "^$", "^gridbus\\.rpc$", "^$")
        bob = broker_url.with_vhost(vhost).with_credentials("bob", "pw-bob").url
        c = clusters["held"]
        line = one_line_failure(run(bob, "hold", f"{c}.0", ok=False))
        assert line.startswith("gridbus hold: "), line
        assert f"bob may not hold job(s) {c}.0 (owner guest)" in line
        assert "only a job's owner or a queue super user (QUEUE_SUPER_USERS) may change a job" in line
        # nothing changed: the job is still guest's, still held by guest's own request
        assert run(pool.url, "q", f"{c}.0", "-af", "Owner", "JobStatus").stdout.strip() == "guest 5"
    finally:
        mgmt.delete_user("bob")


def test_drain_a_machine_then_cancel(pool: Pool, clusters: dict[str, int]):
    machine = run(pool.url, "status", "-af", "Machine").stdout.split()[0]
    out = run(pool.url, "drain", machine).stdout.strip()
    m = re.fullmatch(rf"Sent request to drain {re.escape(machine)} \(request id (\S+)\)", out)
    assert m, out
    wait_for("a draining slot", lambda: re.search(r"Drained|Retiring|Draining",
                                                  run(pool.url, "status", "-af", "State", "Activity").stdout), timeout=20)
    cancelled = run(pool.url, "drain", machine, "-cancel", "-request-id", m.group(1)).stdout.strip()
    assert cancelled == f"Sent request to cancel draining on {machine}"
    assert "no machine named no-such-host" in one_line_failure(run(pool.url, "drain", "no-such-host", ok=False))
