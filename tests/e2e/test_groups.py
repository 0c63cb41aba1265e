"""Accounting groups in a real pool of 300 slots from the scale-test startd: three groups with
dynamic quotas of 50%, 30% and 20%, four submitters flooding them; the running shares follow the
quotas, and a group's unused share goes only to a group that accepts surplus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.pool import wait_for

GRIDBUS = Path(sys.executable).with_name("gridbus")
SLOTS = 300
SIM_STARTD = {"GRIDBUS_STARTD_SIMULATE_JOBS": "true", "GRIDBUS_NUM_CPUS": str(SLOTS),
              "GRIDBUS_NUM_SLOTS": str(SLOTS), "GRIDBUS_MEMORY": str(SLOTS * 64)}
GROUPS = {
    "GRIDBUS_GROUP_NAMES": "group_a, group_b, group_c",
    "GRIDBUS_GROUP_QUOTA_DYNAMIC_GROUP_A": "0.5",
    "GRIDBUS_GROUP_QUOTA_DYNAMIC_GROUP_B": "0.3",
    "GRIDBUS_GROUP_QUOTA_DYNAMIC_GROUP_C": "0.2",
    "GRIDBUS_GROUP_ACCEPT_SURPLUS": "false",
    "GRIDBUS_GROUP_ACCEPT_SURPLUS_GROUP_A": "true",
}
FLOOD = {"alice": "group_a", "dave": "group_a", "bob": "group_b", "carol": "group_c"}
LONG = {"cmd": "/nonexistent/sleep", "args": "3600"}  # the scale-test startd "runs" it as a timer


def shares(p) -> dict[str, int]:
    out = {g: 0 for g in ("group_a", "group_b", "group_c")}
    for job in p.jobs("schedd@s1", "JobStatus == 2", ["AcctGroup"]):
        out[job["AcctGroup"]] += 1
    return out


@pytest.mark.e2e
def test_running_shares_follow_the_quotas_and_surplus_goes_where_accepted(make_pool):
    p = make_pool()
    p.start("collector", "c")
    p.start("schedd", "s1")
    p.start("startd", "sim", **SIM_STARTD)
    p.wait_serving("collector@c", "schedd@s1")
    p.wait_slots(SLOTS, timeout=60)
    clusters = {owner: p.submit("schedd@s1", SLOTS, owner=owner, AcctGroup=group, **LONG)
                for owner, group in FLOOD.items()}
    wait_for("every submitter advertised",
             lambda: {ad["Name"].split("@")[0] for ad in p.ads("Submitter")} >= set(FLOOD), timeout=30)
    p.start("negotiator", "n", GRIDBUS_NEGOTIATOR_INTERVAL="2", **GROUPS)
    p.wait_serving("negotiator@n")

    wait_for("the pool full", lambda: sum(shares(p).values()) == SLOTS, timeout=90)
    got = shares(p)
    for group, quota in (("group_a", 0.5), ("group_b", 0.3), ("group_c", 0.2)):
        assert abs(got[group] / SLOTS - quota) <= 0.05, got

    # condor_userprio's group table: quotas, surplus, usage.
    out = subprocess.run([str(GRIDBUS), "--pool", p.url, "userprio"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines() if line.startswith("group_")}
    assert rows["group_a"][1:4] == ["150.00", "0.50", "yes"] and rows["group_b"][1:4] == ["90.00", "0.30", "no"], out.stdout

    # group_c's demand goes: its share is surplus, which group_a accepts and group_b does not.
    p.call("schedd@s1", "Remove", {"Ids": [], "Constraint": f"ClusterId == {clusters['carol']}", "Reason": "done"})
    wait_for("group_a to take group_c's share",
             lambda: (s := shares(p))["group_a"] >= 0.7 * SLOTS - 0.05 * SLOTS and s["group_c"] == 0, timeout=90)
    got = shares(p)
    assert abs(got["group_b"] / SLOTS - 0.3) <= 0.05, got
