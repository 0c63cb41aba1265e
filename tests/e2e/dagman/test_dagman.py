"""DAGMan end to end: DAGs submitted with `gridbus submit_dag` run on a personal pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.eventlog import JobEventType
from tests.e2e.dagman.helpers import (
    gridbus,
    node_events,
    submit_dag,
    submits_per_node,
    wait_dag,
    write_script,
    write_sub,
)

pytestmark = pytest.mark.e2e


def test_diamond(dag_pool, dag_dir: Path):
    write_script(dag_dir, "stamp.sh", 'echo "$1" >> order.txt')
    write_sub(dag_dir, "node.sub", "stamp.sh", "$(name)")
    (dag_dir / "diamond.dag").write_text(
        "JOB A node.sub\nJOB B node.sub\nJOB C node.sub\nJOB D node.sub\n"
        + "".join(f'VARS {n} name="{n}"\n' for n in "ABCD")
        + "PARENT A CHILD B C\nPARENT B C CHILD D\nNODE_STATUS_FILE diamond.status 1\n")
    cluster = submit_dag(dag_dir / "diamond.dag")
    ad = wait_dag(dag_pool, dag_dir / "diamond.dag", cluster)
    assert ad["ExitCode"] == 0, (dag_dir / "diamond.dag.dagman.out").read_text()
    order = (dag_dir / "order.txt").read_text().split()
    assert order[0] == "A" and order[-1] == "D" and sorted(order[1:3]) == ["B", "C"]
    assert submits_per_node(dag_dir / "diamond.dag") == {"A": 1, "B": 1, "C": 1, "D": 1}
    assert "All jobs Completed!" in (dag_dir / "diamond.dag.dagman.out").read_text()
    status = (dag_dir / "diamond.status").read_text()
    assert "DagStatus = 0;" in status and "NodesDone = 4;" in status
    # The node jobs name their DAGMan job, and its log tells its life.
    events = [e.type for _, e in node_events(dag_dir / "diamond.dag")]
    assert events.count(JobEventType.JOB_TERMINATED) == 4
    q = gridbus("history", "-af", "DAGNodeName", "DAGManJobId", "-constraint", f"DAGManJobId == {cluster}",
                cwd=dag_dir)
    assert sorted(q.stdout.split()) == sorted(["A", "B", "C", "D"] + [str(cluster)] * 4), q.stderr
