"""HTCondor's Advanced-Schedd-Interactions tutorial, cell by cell, against a personal pool.

The notebook's history cell shows jobs removed by the tutorials run before it in the same pool;
this module's pool is its own, so a set-up step removes a cluster first (not a cell of the notebook).
"""

from __future__ import annotations

import pytest

from tests.e2e.pool import wait_for
from tests.e2e.tutorials.bindings import htcondor

pytestmark = pytest.mark.usefixtures("tutorial_pool")


def test_held_submission_query_and_history(capsys):
    schedd = htcondor.Schedd()
    sub = htcondor.Submit({
        "executable": "/bin/sleep",
        "arguments": "5m",
        "hold": "True",
    })
    submit_result = schedd.submit(sub, count=10)
    print(submit_result.cluster())
    print(len(schedd.query(projection=["ProcID"], constraint=f"ClusterId=={submit_result.cluster()}")))
    out = capsys.readouterr().out.split()
    assert out == [str(submit_result.cluster()), "10"]

    # Set-up: history to show (the notebook's came from earlier tutorials).
    schedd.act(htcondor.JobAction.Remove, f"ClusterId == {submit_result.cluster()}")
    wait_for("removed jobs in the history",
             lambda: len(schedd.history(f"ClusterId == {submit_result.cluster()}", ["ProcId"])) == 10, 30)

    schedd = htcondor.Schedd()
    ads = list(schedd.history(
        constraint="true",
        projection=["ProcId", "ClusterId", "JobStatus"],
        match=2,
    ))
    for ad in ads:
        print(ad)
    assert len(ads) == 2
    assert all(set(ad.keys()) == {"ProcId", "ClusterId", "JobStatus"} and ad["JobStatus"] == 3 for ad in ads)
