"""The test tiers select what they say: `-m "not broker and not e2e"` (make test-fast) is exactly
the unit tests, which need no broker, and every other test is marked `broker`; the tests that run
a real pool (tests/e2e, tests/cluster) are marked `e2e`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import tiers_report

ROOT = Path(__file__).resolve().parents[2]


def collected_tiers(config: pytest.Config) -> list[tuple[str, frozenset[str]]]:
    """(file, tier marks) of every test: this session's own record when it collected the whole
    suite (no second collection of it), else a collection of its own."""
    if tiers_report.collected_whole_suite(config, str(ROOT / "tests")):
        return config.stash[tiers_report.TIERS]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.tiers_report", "tests"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    found = []
    for line in out.stdout.splitlines():
        if line.startswith("TIER "):
            _, path, tier = line.split(" ")
            found.append((path, frozenset(tier.split(",")) - {"-"}))
    return found


def test_every_test_is_in_the_tier_its_place_and_fixtures_say(pytestconfig: pytest.Config):
    marks: dict[str, set[str]] = {}
    for path, tier in collected_tiers(pytestconfig):
        marks.setdefault(path, set()).update(tier)
    assert len(marks) > 100
    fast = {p for p, m in marks.items() if not m}
    assert all(p.startswith("tests/unit/") for p in fast), sorted(p for p in fast if not p.startswith("tests/unit/"))
    broker_units = sorted(p for p, m in marks.items() if p.startswith("tests/unit/") and m)
    assert not broker_units, f"unit tests that ask for the broker (move them to tests/integration): {broker_units}"
    for path, m in marks.items():
        if not path.startswith("tests/unit/"):
            assert "broker" in m, path
        if path.startswith(("tests/e2e/", "tests/cluster/")):
            assert "e2e" in m, path
