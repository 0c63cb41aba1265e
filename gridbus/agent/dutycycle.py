"""DaemonCoreDutyCycle: the fraction of time an agent's event loop was busy.

HTCondor measures its daemons' duty cycle as the share of time spent outside the wait for events
(select/poll). An asyncio loop waits in its selector's ``select``; the meter wraps that selector
and adds up the time spent inside ``select``, so busy = 1 - waiting / elapsed over a window.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

# Windows shorter than this are noise (one burst of work reads as 100%).
MIN_WINDOW = 1.0


class DutyCycle:
    def __init__(self, min_window: float = MIN_WINDOW) -> None:
        self.min_window = min_window
        self.waiting = 0.0  # seconds spent inside select since install
        self.value = 0.0
        self._mark = (time.monotonic(), 0.0)
        self.installed = False

    def install(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Wrap the loop's selector; False (the value stays 0) for a loop without one (uvloop)."""
        selector = getattr(loop, "_selector", None)
        if selector is None or isinstance(selector, _TimedSelector):
            return isinstance(selector, _TimedSelector)
        loop._selector = _TimedSelector(selector, self)  # type: ignore[attr-defined]
        self._mark = (time.monotonic(), self.waiting)
        self.installed = True
        return True

    def sample(self) -> float:
        """The busy fraction since the previous sample (at least min_window ago), in [0, 1]."""
        now = time.monotonic()
        since, waited_before = self._mark
        span = now - since
        if self.installed and span >= self.min_window:
            waited = self.waiting - waited_before
            self.value = min(1.0, max(0.0, 1.0 - waited / span))
            self._mark = (now, self.waiting)
        return self.value


class _TimedSelector:
    """A selector that counts the time spent waiting in ``select``; everything else is passed on."""

    def __init__(self, inner: Any, meter: DutyCycle):
        self._inner = inner
        self._meter = meter

    def select(self, timeout: float | None = None) -> Any:
        started = time.monotonic()
        try:
            return self._inner.select(timeout)
        finally:
            self._meter.waiting += time.monotonic() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
