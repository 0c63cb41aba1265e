"""Where an agent's tasks wait, and ending them, for a stop that does not hang.

A daemon the master ends with SIGKILL after SHUTDOWN_GRACEFUL_TIMEOUT leaves nothing else behind
that says what held its stop up: `SlowReport` writes, while a phase (the stop) goes on past its
interval, the step it is at and the chain of awaits of each of the loop's tasks. `cancel_and_wait`
ends tasks even where Python 3.11 loses a cancellation (which hung a master's stop for good).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

# The awaits of one chain shown at most (a chain ends at a future, a sleep or a lock).
CHAIN_DEPTH = 12
# `cancel_and_wait`: seconds given to cancelled tasks to end before they are cancelled again, and
# how many times.
CANCEL_WAIT = 1.0
CANCEL_TRIES = 5

# The repository root: a frame of a file under it is gridbus's own.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source_place(file: str, line: int, name: str) -> str:
    """``file:line function``, the file relative to the repository when it is gridbus's own, else
    its base name (a library's or Python's)."""
    where = os.path.relpath(file, SOURCE_ROOT) if file.startswith(SOURCE_ROOT) else os.path.basename(file)
    return f"{where}:{line} {name}"


def awaits_of(task: asyncio.Task[Any]) -> str:
    """The chain of awaits of a task, outermost first: ``file:line function`` of each coroutine
    it waits in, then what the innermost one waits on. Read on the loop's own thread, where a
    task that is not running is suspended and its frames stay put."""
    parts: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(parts) < CHAIN_DEPTH:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            # A future (awaited through its iterator, FutureIter), or a finished coroutine.
            parts.append(type(awaited).__name__.removesuffix("Iter"))
            break
        parts.append(source_place(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return " > ".join(parts)


def tasks_awaiting() -> list[str]:
    """One line per task of the running loop but the caller's: its name and `awaits_of` it."""
    current = asyncio.current_task()
    return sorted(f"{task.get_name()}: {awaits_of(task)}" for task in asyncio.all_tasks()
                  if task is not current and not task.done())


class SlowReport:
    """Logs a warning each ``interval`` seconds while a phase goes on: how long it has taken, the
    step it is at (``step``, set by the phase) and `tasks_awaiting`. Stops at `done`."""

    def __init__(self, log: logging.Logger, phase: str, interval: float):
        self.log = log
        self.phase = phase
        self.interval = interval
        self.step = ""
        self._began = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(interval, self._report)

    def _report(self) -> None:
        lines = "\n  ".join(tasks_awaiting()) or "(none)"
        self.log.warning("the %s has taken %.0f s and goes on, at: %s; the agent's tasks wait in:\n  %s",
                         self.phase, time.monotonic() - self._began, self.step or "its beginning", lines)
        self._timer = self._loop.call_later(self.interval, self._report)

    def done(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def cancel_and_wait(tasks: list[asyncio.Task[Any]], log: logging.Logger) -> None:
    """Cancel ``tasks`` and wait until they have ended; one still running a moment later is
    cancelled again, CANCEL_TRIES times at most, then logged with where it waits and left.

    Python 3.11's ``asyncio.wait_for`` returns the awaited result, and drops the cancellation, when
    the task is cancelled as that result arrives (an event set in the same turn of the loop): the
    task's loop then goes on, and a plain gather waits for it for ever. A master's advertising
    loop did so at its stop (its event set by its own daemons' stops), and the master never
    exited. A second cancellation ends such a task at its next await."""
    pending = {t for t in tasks if not t.done()}
    for _ in range(CANCEL_TRIES):
        if not pending:
            return
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_WAIT)
    for task in pending:
        log.warning("task %s did not end when cancelled %d times; left running, in: %s",
                    task.get_name(), CANCEL_TRIES, awaits_of(task))
