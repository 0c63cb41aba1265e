"""The tier marks of every collected test, for tests/unit/test_tiers.py.

tests/conftest.py records them (`record`) once its markers are added and before `-m` deselects
any: a session that collected the whole suite (`make test-fast`, `make test`) has them at hand,
and test_tiers reads them there. A session that collected part of it has the test run a
collection of its own with this module as a plugin (``-p tests.tiers_report``), which prints each
test's file and its tier marks (`TIER <file> <marks>`).
"""

from __future__ import annotations

import os

import pytest

TIER_MARKS = frozenset({"broker", "e2e"})
# (file relative to the repository, its tier marks) for each test the session collected
TIERS = pytest.StashKey[list[tuple[str, frozenset[str]]]]()


def tiers(items: list[pytest.Item]) -> list[tuple[str, frozenset[str]]]:
    return [(item.nodeid.split("::")[0], frozenset(m.name for m in item.iter_markers()) & TIER_MARKS)
            for item in items]


def record(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[TIERS] = tiers(items)


def collected_whole_suite(config: pytest.Config, tests_dir: str) -> bool:
    """Whether this session collected every test under ``tests_dir``: it was given that directory
    alone (as ``make test-fast`` and ``make test`` give it, through testpaths), ignored nothing, and
    would have stopped at a collection error."""
    args = [os.path.realpath(os.path.join(config.invocation_params.dir, a)) for a in config.args]
    return (args == [os.path.realpath(tests_dir)] and not config.getoption("ignore")
            and not config.getoption("ignore_glob") and not config.getoption("continue_on_collection_errors"))


def pytest_collection_finish(session: pytest.Session) -> None:
    for path, marks in tiers(session.items):
        print(f"TIER {path} {','.join(sorted(marks)) or '-'}")
