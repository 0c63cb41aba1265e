"""A kill storm on a pool of real processes: SIGKILLs of the schedd (started again at once, as
the master would), of the owner's shadow and of the startd, each fired when the user log shows
that a given share of the jobs has ended, so every kill comes while jobs are ending.

`Storm.run(until)` fires the kills of its plan in order and returns once ``until()`` holds, the
counts of each kind printed by the caller. A job's marks (`MARK_SCRIPT`) say when it really ran:
"S <job> <pid>" at its start and "E <job> <pid>" at its end, appended to one file, whose order is
the order of the writes.
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.pool import Pool

# A job that leaves its marks: S at its start, E at its end, with its own id and pid.
MARK_SCRIPT = '#!/bin/sh\necho "S $1 $$" >> "$2"\necho "E $1 $$" >> "$2"\n'


def write_mark_script(directory: Path) -> Path:
    path = directory / "mark.sh"
    path.write_text(MARK_SCRIPT)
    path.chmod(0o755)
    return path


class LogCounter:
    """Counts the terminated events in a user log as it grows (the start of each "005 (" line),
    reading only what was appended since the last look."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""
        self.terminated = 0

    def update(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return 0
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        self.terminated += sum(1 for line in lines if line.startswith(b"005 ("))
        return self.terminated


def shadow_pids(parent: int) -> list[int]:
    """The owners' shadows among ``parent``'s children (``python -I -c <source>``)."""
    pids = []
    for task in Path(f"/proc/{parent}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"-I" in argv and b"-c" in argv:
                pids.append(int(child))
    return pids


@dataclass
class Storm:
    pool: Pool
    log: Path
    jobs: int  # the jobs whose ends pace the kills
    schedd_kills: int
    shadow_kills: int = 0
    startd_kills: int = 0
    startd_env: dict[str, str] = field(default_factory=dict)
    schedd_env: dict[str, str] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def plan(self) -> list[tuple[float, str]]:
        """(share of the jobs ended, what to kill) in order: the schedd's kills spread evenly
        over the run, the shadow's and the startd's between them."""
        kills = [((i + 1) / (self.schedd_kills + 2), "schedd") for i in range(self.schedd_kills)]
        for n, (kind, count) in enumerate((("shadow", self.shadow_kills), ("startd", self.startd_kills))):
            kills += [((i + 1) / (count + 1) + (n + 1) * 0.013, kind) for i in range(count)]
        return sorted(kills)

    def run(self, until: Callable[[], bool], timeout: float) -> None:
        counter = LogCounter(self.log)
        plan = self.plan()
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, (
                f"the storm did not end in {timeout:.0f} s: {counter.update()} terminated events in the log, "
                f"kills {dict(self.done)}\n{self.pool.diagnosis()}")
            ended = counter.update()
            while plan and ended >= plan[0][0] * self.jobs:
                self.kill(plan.pop(0)[1])
            time.sleep(0.05)
        assert not plan, f"the jobs ended before kills {plan} were fired (done: {dict(self.done)})"

    def kill(self, kind: str) -> None:
        if kind == "schedd":
            self.pool.kill("schedd@s")
            self.pool.session = None  # its replies went with the schedd's queue
            self.pool.start("schedd", "s", **self.schedd_env)
            # Serving again before anything else is killed: each kill finds a schedd at work.
            self.pool.wait_serving("schedd@s", timeout=60)
        elif kind == "startd":
            self.pool.kill("startd@a")
            self.pool.start("startd", "a", **self.startd_env)
        else:
            pids = shadow_pids(self.pool.procs["schedd@s"].pid)
            if not pids:
                return  # none alive this moment: the next look tries again
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        self.done[kind] += 1


def overlapping_runs(marks: Path) -> dict[str, list[int]]:
    """Jobs two of whose complete runs (an S and an E of one pid) overlapped in the order of the
    marks file: run twice at once. A run with no E was killed (a startd's kill) and is not counted."""
    lines = [line.split() for line in marks.read_text().splitlines() if line.strip()]
    ends = {(job, pid) for kind, job, pid in lines if kind == "E"}
    open_runs: dict[str, set[str]] = defaultdict(set)
    twice: dict[str, list[int]] = {}
    for kind, job, pid in lines:
        if (job, pid) not in ends:
            continue
        if kind == "S":
            if open_runs[job]:
                twice.setdefault(job, []).extend(int(p) for p in (*open_runs[job], pid))
            open_runs[job].add(pid)
        else:
            open_runs[job].discard(pid)
    return twice


def runs_per_job(marks: Path) -> dict[str, int]:
    """How many runs of each job started (its S marks)."""
    counts: dict[str, int] = defaultdict(int)
    for line in marks.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "S":
            counts[parts[1]] += 1
    return counts
