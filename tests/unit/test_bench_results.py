"""`make bench` adds each benchmark's figures to bench/HISTORY.md beside the earlier ones: a run
rewrote the whole file and lost every earlier run's figures and what was written about them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("run_all", Path(__file__).parents[2] / "bench" / "run_all.py")
assert _spec and _spec.loader
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)

EXISTING = """# gridbus benchmark results

Intro.

## bench_a

What bench_a measures.

### 2026-01-01: an earlier run

| figure | value |
|---|---|
| x | 1 |

Written by hand about it.

## bench_b

What bench_b measures.

## bench_c

Last section.
"""


def test_new_figures_go_above_the_earlier_runs_and_nothing_is_lost():
    results = [("bench_a", {"x": 2}, "", 1.0, "A."), ("bench_b", {"y": 3}, "", 2.0, "B."),
               ("bench_new", {"z": 4}, "", 3.0, "New one.")]
    out = run_all.merge(EXISTING, results, "cmd", now="2026-11-27 22:00 UTC")
    for line in EXISTING.splitlines():  # every line of the file stays, in order
        assert line in out.splitlines()
    lines = out.splitlines()
    a_new = lines.index("### 2026-11-27 22:00 UTC: `cmd`")
    assert lines.index("What bench_a measures.") < a_new < lines.index("### 2026-01-01: an earlier run")
    assert a_new < lines.index("| x | 2 |") < lines.index("### 2026-01-01: an earlier run")
    # bench_b had no subsection: its run follows its text, before bench_c.
    b_new = [i for i, line in enumerate(lines) if line == "### 2026-11-27 22:00 UTC: `cmd`"][1]
    assert lines.index("What bench_b measures.") < b_new < lines.index("## bench_c")
    assert lines[b_new - 1] == "" and lines[lines.index("## bench_c") - 1] == ""
    assert "| y | 3 |" in lines[b_new:lines.index("## bench_c")]
    # A benchmark without a section gets one at the end.
    assert lines.index("## bench_new") > lines.index("Last section.") and "| z | 4 |" in lines
    assert "New one." in lines[lines.index("## bench_new"):]


def test_a_failed_benchmark_is_recorded_with_its_error():
    out = run_all.merge(EXISTING, [("bench_c", None, "Traceback: boom", 0.5, "")], "cmd", now="d")
    tail = out.split("## bench_c", 1)[1]
    assert "FAILED:" in tail and "Traceback: boom" in tail and "Last section." in tail
