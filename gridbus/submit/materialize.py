"""Per-proc substitution for late materialization: the one code path the client and the schedd share.

The submitting client expands a submit description whole (every macro, `$(Cluster)` included, in
the submitter's directory). For a cluster the schedd materializes late (max_idle, max_materialize)
it sends, instead of every proc's ad, a *proc template* and the item rows: the attributes that
differ from proc to proc, each as text in which only the per-proc macros are left (`$(Process)`,
`$(ProcId)`, `$(Node)`, `$(Step)`, `$(Row)`, `$(ItemIndex)`, `$(Item)` and the queue variables).
The schedd makes proc N by substituting those macros in that text, here, and nothing else: no file
is read, no command runs, no other macro is known. The client checks, with this same function,
that the template gives every proc exactly the ad it built; if it does not (an attribute whose
value is not a plain text substitution, such as `request_memory = $(Item)` with units), it sends
every proc's ad instead.

A template maps an attribute to `[kind, text]`: kind "str" (a string), "expr" (a ClassAd
expression) or "value" (ClassAd text that is a literal when it reads as one, as `+Attr` values are).
Items are `[row number, {variable: value}]`, each made into `steps` procs (`queue N` over items).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

KINDS = ("str", "expr", "value")
BUILTIN = ("process", "procid", "node", "step", "row", "itemindex", "item")
# condor_submit's table of macro defaults: each of these is found only where the submit
# description defines no macro of that name (`node = A` from a DAG's VARS is the node's, not the
# built-in). The queue statement's variables and Item are set into the description itself, and
# win. $(Node) is the parallel universe's node number, empty in every other universe (gridbus
# runs no parallel universe); $(JobId) is "$(ClusterId).$(ProcId)".
DEFAULTS = frozenset({"cluster", "clusterid", "process", "procid", "node", "step", "row", "itemindex", "jobid"})
JOB_ID = "$(ClusterId).$(ProcId)"

# How the client marks a per-proc macro while it builds the template ad: an identifier, so an
# expression that mentions it still parses.
_MARK = re.compile(r"__gbm_([A-Za-z_][A-Za-z0-9_]*?)__")
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)\)")


class TemplateError(ValueError):
    """A proc template or item row that cannot make a proc (the sentence says which part)."""


def marker(name: str) -> str:
    return f"__gbm_{name.lower()}__"


def unmark(text: str) -> str:
    """Template text from a value built with markers: each marker becomes its `$(name)`."""
    return _MARK.sub(lambda m: f"$({m.group(1)})", text)


def proc_macros(proc_id: int, step: int, row_no: int, row: Mapping[str, str]) -> dict[str, str]:
    """The per-proc macro values of one proc (lower-case names), as condor_submit defines them."""
    out = {"process": str(proc_id), "procid": str(proc_id), "node": "", "step": str(step),
           "row": str(row_no), "itemindex": str(row_no), "jobid": JOB_ID}
    out.update({str(k).lower(): str(v) for k, v in row.items()})  # (Item among them, where the queue sets it)
    return out


def substitute(text: str, macros: Mapping[str, str]) -> str:
    """``text`` with each `$(name)` of ``macros`` replaced by its value; any other text is kept."""
    if "$(" not in text:
        return text
    return _REF.sub(lambda m: macros.get(m.group(1).lower(), m.group(0)), text)


def value_of(kind: str, text: str) -> Any:
    from gridbus.submit.jobad import classad_value, expr

    if kind == "str":
        return text
    if kind == "expr":
        return expr(text)
    return classad_value(text)


def proc_ad(template: Mapping[str, Sequence[str]], macros: Mapping[str, str]) -> dict[str, Any]:
    """One proc's attributes from the template (see the module doc)."""
    out: dict[str, Any] = {}
    for name, (kind, text) in template.items():
        out[name] = value_of(kind, substitute(text, macros))
    return out


def proc_for(proc_id: int, items: Sequence[Sequence[Any]], steps: int) -> dict[str, str]:
    """The macros of proc ``proc_id`` of a cluster of ``len(items) * steps`` procs."""
    row_no, row = items[proc_id // steps]
    return proc_macros(proc_id, proc_id % steps, int(row_no), row)


def check(template: Any, items: Any, steps: Any) -> int:
    """Validate a template, its items and steps as they come off the wire; answers the proc count."""
    if not isinstance(template, dict) or not template:
        raise TemplateError("Template must be a non-empty map of attribute to [kind, text]")
    for name, entry in template.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise TemplateError(f"Template has an invalid attribute name {str(name)[:40]!r}")
        if (not isinstance(entry, (list, tuple)) or len(entry) != 2 or entry[0] not in KINDS
                or not isinstance(entry[1], str)):
            raise TemplateError(f"Template.{name} must be [kind, text] with kind one of {', '.join(KINDS)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise TemplateError(f"Steps must be a positive integer (procs per item row), got {steps!r}")
    if not isinstance(items, list) or not items:
        raise TemplateError("Items must be a non-empty list of [row number, {variable: value}]")
    for i, item in enumerate(items):
        if (not isinstance(item, (list, tuple)) or len(item) != 2 or isinstance(item[0], bool)
                or not isinstance(item[0], int) or not isinstance(item[1], dict)
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in item[1].items())):
            raise TemplateError(f"Items[{i}] must be [row number, {{variable: text}}]")
    # Every text must make a value for the first proc (an expression that does not parse is refused
    # now rather than when the proc is made).
    try:
        proc_ad(template, proc_for(0, items, steps))
    except Exception as exc:
        raise TemplateError(f"Template does not make a job ad: {exc}") from None
    return len(items) * steps
