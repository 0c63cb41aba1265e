"""The layers the imports show: the import graph of the whole tree, function-local imports
included, has no cycle, and core (`gridbus/`) imports nothing from the daemons
(`gridbus.agents`) or the clients (`gridbus.console`).

`from pkg import name` is an edge to `pkg.name` where that is a module, else to `pkg`; a module's
import of its own parent package's submodule does not count the parent's `__init__` (Python runs
it first whatever the form, so it would make every re-exporting package a cycle).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Where each installed package's source lives (pyproject's package-dir mapping).
SOURCES = {"gridbus": ROOT / "gridbus", "gridbus.agents": ROOT / "agents", "gridbus.console": ROOT / "console"}
UPPER = ("gridbus.agents", "gridbus.console")

# gridbus.classad's layers, lowest first (docs/architecture.md): a module imports only from its own
# layer and those before it. The functions are given what they call in the evaluator's API layer.
CLASSAD_LAYERS = [
    ("values", {"values", "errors", "limits", "cnumbers", "timefmt"}),
    ("tree and parser", {"nodes", "lexer", "parser", "unparse"}),
    ("evaluator", {"scope", "operators", "compiler"}),
    ("functions", {"functions"}),
    ("API", {"", "exprtree", "flatten", "classad", "adparse", "analysis"}),
]


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, source in SOURCES.items():
        for path in source.rglob("*.py"):
            parts = list(path.relative_to(source).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if name.startswith(UPPER) and package == "gridbus":
                continue  # gridbus/ has no agents/ or console/ of its own; never shadow the mapping
            found[name] = path
        for path in source.rglob("*.c"):  # a C extension (the starter's fast spawn) imports nothing of ours
            found[".".join([package, *path.relative_to(source).with_suffix("").parts])] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every module of the tree that ``name`` imports, at any depth of its code."""
    if path.suffix != ".py":
        return
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: len(name.split(".")) - (node.level - (1 if is_package else 0))]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imports_of(name, path, known)) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_the_walker_sees_function_local_imports_and_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [frozenset({"a", "b", "c"})]
    known = modules()
    assert "gridbus.agents.schedd.agent" in known and "gridbus.console.cli" in known and "gridbus.wire" in known


def test_no_import_cycle():
    found = cycles(graph())
    assert not found, f"import cycles: {[sorted(c) for c in found]}"


def test_core_imports_neither_the_daemons_nor_the_clients():
    upward = {(name, target) for name, targets in graph().items() if not name.startswith(UPPER)
              for target in targets if target.startswith(UPPER)}
    assert not upward, f"core reaching up: {sorted(upward)}"


def classad_layer(module: str) -> int:
    """The index in CLASSAD_LAYERS of a gridbus.classad module (a functions module by its package)."""
    rest = module.removeprefix("gridbus.classad").removeprefix(".")
    first = rest.split(".")[0]
    for i, (_, names) in enumerate(CLASSAD_LAYERS):
        if first in names:
            return i
    raise AssertionError(f"{module} is in no layer of CLASSAD_LAYERS: add it to one")


def test_classad_imports_only_its_own_and_lower_layers():
    inside = {name: targets for name, targets in graph().items() if name.startswith("gridbus.classad")}
    upward = sorted(
        f"{name} ({CLASSAD_LAYERS[classad_layer(name)][0]}) imports {target} ({CLASSAD_LAYERS[classad_layer(target)][0]})"
        for name, targets in inside.items() for target in targets
        if target.startswith("gridbus.classad") and classad_layer(target) > classad_layer(name)
    )
    assert not upward, f"gridbus.classad reaching up a layer: {upward}"


def test_dagman_is_a_client_program():
    """The program the DAGMan job runs is a client's (it submits through the console's Schedd),
    and the module core's DAGMan job description names exists there."""
    from gridbus.dag.dagmanjob import DAGMAN_MODULE

    known = modules()
    assert DAGMAN_MODULE.startswith("gridbus.console.") and f"{DAGMAN_MODULE}.__main__" in known
    assert not [name for name in known if name.startswith("gridbus.dagman")]
