"""The files DAGMan writes beside the DAG: ``<dag>.dagman.out`` (its log), the node status file
(ClassAds in HTCondor's new format), the DOT picture of the DAG, and a script's DEBUG file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gridbus.dag.model import Dag, Script

if TYPE_CHECKING:
    from gridbus.dagman.engine import Engine, NodeRun


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

    def status_table(self, engine: Engine) -> None:
        from gridbus.dagman.engine import (
            DAG_STATUS_NAMES,
            DONE,
            ERROR,
            FUTILE,
            NOT_READY,
            POSTRUN,
            PRERUN,
            READY,
            SUBMITTED,
        )

        c = engine.counts()
        held = sum(len(r.held_procs) for r in engine.runs.values())
        self.write(f"DAG status: {engine.status} ({DAG_STATUS_NAMES.get(engine.status, '?')})")
        self.write(f"Of {len(engine.runs)} nodes total:")
        self.write(" Done     Pre   Queued    Post   Ready   Un-Ready   Failed   Futile")
        self.write("  ===     ===      ===     ===     ===        ===      ===      ===")
        self.write(f"{c[DONE]:5d} {c[PRERUN]:7d} {c[SUBMITTED]:8d} {c[POSTRUN]:7d} {c[READY]:7d} "
                   f"{c[NOT_READY]:10d} {c[ERROR]:8d} {c[FUTILE]:8d}")
        self.write(f"{held} job proc(s) currently held")

    def exiting(self, code: int) -> None:
        self.write(f"**** gridbus DAGMan (pid {os.getpid()}) pid {os.getpid()} EXITING WITH STATUS {code}")
        self._fh.close()


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_node_status(path: Path, engine: Engine, now: float) -> None:
    """The node status file: a DagStatus ad, one NodeStatus ad per node, a StatusEnd ad; written to
    a temporary file and renamed, so a reader never sees half of it."""
    from gridbus.dagman.engine import (
        DONE,
        ERROR,
        FUTILE,
        NOT_READY,
        POSTRUN,
        PRERUN,
        READY,
        SUBMITTED,
    )

    c = engine.counts()
    idle = engine.idle_procs()
    held = sum(len(r.held_procs) for r in engine.runs.values())
    ads = [[
        'Type = "DagStatus"',
        f"DagFiles = {{\n    {_q(engine.dag_file.name)}\n  }}",
        f"Timestamp = {int(now)}",
        f"DagStatus = {engine.status}",
        f"NodesTotal = {len(engine.runs)}",
        f"NodesDone = {c[DONE]}",
        f"NodesPre = {c[PRERUN]}",
        f"NodesQueued = {c[SUBMITTED]}",
        f"NodesPost = {c[POSTRUN]}",
        f"NodesReady = {c[READY]}",
        f"NodesUnready = {c[NOT_READY]}",
        f"NodesFutile = {c[FUTILE]}",
        f"NodesFailed = {c[ERROR]}",
        f"JobProcsHeld = {held}",
        f"JobProcsIdle = {idle}",
    ]]
    for run in engine.runs.values():
        ads.append(_node_ad(run))
    ads.append(['Type = "StatusEnd"', f"EndTime = {int(now)}",
                f"NextUpdate = {int(now + engine.dag.node_status_interval)}"])
    text = "".join("[\n" + "".join(f"  {line};\n" for line in ad) + "]\n" for ad in ads)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _node_ad(run: NodeRun) -> list[str]:
    from gridbus.dagman.engine import SUBMITTED

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


def write_dot(path: Path, dag: Dag, runs: dict[str, NodeRun]) -> None:
    """The DAG as a Graphviz digraph (DOT command), written once at start."""
    lines = ["digraph DAG {"]
    for node in dag.all_nodes():
        lines.append(f'    "{node.name}" [shape=ellipse label="{node.name}"]')
    for node in dag.nodes.values():
        for child in node.children:
            lines.append(f'    "{node.name}" -> "{child}"')
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")


def inherited_streams() -> dict[str, Any]:
    """A script without DEBUG writes to DAGMan's own output and error (the DAGMan job's
    ``<dag>.lib.out`` and ``.lib.err``), as HTCondor's scripts do: what DAGMan printed goes first."""
    sys.stdout.flush()
    sys.stderr.flush()
    return {"stdout": None, "stderr": None}


class ScriptOutput:
    """A script's DEBUG capture: its STDOUT, STDERR or ALL (both) kept in temporary files (a pipe
    read only when the script ends could fill and stop it), and appended to the DEBUG file when it
    ends, in one write, under HTCondor's banner ``*** Node=... Type=... ExitCode=... Completion=...
    Cmd='...'``; several scripts may share one DEBUG file."""

    def __init__(self, script: Script, node: str, kind: str, command: str):
        self.script, self.node, self.kind, self.command = script, node, kind, command
        self.out: IO[bytes] | None = tempfile.TemporaryFile() if script.debug_type in ("STDOUT", "ALL") else None
        self.err: IO[bytes] | None = tempfile.TemporaryFile() if script.debug_type in ("STDERR", "ALL") else None

    def streams(self) -> dict[str, Any]:
        return {"stdout": self.out or subprocess.DEVNULL, "stderr": self.err or subprocess.DEVNULL}

    def finish(self, node_dir: Path, code: int) -> None:
        """Append the banner and what was captured; ``code`` is Popen's (negative: the signal)."""
        what = f"ExitCode={code}" if code >= 0 else f"Signal={-code}"
        data = (f"*** Node={self.node} Type={self.kind} {what} Completion={int(time.time())} "
                f"Cmd='{self.command}'\n").encode()
        for fh in (self.out, self.err):
            if fh is not None:
                fh.seek(0)
                data += fh.read()
        self.discard()
        target = Path(self.script.debug_file)
        try:
            fd = os.open(target if target.is_absolute() else node_dir / target,
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            print(f"ERROR: Failed to write {self.node} {self.kind} Script output to {target}: {exc}",
                  file=sys.stderr, flush=True)

    def discard(self) -> None:
        for fh in (self.out, self.err):
            if fh is not None:
                fh.close()
