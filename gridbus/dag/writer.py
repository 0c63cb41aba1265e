"""A `Dag` printed in HTCondor's DAG language, and the rescue DAG DAGMan writes on failure."""

from __future__ import annotations

import time
from collections.abc import Iterable

from gridbus.dag.model import FINAL, SUBDAG, Dag, Node, Script

RESCUE_DAG_VERSION = "2.1.0"  # the version HTCondor's DAGMan writes in a rescue DAG's header


def _quote_var(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _script(name: str, s: Script) -> str:
    parts = ["SCRIPT"]
    if s.defer_status is not None:
        parts += ["DEFER", str(s.defer_status), str(s.defer_time)]
    if s.debug_file:
        parts += ["DEBUG", s.debug_file, s.debug_type]
    return " ".join([*parts, s.kind, name, s.executable, *s.arguments])


def node_lines(node: Node) -> list[str]:
    """The commands that define one node (JOB/FINAL/SUBDAG EXTERNAL and its per-node commands)."""
    head = {FINAL: "FINAL", SUBDAG: "SUBDAG EXTERNAL"}.get(node.kind, "JOB")
    parts = [head, node.name, node.submit_file]
    if node.directory:
        parts += ["DIR", node.directory]
    if node.noop:
        parts.append("NOOP")
    if node.done and node.kind != FINAL:
        parts.append("DONE")
    out = [" ".join(parts)]
    if node.vars:
        out.append(" ".join([f"VARS {node.name}", *(f"{k}={_quote_var(v)}" for k, v in node.vars.items())]))
    if node.retries:
        out.append(f"RETRY {node.name} {node.retries}"
                   + (f" UNLESS-EXIT {node.retry_unless_exit}" if node.retry_unless_exit is not None else ""))
    for script in (node.pre, node.post, node.hold):
        if script is not None:
            out.append(_script(node.name, script))
    if node.pre_skip is not None:
        out.append(f"PRE_SKIP {node.name} {node.pre_skip}")
    if node.priority:
        out.append(f"PRIORITY {node.name} {node.priority}")
    if node.category:
        out.append(f"CATEGORY {node.name} {node.category}")
    if node.abort_on is not None:
        out.append(f"ABORT-DAG-ON {node.name} {node.abort_on}"
                   + (f" RETURN {node.abort_return}" if node.abort_return is not None else ""))
    return out


def format_dag(dag: Dag) -> str:
    """The DAG as DAG-language text that parses back to the same DAG."""
    out: list[str] = []
    if dag.config:
        out.append(f"CONFIG {dag.config}")
    if dag.jobstate_log:
        out.append(f"JOBSTATE_LOG {dag.jobstate_log}")
    if dag.node_status_file:
        out.append(" ".join([f"NODE_STATUS_FILE {dag.node_status_file} {dag.node_status_interval}",
                             *(["ALWAYS-UPDATE"] if dag.node_status_always else [])]))
    if dag.dot:
        out.append("DOT " + " ".join(dag.dot))
    out += [f"SET_JOB_ATTR {k} = {v}" for k, v in dag.job_attrs.items()]
    out += [f"MAXJOBS {c} {v}" for c, v in dag.maxjobs.items()]
    for node in dag.nodes.values():
        out += node_lines(node)
    for node in dag.nodes.values():
        if node.children:
            out.append(f"PARENT {node.name} CHILD {' '.join(node.children)}")
    if dag.final is not None:
        out += node_lines(dag.final)
    return "\n".join(out) + "\n"


def rescue_text(dag_file: str, nodes: Iterable[Node], done: set[str], failed: list[str],
                premarked: int, when: float | None = None) -> str:
    """A partial rescue DAG as HTCondor's DAGMan writes it: a header of statistics, then one
    ``DONE name`` per finished node (never the FINAL node); resubmitting the original DAG file
    reads it on top of the original."""
    nodes = list(nodes)
    tm = time.gmtime(time.time() if when is None else when)
    lines = [
        "# Rescue DAG file, created after running",
        f"#   the {dag_file} DAG file",
        f"# Created {tm.tm_mon}/{tm.tm_mday}/{tm.tm_year} {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} UTC",
        f"# Rescue DAG version: {RESCUE_DAG_VERSION}",
        "#",
        f"# Total number of Nodes: {len(nodes)}",
        f"# Nodes premarked DONE: {premarked}",
        f"# Nodes that failed: {len(failed)}",
        "#   " + "".join(f"{name}," for name in failed) + "<ENDLIST>",
        "",
    ]
    lines += [f"DONE {n.name}" for n in nodes if n.kind != FINAL and n.name in done]
    return "\n".join(lines) + "\n"
