"""The GPU commands of a submit description, as condor_submit turns them into job attributes.

``request_gpus`` is ``RequestGPUs``; ``require_gpus`` is ``RequireGPUs``, a constraint on the
properties of each device (``Capability >= 7.0``). ``gpus_minimum_capability``,
``gpus_maximum_capability``, ``gpus_minimum_memory`` and ``gpus_minimum_runtime`` are recorded as
``GPUsMinCapability``, ``GPUsMaxCapability``, ``GPUsMinMemory`` (MiB) and ``GPUsMinRuntime``
(major * 1000 + minor * 10) and each adds its clause to ``RequireGPUs``, unless ``require_gpus``
already names that property. None of them is recorded without ``request_gpus``.

The Requirements clause: ``(TARGET.GPUs >= RequestGPUs)``, or, for a job with ``RequireGPUs``,
``(countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs)``: how many of the slot's
free devices qualify. None for a request of 0 or less, or where the user's requirements name GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gridbus.classad import ExprTree, nodes
from gridbus.classad.exprtree import collect_refs, parse_cached
from gridbus.submit.errors import SubmitError
from gridbus.submit.units import memory_mib

Getter = Callable[[str], "str | None"]

_INT = re.compile(r"^[+-]?\d+$")
_REAL = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+)$")
_VERSION = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*$")

# (command, attribute, the property it constrains, the clause it adds to RequireGPUs)
_CLAUSES = (
    ("gpus_minimum_capability", "GPUsMinCapability", "capability", "Capability >= GPUsMinCapability"),
    ("gpus_maximum_capability", "GPUsMaxCapability", "capability", "Capability <= GPUsMaxCapability"),
    ("gpus_minimum_memory", "GPUsMinMemory", "globalmemorymb", "GlobalMemoryMb >= GPUsMinMemory"),
    ("gpus_minimum_runtime", "GPUsMinRuntime", "maxsupportedversion", "MaxSupportedVersion >= GPUsMinRuntime"),
)
COMMANDS = ("request_gpus", "require_gpus", *(c[0] for c in _CLAUSES))


def _number_or_expr(text: str) -> Any:
    t = text.strip()
    if _INT.match(t):
        return int(t)
    if _REAL.match(t):
        return float(t)
    try:
        return ExprTree(t)
    except Exception as exc:  # the parser's own error names the place
        raise SubmitError(f"{t!r} is not a number or a ClassAd expression: {exc}") from None


def _value(command: str, text: str) -> Any:
    if command == "gpus_minimum_memory":
        mib = memory_mib(text)
        return mib if mib is not None else _number_or_expr(text)
    if command == "gpus_minimum_runtime":
        m = _VERSION.match(text)
        if m:
            return int(m.group(1)) * 1000 + int(m.group(2) or 0) * 10
    return _number_or_expr(text)


def _own_refs(text: str) -> set[str]:
    """Lower-cased names an expression reads from its own ad (not TARGET's)."""
    mine: set[str] = set()
    collect_refs(parse_cached(text), mine, set())
    return mine


def _wrapped_for_and(text: str) -> str:
    # condor_submit parenthesises a constraint whose top operator binds looser than &&.
    node = parse_cached(text)
    loose = (type(node) is nodes.Chain and node.op == "||") or type(node) in (nodes.Conditional, nodes.Elvis) \
        or (type(node) is nodes.Binary and node.op == "||")
    return f"({text})" if loose else text


def gpu_attrs(get: Getter) -> dict[str, Any]:
    """RequestGPUs, RequireGPUs and the GPUsMin*/Max* attributes the description asks for."""
    request = (get("request_gpus") or "").strip()
    if not request:
        return {}
    try:
        out: dict[str, Any] = {"RequestGPUs": _number_or_expr(request)}
    except SubmitError as exc:
        raise SubmitError(f"request_gpus: {exc}") from None
    require = (get("require_gpus") or "").strip()
    try:
        refs = _own_refs(require) if require else set()
    except Exception as exc:
        raise SubmitError(f"require_gpus: {require!r} is not a ClassAd expression: {exc}") from None
    clauses = []
    for command, attr, prop, clause in _CLAUSES:
        text = (get(command) or "").strip()
        if not text:
            continue
        try:
            out[attr] = _value(command, text)
        except SubmitError as exc:
            raise SubmitError(f"{command}: {exc}") from None
        if prop not in refs:
            clauses.append(clause)
    if require and clauses:
        out["RequireGPUs"] = ExprTree(" && ".join([_wrapped_for_and(require), *clauses]))
    elif require:
        out["RequireGPUs"] = ExprTree(require)
    elif clauses:
        out["RequireGPUs"] = ExprTree(" && ".join(clauses))
    return out


def requirements_clause(attrs: dict[str, Any], user_refs: set[str]) -> str | None:
    """The Requirements clause for the GPU request in ``attrs`` (see the module docstring)."""
    request = attrs.get("RequestGPUs")
    if request is None or "gpus" in user_refs:
        return None
    if isinstance(request, int | float) and request <= 0:
        return None
    if "RequireGPUs" in attrs:
        return "(countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs)"
    return "(TARGET.GPUs >= RequestGPUs)"
