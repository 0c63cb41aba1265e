"""The starter's backends: its tests run in job cgroups and on the process-scan fallback.

``job_cgroups`` is parametrized: "cgroup" is the hierarchy the startd would pick here
(CGROUP_VERSION auto), "v1" and "v2" force one, "scan" is what BASE_CGROUP = "" gives (no
cgroups). Each cgroup case gets a parent group of its own, removed afterwards. A case the machine
cannot give (not root, nothing mounted) is skipped, saying why.
"""

from __future__ import annotations

import uuid

import pytest

from gridbus.agents.startd import cgroups


def make_hierarchy(version: str) -> cgroups.Hierarchy:
    try:
        return cgroups.probe(f"gridbus-test/{uuid.uuid4().hex[:12]}", version)
    except cgroups.CgroupError as exc:
        pytest.skip(f"no cgroup {version} here: {exc}")


@pytest.fixture
def hierarchy_for():
    """A function making a fresh test hierarchy of a version; every one made is cleaned up."""
    made: list[cgroups.Hierarchy] = []

    def make(version: str) -> cgroups.Hierarchy | None:
        if version == "scan":
            return None
        h = make_hierarchy("auto" if version == "cgroup" else version.removeprefix("v"))
        made.append(h)
        return h

    yield make
    for h in made:
        h.clean_leftovers(timeout=5)
        h.remove_base()


@pytest.fixture(params=["cgroup", "scan"])
def job_cgroups(request, hierarchy_for):
    """The starter's backend: the machine's cgroups, or None (the forced process-scan fallback)."""
    return hierarchy_for(request.param)


@pytest.fixture(params=["v1", "v2", "scan"])
def every_backend(request, hierarchy_for):
    """Each cgroup version this machine has, and the scan: for the tests of killing."""
    return hierarchy_for(request.param)
