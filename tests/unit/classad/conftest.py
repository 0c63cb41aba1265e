"""The differential tests compare meaning with HTCondor's library, not speed: the wall-clock
budgets of an evaluation (tested on their own in test_limits.py) are lifted for them, so a loaded
machine that deschedules the test mid-evaluation cannot turn a value into error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gridbus.classad import limits

DIFFERENTIAL = ("test_generated_differential.py", "test_corpus_differential.py")


@pytest.fixture(autouse=True, scope="module")
def _no_wall_clock_budgets(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.path.name not in DIFFERENTIAL:
        yield
        return
    saved = limits.MAX_SECONDS, limits.REGEX_SECONDS
    limits.MAX_SECONDS, limits.REGEX_SECONDS = 3600.0, 3600.0
    try:
        yield
    finally:
        limits.MAX_SECONDS, limits.REGEX_SECONDS = saved
