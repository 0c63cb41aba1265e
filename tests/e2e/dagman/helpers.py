"""Small helpers of the DAGMan end-to-end tests: writing node files, submitting a DAG, reading
the nodes log back."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from gridbus.eventlog import JobEventLog, JobEventType
from tests.e2e.pool import wait_for

# Until the matching fix lands, a job without request_memory never matches (see the report).
RESOURCES = "request_memory = 16\nrequest_disk = 64\n"


def write_sub(directory: Path, name: str, executable: str = "/bin/true", arguments: str = "",
              extra: str = "") -> Path:
    path = directory / name
    path.write_text(f"executable = {executable}\narguments = \"{arguments}\"\n{RESOURCES}{extra}queue\n")
    return path


def write_script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def gridbus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("gridbus")), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def submit_dag(dag: Path, *flags: str) -> int:
    done = gridbus("submit_dag", *flags, dag.name, cwd=dag.parent)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split("submitted to cluster ")[1].split(".")[0])


def wait_dag(pool, dag: Path, cluster: int, timeout: float = 60) -> dict:
    """Wait for the DAGMan job to leave the queue; its history ad."""
    def gone():
        if pool.jobs("schedd@s", f"ClusterId == {cluster}"):
            return None
        ads = pool.history("schedd@s", f"ClusterId == {cluster}")
        return ads[0] if ads else None
    return wait_for(f"DAGMan job {cluster} of {dag.name} to finish", gone, timeout)


def node_events(dag: Path) -> list:
    """The nodes log's events, each with the node it belongs to (from the submit events' notes)."""
    names: dict[int, str] = {}
    out = []
    for event in JobEventLog(Path(f"{dag}.nodes.log")).events(0):
        if event.type == JobEventType.SUBMIT and str(event.get("LogNotes", "")).startswith("DAG Node: "):
            names[event.cluster] = str(event["LogNotes"]).removeprefix("DAG Node: ")
        out.append((names.get(event.cluster), event))
    return out


def submits_per_node(dag: Path) -> Counter:
    return Counter(name for name, e in node_events(dag) if e.type == JobEventType.SUBMIT)
