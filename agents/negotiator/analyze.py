"""Why is a job idle? condor_q -better-analyze's figures, over the collector's Machine ads.

``analyze(job, machines)`` counts the slots the job's Requirements reject, the slots whose own
Requirements reject the job, the slots that match both ways (how many of them are free, busy with the owner's jobs or with
others'), and
for each top-level ``&&`` clause of the job's Requirements how many slots it rejects, so the clause
that fails most is named; and condor_q's condition table (gridbus.classad.analysis): each step of
the Requirements that decides the match, with the number of slots it matches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gridbus import classad
from gridbus.agents.negotiator.matchmaker import get, test_expr
from gridbus.classad.analysis import condition_table


def split_conjuncts(text: str) -> list[str]:
    """The top-level ``&&`` clauses of ClassAd text (outside parentheses, brackets and strings)."""
    text = text.strip()
    # Strip one pair of parentheses that encloses the whole expression.
    while text.startswith("(") and _closing(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    out, depth, start, second = [], 0, 0, -1
    for i, c in _unquoted(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and i != second and text.startswith("&&", i):
            out.append(text[start:i].strip())
            start, second = i + 2, i + 1  # the second '&' does not open another split
    out.append(text[start:].strip())
    return [c for c in out if c]


def _closing(text: str, at: int) -> int:
    """Where the parenthesis opened at ``at`` closes, or -1."""
    depth = 0
    for i, c in _unquoted(text, at):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _unquoted(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """Index and character of each character of ``text`` outside string literals (the quotes
    themselves left out; a backslash escapes the next character inside a string)."""
    quote, i = "", start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        else:
            yield i, c
        i += 1


def analyze(job: dict[str, Any], machines: list[dict[str, Any]]) -> dict[str, Any]:
    """The match analysis of ``job`` against the pool's Machine ads (see the module docstring)."""
    requirements = get(job, "Requirements")
    clauses = split_conjuncts(str(requirements)) if requirements is not None else []
    rejects = [0] * len(clauses)
    rejected_by_job = rejected_by_slot = matching = available = running_yours = serving_others = 0
    owner = str(get(job, "Owner", "") or "")
    hosts = set()
    for m in machines:
        hosts.add(str(get(m, "Machine", get(m, "Name", "")) or ""))
        job_ok = test_expr(requirements, job, m)
        slot_ok = test_expr(get(m, "Requirements"), m, job)
        if not job_ok:
            rejected_by_job += 1
            for i, clause in enumerate(clauses):
                if not classad.compile(clause).test(job, m):
                    rejects[i] += 1
        if not slot_ok:
            rejected_by_slot += 1
        if job_ok and slot_ok:
            matching += 1
            if get(m, "State", "Unclaimed") == "Unclaimed":
                available += 1
            elif str(get(m, "RemoteOwner", get(m, "RemoteUser", "")) or "").split("@")[0] == owner:
                running_yours += 1
            else:
                serving_others += 1
    table: list[dict[str, Any]] = [{"Clause": c, "Rejects": n} for c, n in zip(clauses, rejects, strict=True)]
    worst = max(table, key=lambda r: r["Rejects"], default=None)
    total = len(machines)
    if total == 0:
        summary = "no slots in the pool: the collector has no Machine ads"
    elif matching == 0:
        summary = (
            f"no slot matches: the job's Requirements reject {rejected_by_job} of {total} slots"
            + (f" (most often the clause {worst['Clause']!r}, {worst['Rejects']} slots)" if worst and worst["Rejects"] else "")
            + f", and {rejected_by_slot} slots' Requirements reject the job"
        )
    else:
        summary = f"{matching} of {total} slots match both ways, {available} of them unclaimed"
    return {
        "Slots": total,
        "Machines": len(hosts),
        "RejectedByJob": rejected_by_job,
        "RejectedBySlot": rejected_by_slot,
        "Matching": matching,
        "Available": available,
        "RunningYours": running_yours,
        "ServingOthers": serving_others,
        "Clauses": table,
        "Conditions": condition_table(job, str(requirements), machines) if requirements is not None else [],
        "WorstClause": worst["Clause"] if worst and worst["Rejects"] else "",
        "Summary": summary,
    }
