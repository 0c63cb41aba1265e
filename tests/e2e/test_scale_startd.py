"""The scale-test startd (STARTD_SIMULATE_JOBS) in a pool with two schedds: hundreds of slots from
one startd, jobs that "run" as timers, fair share and claim reuse across the schedds, `gridbus q
-global` and `Collector.locateAll`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gridbus.console import Collector, DaemonType
from tests.e2e.pool import wait_for

GRIDBUS = Path(sys.executable).with_name("gridbus")
SLOTS = 300
SIM_STARTD = {"GRIDBUS_STARTD_SIMULATE_JOBS": "true", "GRIDBUS_NUM_CPUS": str(SLOTS),
              "GRIDBUS_NUM_SLOTS": str(SLOTS), "GRIDBUS_MEMORY": str(SLOTS * 64)}


def gridbus(pool, *argv: str) -> str:
    done = subprocess.run([str(GRIDBUS), "--pool", pool.url, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def running(pool, schedd: str) -> int:
    return len(pool.jobs(schedd, "JobStatus == 2", ["ProcId"]))


@pytest.fixture
def sim_pool(make_pool):
    p = make_pool()
    p.start("collector", "c")
    p.start("negotiator", "n", GRIDBUS_NEGOTIATOR_INTERVAL="2")
    p.start("schedd", "s1")
    p.start("schedd", "s2")
    p.start("startd", "sim", **SIM_STARTD)
    p.wait_serving("collector@c", "negotiator@n", "schedd@s1", "schedd@s2")
    p.wait_slots(SLOTS, timeout=60)
    return p


def test_two_schedds_share_a_simulated_pool_and_q_global_lists_both(sim_pool):
    p = sim_pool
    machines = p.ads("Machine")
    assert len(machines) == SLOTS and all(m.get("SimulatedJobs") is True for m in machines)
    # The command does not exist: a real startd would hold these jobs; this one runs nothing.
    long = {"cmd": "/nonexistent/sleep", "args": "600"}
    c1 = p.submit("schedd@s1", 200, owner="alice", **long)
    c2 = p.submit("schedd@s2", 200, owner="bob", **long)
    wait_for("every slot busy", lambda: running(p, "schedd@s1") + running(p, "schedd@s2") == SLOTS, timeout=60)
    # Fair share: two submitters of equal priority split the pool.
    r1, r2 = running(p, "schedd@s1"), running(p, "schedd@s2")
    assert abs(r1 - r2) <= SLOTS // 10, (r1, r2)

    located = Collector(p.url).locateAll(DaemonType.Schedd)
    assert sorted(ad["Name"] for ad in located) == ["s1", "s2"]

    out = gridbus(p, "q", "-global", "-allusers", "-totals")
    banners = re.findall(r"-- Schedd: (\S+) :", out)
    assert banners == ["s1", "s2"], out
    totals = [int(n) for n in re.findall(r"Total for all users: \d+ jobs; \d+ completed, \d+ removed, \d+ idle, (\d+) running", out)]
    assert totals == [r1, r2], out

    # Claim reuse on each schedd: the long jobs go; 600 short ones run on the claims they held.
    matches_before = p.negotiator_stats().get("TotalMatches", 0)
    for schedd, cluster in (("schedd@s1", c1), ("schedd@s2", c2)):
        p.call(schedd, "Remove", {"Ids": [], "Constraint": f"ClusterId == {cluster}", "Reason": "done"})
    short = {"cmd": "/nonexistent/sleep", "args": "0.05"}
    d1 = p.submit("schedd@s1", 300, owner="alice", **short)
    d2 = p.submit("schedd@s2", 300, owner="bob", **short)
    for schedd, cluster in (("schedd@s1", d1), ("schedd@s2", d2)):
        wait_for(f"{schedd}'s short jobs to finish", lambda s=schedd, c=cluster: not p.jobs(s, f"ClusterId == {c}", ["ProcId"]),
                 timeout=90)
        done = p.history(schedd, f"ClusterId == {cluster}", ["ExitCode", "JobStatus"])
        assert len(done) == 300 and all(j.get("ExitCode") == 0 and j.get("JobStatus") == 4 for j in done)
    new_matches = p.negotiator_stats().get("TotalMatches", 0) - matches_before
    assert new_matches < 600, new_matches  # most of the 600 jobs ran on reused claims
