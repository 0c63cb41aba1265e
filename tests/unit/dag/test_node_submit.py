"""A node's job as DAGMan submits it: the node's submit file with its VARS as macros."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from gridbus.console.dagman.main import ScheddSubmitter


class _Result:
    def cluster(self) -> int:
        return 7

    def num_procs(self) -> int:
        return 1


class _Schedd:
    def __init__(self) -> None:
        self.submitted: list = []

    def submit(self, sub):
        self.submitted.append(sub)
        return _Result()


def test_vars_named_as_a_built_in_macro_are_the_node_s(tmp_path: Path):
    """`VARS A node="A"`: the node's $(node) is A (condor_submit's built-in Node is only a
    default, and DAG files name their VARS so), and $(JOB) in a VARS value is the node's name."""
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = $(node) $(tag)\noutput = out.$(node)\n"
                                      "error = $(SUBMIT_FILE).err\nqueue\n")
    node = SimpleNamespace(kind="JOB", submit_file="job.sub", name="A", vars={"node": "A", "tag": "$(JOB)-x"},
                           parents=[], priority=0)
    engine = SimpleNamespace(node_dir=lambda n: tmp_path, dagman_id=3, nodes_log=tmp_path / "d.nodes.log")
    schedd = _Schedd()
    assert ScheddSubmitter(schedd).submit(SimpleNamespace(node=node, retries_used=0), engine) == (7, 1)
    job = schedd.submitted[0].build(cluster_id=7, qdate=0).jobs()[0]
    assert (job["Args"], job["Out"], job["Err"]) == ("A A-x", "out.A", "job.sub.err")
