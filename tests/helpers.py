"""Helpers every test package shares (the test packages' own helpers build on these)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    *,
    interval: float = 0.05,
    tolerate: tuple[type[BaseException], ...] = (),
) -> Any:
    """The first truthy value of ``predicate()``, polled every ``interval`` seconds; an
    AssertionError naming ``what`` (and the last value) once ``timeout`` seconds have passed.

    For state another thread or process changes without telling the test. ``predicate`` runs at
    least once; exceptions of the ``tolerate`` types count as "not yet" (no answer, no file).
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
        except tolerate as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")
        time.sleep(interval)
