"""Long scans in slices with a budget for the whole scan (gridbus/agent/pacing.py)."""

from __future__ import annotations

import asyncio

import pytest

from gridbus.agent import pacing
from gridbus.classad.limits import EvaluationLimitExceeded


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_slice_ends_after_its_time_and_pausing_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(pacing.time, "monotonic", clock)
    monkeypatch.setattr(pacing.time, "thread_time", clock)
    pacer = pacing.Pacer(budget=1.0)
    assert not any(pacer.due() for _ in range(1000))  # no time passed: never due
    clock.now = 0.02
    assert any(pacer.due() for _ in range(64))  # the clock is read every 64 items

    async def pause_for_a_long_time() -> None:
        async def others() -> None:
            clock.now += 100.0  # what the loop runs meanwhile is not the scan's time

        task = asyncio.ensure_future(others())
        await pacer.pause()
        await task

    asyncio.run(pause_for_a_long_time())
    assert pacer.spent == pytest.approx(0.02)
    assert not any(pacer.due() for _ in range(64))


def test_a_scan_past_its_budget_ends_with_a_sentence_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(pacing.time, "monotonic", clock)
    monkeypatch.setattr(pacing.time, "thread_time", clock)
    pacer = pacing.Pacer(budget=0.5)
    clock.now = 0.6
    with pytest.raises(EvaluationLimitExceeded, match=r"scan budget of 0\.5 s \(64 items tested\)"):
        for _ in range(64):
            pacer.due()


def test_the_budget_counts_the_scans_cpu_not_the_time_a_busy_machine_took(monkeypatch: pytest.MonkeyPatch) -> None:
    wall, cpu = Clock(), Clock()
    monkeypatch.setattr(pacing.time, "monotonic", wall)
    monkeypatch.setattr(pacing.time, "thread_time", cpu)
    pacer = pacing.Pacer(budget=0.5)
    wall.now, cpu.now = 2.0, 0.1  # the process waited for a cpu most of the slice
    assert any(pacer.due() for _ in range(64))  # the slice is over (other calls wait on wall time)...
    asyncio.run(pacer.pause())  # ...but the scan has cost 0.1 s of its 0.5
    cpu.now = 0.55
    with pytest.raises(EvaluationLimitExceeded, match=r"scan budget of 0\.5 s"):
        for _ in range(64):
            pacer.due()
