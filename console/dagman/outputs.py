"""The files DAGMan writes beside the DAG: ``<dag>.dagman.out`` (its log), the node status file
(ClassAds in HTCondor's new format) and the DOT picture of the DAG.

Each writer is given the DAG's status and its nodes' runs (gridbus.console.dagman.noderun), never
the engine: the engine calls these, and they call nothing of it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridbus.console.dagman.noderun import (
    DAG_STATUS_NAMES,
    DONE,
    ERROR,
    FUTILE,
    NOT_READY,
    POSTRUN,
    PRERUN,
    READY,
    SUBMITTED,
    NodeRun,
    held_procs,
    idle_procs,
    state_counts,
)
from gridbus.dag.model import Dag


class DagmanOut:
    """``<dag>.dagman.out``: lines stamped ``MM/DD/YY HH:MM:SS`` as condor_dagman stamps its log."""

    def __init__(self, path: Path):
        self.path = path
        self._fh = open(path, "a", buffering=1)  # noqa: SIM115 (open for DAGMan's lifetime)

    def write(self, message: str) -> None:
        stamp = time.strftime("%m/%d/%y %H:%M:%S")
        for line in message.splitlines() or [""]:
            self._fh.write(f"{stamp} {line}\n")

    def banner(self, dag_file: Path, dagman_id: int, options: dict[str, Any], nodes: int) -> None:
        self.write("******************************************************")
        self.write(f"** gridbus DAGMan ({dagman_id}.0) STARTING UP")
        self.write(f"** PID = {os.getpid()}")
        self.write("******************************************************")
        for name in ("DAGMAN_MAX_JOBS_IDLE", "DAGMAN_MAX_JOBS_SUBMITTED", "DAGMAN_MAX_PRE_SCRIPTS",
                     "DAGMAN_MAX_POST_SCRIPTS", "DAGMAN_USER_LOG_SCAN_INTERVAL"):
            self.write(f"{name} setting: {options[name]}")
        self.write(f"Parsing 1 dagfiles\nParsing {dag_file} ...\nDag contains {nodes} total jobs")

    def status_table(self, status: int, runs: Mapping[str, NodeRun]) -> None:
        """The DAG's status and its nodes counted by state, as condor_dagman logs them."""
        c = state_counts(runs.values())
        self.write(f"DAG status: {status} ({DAG_STATUS_NAMES.get(status, '?')})")
        self.write(f"Of {len(runs)} nodes total:")
        self.write(" Done     Pre   Queued    Post   Ready   Un-Ready   Failed   Futile")
        self.write("  ===     ===      ===     ===     ===        ===      ===      ===")
        self.write(f"{c[DONE]:5d} {c[PRERUN]:7d} {c[SUBMITTED]:8d} {c[POSTRUN]:7d} {c[READY]:7d} "
                   f"{c[NOT_READY]:10d} {c[ERROR]:8d} {c[FUTILE]:8d}")
        self.write(f"{held_procs(runs.values())} job proc(s) currently held")

    def exiting(self, code: int) -> None:
        self.write(f"**** gridbus DAGMan (pid {os.getpid()}) pid {os.getpid()} EXITING WITH STATUS {code}")
        self._fh.close()


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_node_status(path: Path, dag_file: Path, status: int, runs: Mapping[str, NodeRun], now: float,
                      next_update: float) -> None:
    """The node status file: a DagStatus ad, one NodeStatus ad per node, a StatusEnd ad saying
    when the next is due; written to a temporary file and renamed, so a reader never sees half of it."""
    c = state_counts(runs.values())
    ads = [[
        'Type = "DagStatus"',
        f"DagFiles = {{\n    {_q(dag_file.name)}\n  }}",
        f"Timestamp = {int(now)}",
        f"DagStatus = {status}",
        f"NodesTotal = {len(runs)}",
        f"NodesDone = {c[DONE]}",
        f"NodesPre = {c[PRERUN]}",
        f"NodesQueued = {c[SUBMITTED]}",
        f"NodesPost = {c[POSTRUN]}",
        f"NodesReady = {c[READY]}",
        f"NodesUnready = {c[NOT_READY]}",
        f"NodesFutile = {c[FUTILE]}",
        f"NodesFailed = {c[ERROR]}",
        f"JobProcsHeld = {held_procs(runs.values())}",
        f"JobProcsIdle = {idle_procs(runs.values())}",
    ]]
    for run in runs.values():
        ads.append(_node_ad(run))
    ads.append(['Type = "StatusEnd"', f"EndTime = {int(now)}", f"NextUpdate = {int(next_update)}"])
    text = "".join("[\n" + "".join(f"  {line};\n" for line in ad) + "]\n" for ad in ads)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _node_ad(run: NodeRun) -> list[str]:
    queued = run.procs - run.procs_done if run.state == SUBMITTED else 0
    return [
        'Type = "NodeStatus"',
        f"Node = {_q(run.node.name)}",
        f"NodeStatus = {run.state}",
        f"StatusDetails = {_q(run.details if run.state != SUBMITTED else ('idle' if run.idle_procs else 'running'))}",
        f"RetryCount = {run.retries_used}",
        f"JobProcsQueued = {queued}",
        f"JobProcsHeld = {len(run.held_procs)}",
    ]


def write_dot(path: Path, dag: Dag) -> None:
    """The DAG as a Graphviz digraph (DOT command), written once at start."""
    lines = ["digraph DAG {"]
    for node in dag.all_nodes():
        lines.append(f'    "{node.name}" [shape=ellipse label="{node.name}"]')
    for node in dag.nodes.values():
        for child in node.children:
            lines.append(f'    "{node.name}" -> "{child}"')
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")
