"""The states DAGMan's nodes and DAG go through, and what DAGMan knows of one node while it runs.

The engine changes them; the files DAGMan writes (gridbus.console.dagman.outputs) read them: both
import them from here, so neither imports the other's module.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field

from gridbus.console.dagman.scripts import ScriptOutput
from gridbus.dag.model import Node

# Node states (the node status file's NodeStatus values).
NOT_READY, READY, PRERUN, SUBMITTED, POSTRUN, DONE, ERROR, FUTILE = range(8)
STATE_NAMES = ["STATUS_NOT_READY", "STATUS_READY", "STATUS_PRERUN", "STATUS_SUBMITTED", "STATUS_POSTRUN",
               "STATUS_DONE", "STATUS_ERROR", "STATUS_FUTILE"]
# DAG status (DAG_Status in the DAGMan job ad and the status file).
DAG_STATUS_OK, DAG_STATUS_ERROR, DAG_STATUS_NODE_FAILED, DAG_STATUS_ABORT, DAG_STATUS_RM = 0, 1, 2, 3, 4
DAG_STATUS_NAMES = {0: "DAG_STATUS_OK", 1: "DAG_STATUS_ERROR", 2: "DAG_STATUS_NODE_FAILED",
                    3: "DAG_STATUS_ABORT", 4: "DAG_STATUS_RM"}
# condor_dagman's exit codes.
EXIT_OKAY, EXIT_ERROR, EXIT_ABORT = 0, 1, 2


@dataclass
class NodeRun:
    """What DAGMan knows of one node while it runs."""

    node: Node
    state: int = NOT_READY
    waiting: int = 0  # parents not done yet
    retries_used: int = 0
    cluster: int | None = None
    procs: int = 0
    procs_done: int = 0
    # Procs whose end (terminated or aborted) was counted: a user log may hold an event twice
    # after a schedd crash (it is delivered at least once), and a proc ends once.
    ended_procs: set[int] = field(default_factory=set)
    idle_procs: set[int] = field(default_factory=set)  # counted towards -maxidle
    held_procs: set[int] = field(default_factory=set)
    job_failed: bool = False
    return_value: int = 0  # the job's (or the failed PRE script's) exit value, $RETURN
    script: subprocess.Popen | None = None
    script_output: ScriptOutput | None = None  # the running script's DEBUG capture, if it has one
    not_before: float = 0.0  # DEFER: the script runs again after this time
    details: str = ""
    order: int = 0
    pre_done: bool = False  # the PRE script of this attempt succeeded; the job waits for a throttle


def state_counts(runs: Iterable[NodeRun]) -> dict[int, int]:
    """How many nodes are in each state (every state present, 0 when none is)."""
    out = dict.fromkeys(range(len(STATE_NAMES)), 0)
    for r in runs:
        out[r.state] += 1
    return out


def idle_procs(runs: Iterable[NodeRun]) -> int:
    """The node job procs DAGMan counts as idle (towards -maxidle)."""
    return sum(len(r.idle_procs) for r in runs)


def held_procs(runs: Iterable[NodeRun]) -> int:
    return sum(len(r.held_procs) for r in runs)
