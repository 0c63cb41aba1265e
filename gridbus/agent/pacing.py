"""Long scans on an agent's event loop, in slices, with a budget for the whole scan.

A Query's constraint is the caller's expression, tested once per ad: each test is bounded
(gridbus/classad/limits.py), their number is not (a collector of 200,000 slot ads, a schedd of
400,000 jobs). A scan therefore hands the event loop back every SLICE seconds, so the agent keeps
answering other calls while it runs, and ends with a sentence when the whole scan has used more
than SCAN_BUDGET seconds of the loop thread's cpu, so one caller cannot keep the agent busy for hours. The scans stay on the
loop rather than in a thread: what they read (the collector's store, the schedd's snapshot) is
changed by the loop, and between two slices only, never under them.

    pacer = Pacer()
    for ad in ads:
        if pacer.due():
            await pacer.pause()
        ...
"""

from __future__ import annotations

import asyncio
import time

from gridbus.classad.limits import EvaluationLimitExceeded

SLICE = 0.01  # seconds of scanning between two returns to the event loop
SCAN_BUDGET = 30.0  # seconds of cpu one scan may take in all (its slices added up)
_CHECK_EVERY = 64  # items between two readings of the clock (a mask + 1)


class Pacer:
    __slots__ = ("budget", "spent", "slice_start", "cpu_start", "n")

    def __init__(self, budget: float | None = None):
        self.budget = SCAN_BUDGET if budget is None else budget
        self.spent = 0.0  # the loop thread's cpu in the slices before this one
        self.slice_start = time.monotonic()
        self.cpu_start = time.thread_time()
        self.n = 0

    def due(self) -> bool:
        """True when this slice is used up (then ``await pause()``); raises EvaluationLimitExceeded,
        naming the bound, when the whole scan is past its budget.

        A slice is wall time (how long other calls wait); the budget counts the loop thread's cpu
        (what the scan costs the agent), so a machine busy with other work, which stretches every
        slice, does not end a scan that costs what it always did."""
        self.n += 1
        if self.n & (_CHECK_EVERY - 1):
            return False
        if self.spent + time.thread_time() - self.cpu_start > self.budget:
            raise EvaluationLimitExceeded(
                f"testing the constraint took more than the scan budget of {self.budget:g} s "
                f"({self.n:,} items tested); narrow the constraint")
        return time.monotonic() - self.slice_start >= SLICE

    async def pause(self) -> None:
        """Let the event loop run what waits, then start the next slice."""
        self.spent += time.thread_time() - self.cpu_start
        await asyncio.sleep(0)
        self.slice_start = time.monotonic()
        self.cpu_start = time.thread_time()
