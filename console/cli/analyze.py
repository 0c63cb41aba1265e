"""`gridbus q -better-analyze` and `gridbus analyze`: why a job does not run, in condor_q's words.

The negotiator's `Analyze` method does the work (agents/negotiator/analyze.py): the job against
every Machine ad the collector has, and each top-level `&&` condition of its Requirements against
each of them, and the condition table (gridbus.classad.analysis). This module lays the answer out
as condor_q -better-analyze does: the Requirements and their numbered steps, the job attributes
they read, the table of the steps that decide the match with the number of slots each matches,
then the run analysis summary (which, as HTCondor's, ignores user priority and the rest of the
queue).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridbus.adrefs import closure
from gridbus.classad import nodes as N
from gridbus.classad.analysis import numbered_steps, table_text
from gridbus.classad.exprtree import collect_refs, parse_cached
from gridbus.classad.unparse import PRETTY, format_python, unparse

WIDTH = 80
# condor_q's units after the values of these job attributes ("Gross empiricism", HTCondor says).
UNITS = {"requestdisk": " (kb)", "requestmemory": " (mb)"}


def _wrapped(parts: list[str], indent: str = "    ") -> str:
    """`a && b && c` over lines of at most WIDTH characters, broken after an `&&`."""
    lines: list[str] = []
    line = ""
    for i, part in enumerate(parts):
        piece = part + (" &&" if i < len(parts) - 1 else "")
        if line and len(indent) + len(line) + 1 + len(piece) > WIDTH:
            lines.append(indent + line)
            line = ""
        line = f"{line} {piece}" if line else piece
    lines.append(indent + line)
    return "\n".join(lines)


def _conjuncts(requirements: str) -> list[str]:
    """The top-level `&&` operands of the expression, as written."""
    node = parse_cached(requirements)
    if isinstance(node, N.Chain) and node.op == "&&":
        return [unparse(o, PRETTY) for o in node.operands]
    return [unparse(node, PRETTY)]


def _referenced(job: Mapping[str, Any], requirements: str) -> list[str]:
    """The job's attributes the Requirements read, directly or through other attributes
    (RequestDisk = DiskUsage names DiskUsage too), as HTCondor lists them."""
    mine: set[str] = set()
    collect_refs(parse_cached(requirements), mine, set())
    reached = closure({k.lower(): job[k] for k in job.keys()}, mine) or frozenset(mine)
    return sorted((k for k in job.keys() if k.lower() in reached and k.lower() != "requirements"), key=str.lower)


def _rows(answer: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The condition table's rows; where the negotiator sent none (an expression of more
    conditions than it analyzes one by one, or a negotiator that sends only the per-clause
    counts), one row per top-level clause."""
    if answer.get("Conditions"):  # none: too many conditions to analyze one by one
        return list(answer["Conditions"])
    slots = int(answer.get("Slots", 0))
    return [{"Step": i, "Matched": slots - int(c.get("Rejects", 0)), "Condition": str(c.get("Clause", ""))}
            for i, c in enumerate(answer.get("Clauses") or [])]


def better_analyze(job: Mapping[str, Any], answer: Mapping[str, Any]) -> str:
    """condor_q -better-analyze's text for ``job`` from the negotiator's Analyze ``answer``:
    the Requirements and their numbered steps, the job attributes they read, the condition table
    (each deciding step with the number of slots it matches), then the run analysis summary."""
    cluster, proc = int(job.get("ClusterId", 0)), int(job.get("ProcId", 0))
    job_id = f"{cluster}.{proc:03d}"
    slots = int(answer.get("Slots", 0))
    requirements = _text(job, "Requirements") if "Requirements" in job else ""
    out: list[str] = []
    if requirements:
        out.append(f"The Requirements expression for job {job_id} is\n\n{_wrapped(_conjuncts(requirements))}\n")
        out.extend(f"    {line}" for line in numbered_steps(job, requirements))
        out.append("")
        out.append(f"Job {job_id} defines the following attributes:\n")
        out.extend(f"    {k} = {_text(job, k)}{UNITS.get(k.lower(), '')}" for k in _referenced(job, requirements))
        out.append("")
        out.append(f"The Requirements expression for job {job_id} reduces to these conditions:\n")
        out.append(table_text(_rows(answer)))
    rejected, refuse = int(answer.get("RejectedByJob", 0)), int(answer.get("RejectedBySlot", 0))
    yours, others = int(answer.get("RunningYours", 0)), int(answer.get("ServingOthers", 0))
    out.append(f"{cluster:03d}.{proc:03d}:  Run analysis summary ignoring user priority.  "
               f"Of {slots} slots on {int(answer.get('Machines', 0))} machines,")
    out.append(f"  {rejected:5d} slots are rejected by your job's requirements")
    out.append(f"  {refuse:5d} slots reject your job because of their own requirements")
    if yours:
        out.append(f"  {yours:5d} slots match and are already running your jobs")
    if others:
        out.append(f"  {others:5d} slots match but are serving other users")
    out.append(f"  {int(answer.get('Available', 0)):5d} slots match and are willing to run your job")
    if slots and int(answer.get("Matching", 0)) == 0:
        out.append("\nWARNING:  Be advised:")
        out.append("   No machines matched the job's constraints" if rejected == slots
                   else "   Job did not match any machines' constraints")
    return "\n".join(out) + "\n"


def _text(job: Mapping[str, Any], name: str) -> str:
    lookup = getattr(job, "lookup", None)
    if lookup is not None:
        return str(lookup(name))
    return format_python(job[name])
