"""HTCondor's HTCondor-Introduction tutorial, cell by cell, against a personal pool."""

from __future__ import annotations

import getpass
import socket

import pytest

from tests.e2e.tutorials.bindings import classad, htcondor

pytestmark = pytest.mark.usefixtures("tutorial_pool")


@pytest.fixture(scope="module")
def state() -> dict:
    return {}


def test_locate_the_schedd_and_query_its_ad(state):
    coll = htcondor.Collector()
    schedd_ad = coll.locate(htcondor.DaemonTypes.Schedd)
    print(schedd_ad)
    assert schedd_ad["MyType"] == "Scheduler" and "MyAddress" in schedd_ad
    ads = coll.query(htcondor.AdTypes.Schedd, projection=["Name", "MyAddress", "DaemonCoreDutyCycle"])
    assert len(ads) == 1
    assert set(ads[0].keys()) >= {"Name", "MyAddress", "DaemonCoreDutyCycle"}
    assert 0.0 <= ads[0]["DaemonCoreDutyCycle"] <= 1.0
    # The notebook's schedd is named user@host, as a personal pool's (its user is jovyan).
    name = classad.quote(f"{getpass.getuser()}@{socket.getfqdn()}")
    found = coll.query(
        htcondor.AdTypes.Schedd,
        constraint=f"Name =?= {name}",
        projection=["Name", "MyAddress", "DaemonCoreDutyCycle"],
    )
    assert [ad["Name"] for ad in found] == [f"{getpass.getuser()}@{socket.getfqdn()}"]
    state["schedd_ad"] = schedd_ad


def test_submit_ten_sleeps_and_query_them(state):
    schedd = htcondor.Schedd(state["schedd_ad"])
    print(schedd)
    sub = htcondor.Submit(
        executable="/bin/sleep",
        arguments="5m",
    )
    result = schedd.submit(sub, count=10)
    text = repr(result)
    assert text.startswith(f"SubmitResult(cluster={result.cluster()}, first_proc=0, num_procs=10, clusterad=")
    clusterad = result.clusterad()
    assert clusterad["Cmd"] == "/bin/sleep" and clusterad["Args"] == "5m"
    assert clusterad["ClusterId"] == result.cluster() and clusterad["JobUniverse"] == 5

    jobs = schedd.query(projection=["ClusterId", "ProcId", "JobStatus"])
    for job in jobs:
        print(repr(job))
    assert sorted(job["ProcId"] for job in jobs) == list(range(10))
    assert {job["JobStatus"] for job in jobs} <= {1, 2}  # idle, or running on one of the slots

    procs = [ad.get("ProcId") for ad in schedd.query(constraint="ProcId >= 5", projection=["ProcId"])]
    assert sorted(procs) == [5, 6, 7, 8, 9]
    state["schedd"] = schedd


def test_remove_the_users_jobs(state):
    schedd = state["schedd"]
    answer = schedd.act(htcondor.JobAction.Remove, f'Owner == "{getpass.getuser()}"')
    assert answer["TotalSuccess"] == 10
    assert answer["TotalError"] == 0
