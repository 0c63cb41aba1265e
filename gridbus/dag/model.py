"""The in-memory form of a DAG description: nodes, edges and the DAG-wide commands.

The parser (gridbus.dag.parser) builds a `Dag` from HTCondor's DAG language; the writer
(gridbus.dag.writer) prints one back; DAGMan (gridbus.console.dagman) runs one. Node names of spliced DAGs
carry their splice's name as a prefix (``splice+node``), as HTCondor's DAGMan names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Node kinds.
JOB = "JOB"
SUBDAG = "SUBDAG"
FINAL = "FINAL"


@dataclass
class Script:
    """A PRE, POST or HOLD script: run with /bin/sh-free argument splitting, in the node's DIR."""

    kind: str  # PRE, POST or HOLD
    executable: str
    arguments: list[str] = field(default_factory=list)
    defer_status: int | None = None  # DEFER: this exit status means "run me again later"
    defer_time: int = 0  # ... after this many seconds
    debug_file: str = ""  # DEBUG: the file its captured output is appended to (relative to the node's DIR)
    debug_type: str = ""  # ... STDOUT, STDERR or ALL

    def command_line(self) -> str:
        return " ".join([self.executable, *self.arguments])


@dataclass
class Node:
    name: str
    submit_file: str  # the submit description file (a DAG file for a SUBDAG EXTERNAL node)
    kind: str = JOB
    directory: str | None = None  # DIR, relative to the DAG file's directory unless absolute
    noop: bool = False
    done: bool = False
    retries: int = 0
    retry_unless_exit: int | None = None
    vars: dict[str, str] = field(default_factory=dict)
    pre: Script | None = None
    post: Script | None = None
    hold: Script | None = None
    pre_skip: int | None = None
    priority: int = 0
    category: str | None = None
    abort_on: int | None = None  # ABORT-DAG-ON exit value
    abort_return: int | None = None  # ... RETURN value
    parents: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    source: str = ""  # "file:line" of its JOB command, for messages


@dataclass
class Dag:
    """A parsed DAG: nodes in file order, edges on the nodes, the DAG-wide commands."""

    path: Path | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    final: Node | None = None
    maxjobs: dict[str, int] = field(default_factory=dict)  # MAXJOBS per category
    config: str | None = None
    dot: list[str] | None = None  # DOT's arguments: file [UPDATE|DONT-UPDATE] [OVERWRITE|...] [INCLUDE f]
    node_status_file: str | None = None
    node_status_interval: int = 60
    node_status_always: bool = False
    jobstate_log: str | None = None
    job_attrs: dict[str, str] = field(default_factory=dict)  # SET_JOB_ATTR, for the DAGMan job itself

    def add_edge(self, parent: str, child: str) -> None:
        p, c = self.nodes[parent], self.nodes[child]
        if child not in p.children:
            p.children.append(child)
            c.parents.append(parent)

    def all_nodes(self) -> list[Node]:
        """Every node, the FINAL one last."""
        return [*self.nodes.values(), *([self.final] if self.final else [])]

    def roots(self) -> list[str]:
        return [n.name for n in self.nodes.values() if not n.parents]

    def leaves(self) -> list[str]:
        return [n.name for n in self.nodes.values() if not n.children]

    def check_acyclic(self) -> None:
        """Raise ValueError naming a node on a cycle, if there is one."""
        indegree = {name: len(n.parents) for name, n in self.nodes.items()}
        ready = [name for name, d in indegree.items() if d == 0]
        seen = 0
        while ready:
            name = ready.pop()
            seen += 1
            for child in self.nodes[name].children:
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
        if seen != len(self.nodes):
            stuck = sorted(name for name, d in indegree.items() if d > 0)
            raise ValueError(f"the DAG has a cycle through node {stuck[0]}")
