"""DaemonCoreDutyCycle: the fraction of time an agent's event loop was busy.

HTCondor measures its daemons' duty cycle as the share of time spent outside the wait for events
(select/poll). An asyncio loop waits in its selector's ``select``; the meter wraps that selector
and adds up the time spent inside ``select``, so busy = 1 - waiting / elapsed over a window.

The same wrapper sees each turn of the loop (from one ``select`` to the next). A turn that runs
longer than ``STALL_SECONDS`` holds up every answer of the agent (a q -totals waits behind it),
so :meth:`DutyCycle.watch_stalls` reports it: a watchdog thread samples the loop thread's stack
while the turn goes on, and the turn's length and where it was are logged once it ends.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import re
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from gridbus.agent.awaiting import SOURCE_ROOT, source_place

# Windows shorter than this are noise (one burst of work reads as 100%).
MIN_WINDOW = 1.0
# A loop turn this long (seconds) without waiting for I/O is reported.
STALL_SECONDS = 1.0
# Frames named in a sample of where a long turn was (the innermost ones of gridbus's own code).
SAMPLE_FRAMES = 4


class GcTime(NamedTuple):
    """The cyclic garbage collector's share of a turn: wall and cpu seconds (on a loaded machine
    the wall time is many times the cpu), and how many of its runs were full collections (every
    object the process holds) and young ones (the two younger generations)."""

    seconds: float
    cpu_seconds: float
    full: int
    young: int

    def __sub__(self, other: object) -> GcTime:
        assert isinstance(other, GcTime)
        return GcTime(self.seconds - other.seconds, self.cpu_seconds - other.cpu_seconds,
                      self.full - other.full, self.young - other.young)


class DutyCycle:
    def __init__(self, min_window: float = MIN_WINDOW) -> None:
        self.min_window = min_window
        self.waiting = 0.0  # seconds spent inside select since install
        self.value = 0.0
        self._mark = (time.monotonic(), 0.0)
        self.installed = False
        # When the current loop turn began (select returned); None while the loop waits in select.
        self.turn_started: float | None = None
        self.stalls = 0  # turns longer than the stall threshold
        self.longest_turn = 0.0
        self._stall: tuple[float, Callable[[float, GcTime, list[str]], None]] | None = None
        self._gc_at_turn = GcTime(0.0, 0.0, 0, 0)  # gc when the current turn began
        self._samples: list[tuple[float, str]] = []  # (the turn's start, where it was), from the watchdog
        self._loop_thread = 0
        self._loop: Callable[[], asyncio.AbstractEventLoop | None] = lambda: None
        self.gc = GcTime(0.0, 0.0, 0, 0)  # in the cyclic garbage collector, since install (the loop's thread)
        self._gc_started = (0.0, 0.0)

    def install(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Wrap the loop's selector; False (the value stays 0) for a loop without one (uvloop)."""
        selector = getattr(loop, "_selector", None)
        if selector is None or isinstance(selector, _TimedSelector):
            return isinstance(selector, _TimedSelector)
        loop._selector = _TimedSelector(selector, self)  # type: ignore[attr-defined]  # asyncio's selector loop, timed in place
        self._mark = (time.monotonic(), self.waiting)
        self.installed = True
        self._loop_thread = threading.get_ident()
        self._loop = weakref.ref(loop)
        gc.callbacks.append(self._gc_phase)
        return True

    def _gc_phase(self, phase: str, info: dict[str, int]) -> None:
        """Time the cyclic collector's runs on the loop's thread (a long turn may be one)."""
        if threading.get_ident() != self._loop_thread:
            return
        if phase == "start":
            loop = self._loop()
            if loop is None or loop.is_closed():  # (an agent run in a thread of a test)
                gc.callbacks.remove(self._gc_phase)
                return
            self._gc_started = (time.perf_counter(), time.thread_time())
        elif self._gc_started[0]:
            wall, cpu = self._gc_started
            full = info.get("generation") == 2
            g = self.gc
            self.gc = GcTime(g.seconds + time.perf_counter() - wall, g.cpu_seconds + time.thread_time() - cpu,
                             g.full + full, g.young + (not full))
            self._gc_started = (0.0, 0.0)

    def watch_stalls(self, report: Callable[[float, GcTime, list[str]], None], threshold: float = STALL_SECONDS) -> None:
        """Call ``report(seconds, gc, samples)`` on the loop's thread after each turn of the loop
        longer than ``threshold``; ``gc`` is the cyclic garbage collector's share of it (`GcTime`),
        and ``samples`` say where the turn was, sampled every quarter of
        the threshold from the first quarter on. Needs :meth:`install` first; the watchdog is a daemon
        thread that only reads a float until a turn runs long."""
        if not self.installed or self._stall is not None:
            return
        self._stall = (threshold, report)
        threading.Thread(target=self._watchdog, args=(threshold,), name="loop-stall-watch", daemon=True).start()

    def _watchdog(self, threshold: float) -> None:
        sampled_at = 0.0  # the next time into the current turn to sample at
        turn = None
        while True:
            time.sleep(threshold / 4)
            loop = self._loop()
            if loop is None or loop.is_closed():
                return  # (an agent run in a thread of a test, or a loop run again, ends it)
            del loop
            started = self.turn_started
            if started is None:
                continue
            if started != turn:  # sampled from a quarter of the threshold on, so a turn just
                turn, sampled_at = started, threshold / 4  # over it has samples too
            if time.monotonic() - started < sampled_at:
                continue
            frames = _stack_of(self._loop_thread)
            if frames and self.turn_started == started:
                self._samples.append((started, _where(frames)))
            sampled_at += threshold / 4

    def _turn_ended(self, started: float, now: float) -> None:
        """On the loop's thread, when ``select`` is called again."""
        length = now - started
        if length > self.longest_turn:
            self.longest_turn = length
        samples: list[tuple[float, str]] = []
        if self._samples:  # (a turn under the threshold may have some too: they go)
            samples, self._samples = self._samples, []
        if self._stall is None or length < self._stall[0]:
            return
        self.stalls += 1
        ours = [where for s, where in samples if s == started]
        try:
            self._stall[1](length, self.gc - self._gc_at_turn, ours)
        except Exception:  # a report must never break the loop's select
            pass

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
        meter = self._meter
        started = time.monotonic()
        turn = meter.turn_started
        meter.turn_started = None
        if turn is not None:
            meter._turn_ended(turn, started)
        try:
            return self._inner.select(timeout)
        finally:
            meter.turn_started = now = time.monotonic()
            meter.waiting += now - started
            meter._gc_at_turn = meter.gc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Frame(NamedTuple):
    file: str
    line: int
    name: str


def _stack_of(thread_id: int) -> list[Frame]:
    """The stack of thread ``thread_id``, outermost first.

    Read from faulthandler's dump of every thread, which C code writes in one go while this thread
    holds the GIL: walking another thread's frames from Python (``sys._current_frames()`` and
    ``f_back``) lets that thread run between two steps (a line lookup reads a file and releases the
    GIL) and pop the frames being walked, which crashed the process (a segmentation fault in
    CPython 3.11, seen in the test suite). The dump goes to an unnamed temporary file."""
    with tempfile.TemporaryFile() as fh:
        faulthandler.dump_traceback(fh.fileno(), all_threads=True)
        fh.seek(0)
        return _parse_dump(fh.read().decode("utf-8", "replace"), thread_id)


def _parse_dump(text: str, thread_id: int) -> list[Frame]:
    """Thread ``thread_id``'s frames in a faulthandler dump (most recent call first there),
    outermost first."""
    frames: list[Frame] = []
    inside = False
    headers = (f"Thread 0x{thread_id:016x} ", f"Current thread 0x{thread_id:016x} ")
    for line in text.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")):
            if inside:
                break
            inside = line.startswith(headers)
            continue
        if inside:
            m = _DUMP_FRAME.match(line)
            if m:
                frames.append(Frame(m["file"], int(m["line"]), m["name"]))
    frames.reverse()
    return frames


_DUMP_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<name>.*)$')


def _where(stack: list[Frame]) -> str:
    """Where a stack (outermost first) is: its innermost frames of gridbus's own code (and the
    innermost frame of all, when that is a library's), as ``file:line function``, each called from
    the next."""
    own = [f for f in stack if f.file.startswith(SOURCE_ROOT)] or list(stack)
    inner = stack[-1]
    picked = own[-SAMPLE_FRAMES:]
    if picked[-1] is not inner:
        picked = picked[-(SAMPLE_FRAMES - 1):] + [inner]
    return " < ".join(source_place(f.file, f.line, f.name) for f in reversed(picked))
