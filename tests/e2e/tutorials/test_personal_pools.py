"""HTCondor's Personal-Pools tutorial, cell by cell, beside the user's own running personal pool
(``tutorial_pool``, on GRIDBUS_URL's vhost with the default names): the tutorial's pools are
independent of it, each in a vhost of its own (LOCAL_DIR is under the working directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gridbus.bus import BrokerURL
from tests.e2e.tutorials.bindings import PersonalPool, htcondor

pytestmark = pytest.mark.usefixtures("env_of_module", "workdir", "tutorial_pool")


@pytest.fixture(autouse=True)
def the_users_pool_still_serves(tutorial_pool):
    yield
    assert tutorial_pool.state.value == "READY"
    tutorial_pool.schedd.query(projection=["ClusterId"])  # it answers, untouched


def test_a_pool_started_used_and_stopped(capsys, tutorial_pool):
    pool = PersonalPool(local_dir=Path.cwd() / "personal-condor")
    assert repr(pool).endswith("state=PersonalPoolState.INITIALIZED)")
    try:
        assert repr(pool.start()).endswith("state=PersonalPoolState.READY)")
        assert BrokerURL(pool.url).vhost != BrokerURL(tutorial_pool.url).vhost
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


def test_a_second_pool_up_says_how_to_reach_the_first_and_local_dir_runs_one_beside_it(tutorial_pool, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GRIDBUS_CONFIG", "GRIDBUS_LOCAL_DIR")}

    def gridbus(*args: str, local_dir: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gridbus.console.cli", "pool", *args],
                              env={**env, "GRIDBUS_LOCAL_DIR": str(local_dir)}, cwd=tmp_path,
                              capture_output=True, text=True, timeout=150)

    refused = gridbus("up", "--detach", local_dir=tmp_path / "second")
    assert refused.returncode == 1
    assert f"LOCAL_DIR {tutorial_pool.local_dir}" in refused.stderr, refused.stderr
    assert "gridbus pool up --local-dir DIR" in refused.stderr
    third = tmp_path / "third"
    try:
        up = gridbus("up", "--detach", "--local-dir", str(third), local_dir=tmp_path / "second")
        assert up.returncode == 0, up.stderr
        assert f"GRIDBUS_LOCAL_DIR={third}" in up.stdout
        q = subprocess.run([sys.executable, "-m", "gridbus.console.cli", "q"], env={**env, "GRIDBUS_LOCAL_DIR": str(third)},
                           capture_output=True, text=True, timeout=60)
        assert q.returncode == 0 and "Schedd:" in q.stdout, q.stdout + q.stderr
    finally:
        down = gridbus("down", "--local-dir", str(third), local_dir=tmp_path / "second")
    assert down.returncode == 0 and "vhost" in down.stdout, down.stdout + down.stderr
