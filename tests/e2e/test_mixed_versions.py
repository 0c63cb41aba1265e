"""A rolling upgrade: the previous release's startd (its tag's worktree, in a venv of its own)
runs jobs for this version's schedd and negotiator, as an execute node not upgraded yet does."""

from __future__ import annotations

from tests.e2e.conftest import STATIC_STARTD
from tests.e2e.pool import wait_for
from tests.previous_release import Release


def test_the_previous_releases_startd_runs_this_versions_jobs(make_pool, previous_release: Release) -> None:
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "old", python=str(previous_release.python), source=previous_release.source,
               **STATIC_STARTD)
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
    pool.wait_slots(4)
    cluster = pool.submit("schedd@s", 8)
    hist = wait_for("8 jobs completed on the old startd",
                    lambda: (h := pool.history("schedd@s", f"ClusterId == {cluster}")) and len(h) >= 8 and h, 90)
    assert sorted(j["ProcId"] for j in hist) == list(range(8))
    assert all(j["JobStatus"] == 4 and j["ExitCode"] == 0 for j in hist)
    assert all(str(j.get("LastRemoteHost") or j.get("RemoteHost")).endswith("@old") for j in hist)
