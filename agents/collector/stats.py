"""Counters and rates for the collector's own ad."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class Rate:
    """Events per second over a sliding window, from cumulative counts sampled now and then.

    Sampling (on the collector's expiry tick) costs O(1); the counted path only adds to an int.
    """

    def __init__(self, window: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.clock = clock
        self.total = 0
        self._samples: deque[tuple[float, int]] = deque([(clock(), 0)])

    def add(self, n: int = 1) -> None:
        self.total += n

    def sample(self) -> None:
        now = self.clock()
        self._samples.append((now, self.total))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def per_second(self) -> float:
        now = self.clock()
        t0, n0 = self._samples[0]
        elapsed = now - t0
        if elapsed <= 0:
            return 0.0
        return (self.total - n0) / elapsed
