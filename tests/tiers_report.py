"""A pytest plugin for tests/unit/test_tiers.py: after collection, print each test's file and its
tier marks (`TIER <file> <marks>`), so one collection shows how every test is marked."""

from __future__ import annotations

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        marks = sorted({m.name for m in item.iter_markers()} & {"broker", "e2e"})
        print(f"TIER {item.nodeid.split('::')[0]} {','.join(marks) or '-'}")
