"""HTCondor's Personal-Pools tutorial, cell by cell: it starts and stops pools of its own (the
broker is GRIDBUS_URL's, here the module's vhost; LOCAL_DIR is under the working directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.tutorials.bindings import PersonalPool, htcondor

pytestmark = pytest.mark.usefixtures("env_of_module", "workdir")


def test_a_pool_started_used_and_stopped(capsys):
    pool = PersonalPool(local_dir=Path.cwd() / "personal-condor")
    assert repr(pool).endswith("state=PersonalPoolState.INITIALIZED)")
    try:
        assert repr(pool.start()).endswith("state=PersonalPoolState.READY)")
        assert isinstance(pool.schedd, htcondor.Schedd)
        assert isinstance(pool.collector, htcondor.Collector)

        sub = htcondor.Submit(
            executable="/bin/sleep",
            arguments="$(ProcID)s",
        )
        schedd = pool.schedd
        submit_result = schedd.submit(sub, count=10)
        print(f"ClusterID is {submit_result.cluster()}")
        assert capsys.readouterr().out == "ClusterID is 1\n"  # a new pool's first cluster

        ads = pool.schedd.query(
            constraint=f"ClusterID == {submit_result.cluster()}",
            projection=["ClusterID", "ProcID", "JobStatus"],
        )
        assert sorted(ad["ProcID"] for ad in ads) == list(range(10))
        assert all(ad["JobStatus"] in (1, 2) for ad in ads)

        some = pool.collector.query()[:3]
        for ad in some:
            print(ad)
        assert len(some) == 3 and all("MyType" in ad for ad in some)
    finally:
        assert repr(pool.stop()).endswith("state=PersonalPoolState.STOPPED)")


def test_a_pool_as_a_context_manager(capsys):
    with PersonalPool(local_dir=Path.cwd() / "another-personal-condor") as pool:
        print(pool.get_config_val("LOCAL_DIR"))
        assert pool.state.value == "READY"
    assert capsys.readouterr().out == f"{Path.cwd() / 'another-personal-condor'}\n"
    assert pool.state.value == "STOPPED"
