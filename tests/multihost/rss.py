"""Peak resident memory of a pool's daemons and of the processes they start (shadows), sampled.

The kernel keeps each process's peak resident set (``VmHWM`` in /proc/<pid>/status); a sampler
thread reads it for the daemons and for the descendants of the daemons named in ``children_of``
(the schedd's shadows) while the test runs, so the peak of a short-lived shadow is seen as long as
it lived through one sample. A process gone between two samples keeps the last peak read.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from tests.e2e.pool import Pool


def peak_kib(pid: int) -> int | None:
    """The process's peak resident set in KiB (VmHWM); None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _label(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return f"pid {pid}"
    program = os.path.basename(words[0])
    if "-m" in words[:-1]:
        program += " -m " + words[words.index("-m") + 1]
    elif "-c" in words:
        program += " -c"  # (the owner's shadow: its source is on the command line)
    return f"{program} (pid {pid})"


class PeakRss:
    """``with PeakRss(pool, children_of=["schedd@s"]) as rss: ...``; then ``rss.peaks`` maps each
    daemon address, and each descendant as ``"<address> child <module> (pid N)"``, to its peak KiB."""

    def __init__(self, pool: Pool, children_of: tuple[str, ...] | list[str] = (), interval: float = 0.05):
        self.pool = pool
        self.children_of = tuple(children_of)
        self.interval = interval
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak rss", daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def _note(self, label: str, pid: int) -> None:
        kib = peak_kib(pid)
        if kib is not None:
            self.peaks[label] = max(kib, self.peaks.get(label, 0))

    def sample(self) -> None:
        for address, proc in list(self.pool.procs.items()):
            if proc.poll() is not None:
                continue
            self._note(address, proc.pid)
            if address in self.children_of:
                todo = _children(proc.pid)
                while todo:
                    pid = todo.pop()
                    self._note(f"{address} child {_label(pid)}", pid)
                    todo += _children(pid)

    def over(self, bound_kib: int) -> dict[str, int]:
        """The processes whose peak passed ``bound_kib``."""
        return {label: kib for label, kib in self.peaks.items() if kib > bound_kib}
