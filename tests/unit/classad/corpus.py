"""Expressions harvested from HTCondor's ClassAd test corpora (the expected values in the files
are partly stale, so only the expressions are taken; the library gives the answers)."""

from __future__ import annotations

import re
from pathlib import Path

REF = Path("/work/shared/reference/htcondor")


def _statements(text: str) -> list[str]:
    """Join continuation lines: a statement goes on while its brackets are open."""
    out: list[str] = []
    cur = ""
    depth = 0
    for line in text.splitlines():
        stripped = line.strip()
        if not cur and (not stripped or stripped.startswith("//") or stripped.startswith("#")):
            continue
        cur = (cur + " " + stripped) if cur else stripped
        depth = _depth(cur)
        if depth <= 0:
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out


def _depth(s: str) -> int:
    """Bracket depth at the end of ``s``, string literals skipped (the scan _split_top does)."""
    return _scan(s)[1]


def _split_top(s: str) -> list[str]:
    """``s`` split at its top-level commas (outside brackets and string literals)."""
    return _scan(s)[0]


def _scan(s: str) -> tuple[list[str], int]:
    """The top-level comma-separated parts of ``s`` and the bracket depth at its end."""
    parts, d, in_str, cur = [], 0, False, []
    i = 0
    while i < len(s):
        c = s[i]
        if in_str:
            if c == "\\" and i + 1 < len(s):
                cur.append(c + s[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "([{":
            d += 1
        elif c in ")]}":
            d -= 1
        elif c == "," and d == 0:
            parts.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur).strip())
    return parts, d


def functional_expressions() -> list[str]:
    variables: dict[str, str] = {}
    exprs: list[str] = []

    def subst(e: str) -> str:
        return re.sub(r"\$(\w+)", lambda m: "(" + variables.get(m.group(1), "undefined") + ")", e)

    for st in _statements((REF / "functional_tests.txt").read_text()):
        m = re.match(r"(eval|let)\s+(\w+)\s*=\s*(.*)$", st, re.S)
        if m:
            variables[m.group(2)] = subst(m.group(3)).strip().rstrip(";").strip()
            exprs.append(variables[m.group(2)])
            continue
        m = re.match(r"(same|diff|sameq|diffq)\s+(.*)$", st, re.S)
        if m:
            exprs.extend(subst(p).rstrip(";").strip() for p in _split_top(m.group(2)) if p)
    return list(dict.fromkeys(exprs))


def classad_test_cases() -> tuple[dict[str, str], list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(ads by name, (ad, expression) evaluations, (kind, left, right) matches)."""
    text = (REF / "classad_tests.txt").read_text()
    ads: dict[str, str] = {}
    evals: list[tuple[str, str]] = []
    matches: list[tuple[str, str, str]] = []
    for m in re.finditer(r"^begin-classad\s+(\S+)\s*(.*?)^end-classad", text, re.S | re.M):
        ads[m.group(1)] = m.group(2).strip()
    for m in re.finditer(r"^evaluate\s+(\S+)\s+(.*)$", text, re.M):
        evals.append((m.group(1), m.group(2).strip().rstrip(";").strip()))
    for m in re.finditer(r"^test-match\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M):
        matches.append((m.group(1), m.group(2), m.group(3)))
    return ads, evals, matches
