"""Run every bench/bench_*.py's ``run()`` and add its figures to bench/HISTORY.md (``make bench``).

Each benchmark module exposes ``run(quick: bool = False) -> dict`` of its figures (and, where it
has a peer, the peer's figures and the ratio, measured in the same run). This script imports them
one after another in this process and records the figures, the date, the machine and the command:
each benchmark's table goes into its own ``## bench_x`` section of HISTORY.md as a new dated
subsection above the earlier ones, so the figures of earlier runs (and what was written about
them by hand) stay. A benchmark that fails is reported with its error; the others still run.

    .venv/bin/python bench/run_all.py [--quick] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def discover() -> list[Path]:
    return sorted(HERE.glob("bench_*.py"))


def load(path: Path) -> Any:
    # Imported by its own name with bench/ on sys.path, so a benchmark that starts worker processes
    # (multiprocessing's spawn pickles functions by module name) works here as it does standalone.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    return importlib.import_module(path.stem)


def run_one(path: Path, quick: bool) -> tuple[dict[str, Any] | None, str, float, str]:
    """(figures, error text, seconds, the module's first docstring line)."""
    started = time.monotonic()
    try:
        module = load(path)
        doc = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
        run = getattr(module, "run", None)
        if run is None:
            return None, "the module has no run(quick=False) function", time.monotonic() - started, doc
        figures = run(quick=quick)
        if not isinstance(figures, dict):
            return None, f"run() returned {type(figures).__name__}, not a dict", time.monotonic() - started, doc
        return figures, "", time.monotonic() - started, doc
    except Exception:
        return None, traceback.format_exc(limit=5), time.monotonic() - started, locals().get("doc", "")


def fmt(value: Any) -> str:
    """A figure as a reader wants it: floats to 3 significant digits (no exponent for everyday
    sizes), thousands separated, the same inside dicts and lists."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        if value == 0:
            return "0"
        if 1e-3 <= abs(value) < 1e9:
            digits = max(0, 2 - math.floor(math.log10(abs(value))))
            text = f"{round(value, digits):,.{digits}f}"
            return text.rstrip("0").rstrip(".") if "." in text else text
        return f"{value:.3g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return str(value)


Result = tuple[str, dict | None, str, float, str]  # name, figures, error, seconds, doc


def _figures(figures: dict | None, error: str, seconds: float) -> list[str]:
    if error:
        return ["FAILED:", "", "```", error.rstrip(), "```", ""]
    lines = ["| figure | value |", "|---|---|"]
    for key, value in (figures or {}).items():
        lines.append(f"| {key} | {fmt(value)} |")
    return [*lines, "", f"({seconds:.1f} s)", ""]


def _machine() -> str:
    return f"{platform.node()}, {os.cpu_count()} cpus, {platform.platform()}, Python {platform.python_version()}"


def merge(existing: str, results: list[Result], command: str, now: str | None = None) -> str:
    """``existing`` (a HISTORY.md) with each result's table added to its benchmark's section, as
    a dated subsection above that section's earlier ones (after its opening paragraphs); a
    benchmark without a section gets one at the end. Nothing else is changed."""
    now = now or dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = existing.rstrip("\n").split("\n")
    for name, figures, error, seconds, doc in results:
        block = [f"### {now}: `{command}`", "", f"Machine: {_machine()}.", "", *_figures(figures, error, seconds)]
        try:
            start = lines.index(f"## {name}")
        except ValueError:
            lines += ["", f"## {name}", "", *([doc, ""] if doc else []), *block]
            continue
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        at = next((i for i in range(start + 1, end) if lines[i].startswith("### ")), end)
        if at == end:  # no subsection yet: after the section's text, before the next section's blank line
            while at > start + 1 and not lines[at - 1].strip():
                at -= 1
            block = ["", *block[:-1]]
        lines[at:at] = block
    return "\n".join(lines).rstrip() + "\n"


def render(results: list[Result], command: str) -> str:
    now = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        "# gridbus benchmark results",
        "",
        f"- date: {now}",
        f"- command: `{command}`",
        f"- machine: {_machine()}",
        "",
        "Rewritten by `bench/run_all.py` (`make bench`); every figure below was measured in that run.",
        "Peers (Celery, HTCondor's published figures) are given beside gridbus's own, with their ratio.",
        "",
    ]
    for name, figures, error, seconds, doc in results:
        lines += [f"## {name}", ""]
        if doc:
            lines += [doc, ""]
        lines += _figures(figures, error, seconds)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    p.add_argument("--only", nargs="*", default=[], help="benchmark names (e.g. bench_pool) to run")
    p.add_argument("--output", default=str(HERE / "HISTORY.md"))
    args = p.parse_args(argv)
    results = []
    failed = 0
    for path in discover():
        if args.only and path.stem not in args.only:
            continue
        print(f"== {path.stem}", flush=True)
        figures, error, seconds, doc = run_one(path, args.quick)
        if error:
            failed += 1
            print(error, flush=True)
        else:
            for k, v in figures.items():
                print(f"   {k:40} {fmt(v)}", flush=True)
        results.append((path.stem, figures, error, seconds, doc))
    command = " ".join([".venv/bin/python", "bench/run_all.py", *(argv if argv is not None else sys.argv[1:])])
    out = Path(args.output)
    # An existing file keeps what it holds: the new figures go in beside the earlier ones.
    out.write_text(merge(out.read_text(), results, command) if out.exists() else render(results, command))
    print(f"wrote {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
