"""gridbus.console.dags against htcondor2.dags (HTCondor's wheel): the same calls write the same
DAG file and submit files, and what they write is a DAG gridbus's parser reads."""

from __future__ import annotations

from pathlib import Path

import htcondor2
import pytest
from htcondor2 import dags as hdags

from gridbus.console import dags as gdags
from gridbus.dag import parse_file
from gridbus.submit import Submit as GSubmit

TILE = {"executable": "goatbrot", "arguments": "-i 10000 -c $(x),$(y) -w $(w) -o tile_$(tile_x)-$(tile_y).ppm",
        "log": "mandelbrot.log", "output": "goatbrot.out.$(tile_x)_$(tile_y)", "request_cpus": "1",
        "request_memory": "128MB", "request_disk": "1GB"}


def tutorial(dags, Submit):  # noqa: N803 - the class under its API name
    """The DAG-Creation-And-Submission tutorial's DAG: a layer of tiles feeding one montage."""
    tile_vars = [{"w": 1.5, "x": -0.75 + 1.5 * i, "y": 0.75 - 1.5 * j, "tile_x": f"{i:05d}", "tile_y": f"{j:05d}"}
                 for j in range(2) for i in range(2)]
    dag = dags.DAG()
    tiles = dag.layer(name="tile", submit_description=Submit(TILE), vars=tile_vars)
    tiles.child_layer(name="montage", submit_description=Submit({"executable": "/usr/bin/montage",
                                                                 "arguments": "a b -mode Concatenate"}))
    return dag


def everything(dags, Submit):  # noqa: N803
    """A chain using every per-node and DAG-wide setting the writers print."""
    dag = dags.DAG(dagman_config={"DAGMAN_MAX_JOBS_IDLE": 7}, dagman_job_attributes={"Team": '"blue"'},
                   max_jobs_by_category={"light": 2}, dot_config=dags.DotConfig(Path("d.dot"), update=True),
                   jobstate_log=Path("js.log"), node_status_file=dags.NodeStatusFile(Path("s.txt"), 5, True))
    a = dag.layer(name="a", submit_description=Submit({"executable": "/bin/true"}), vars=[{"q": 'say "x"\\y'}],
                  retries=3, retry_unless_exit=9, pre=dags.Script("pre.sh", ["$JOB", 1]),
                  post=dags.Script("post.sh", retry=True, retry_status=4, retry_delay=10), pre_skip_exit_code=2,
                  priority=5, category="light", abort=dags.DAGAbortCondition(3, 4), dir="sub", noop={0: True})
    b = a.child_layer(name="b", submit_description=Path("/abs/b.sub"), vars=[{"i": str(i)} for i in range(3)],
                      done={1: True})
    c = b.child_layer(name="c", edge=dags.OneToOne(), vars=[{}, {}, {}])
    d = c.child_layer(name="d", vars=[{"k": "1"}, {"k": "2"}, {"k": "3"}])  # many-to-many: a join node
    e = d.child_layer(name="e", edge=dags.Grouper(3, 1), vars=[{}])
    e.child_subdag(name="inner", dag_file=Path("inner.dag"), retries=1)
    dag.final(name="last", post=dags.Script("fin.sh"))
    return dag


@pytest.mark.parametrize("build", [tutorial, everything])
def test_write_dag_writes_what_htcondor2_writes(tmp_path: Path, build):
    theirs = hdags.write_dag(build(hdags, htcondor2.Submit), tmp_path / "h")
    ours = gdags.write_dag(build(gdags, GSubmit), tmp_path / "g")
    assert ours.name == theirs.name == "dagfile.dag"
    assert ours.read_text() == theirs.read_text()
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == sorted(p.name for p in (tmp_path / "h").iterdir())
    for p in (tmp_path / "h").iterdir():
        assert (tmp_path / "g" / p.name).read_text() == p.read_text(), p.name


@pytest.mark.parametrize("build", [tutorial, everything])
def test_describe_lays_out_the_table_as_htcondor2_does(build):
    # The tutorial prints it: the same columns, alignment, empty cells and no rule under the header.
    assert build(gdags, GSubmit).describe() == build(hdags, htcondor2.Submit).describe()


def test_htcondor2s_dag_files_parse_in_gridbus(tmp_path: Path):
    path = hdags.write_dag(tutorial(hdags, htcondor2.Submit), tmp_path)
    dag = parse_file(path)
    assert list(dag.nodes) == ["tile:0", "tile:1", "tile:2", "tile:3", "montage:0"]
    assert dag.nodes["montage:0"].parents == ["tile:0", "tile:1", "tile:2", "tile:3"]
    assert dag.nodes["tile:3"].vars["tile_x"] == "00001"


def test_walks_roots_leaves_and_rescue(tmp_path: Path):
    dag = tutorial(gdags, GSubmit)
    tile, montage = dag.glob("tile"), dag.glob("montage")
    assert [n.name for n in dag.roots] == ["tile"] and [n.name for n in dag.leaves] == ["montage"]
    assert [n.name for n in dag.walk(gdags.WalkOrder.BREADTH_FIRST)] == ["tile", "montage"]
    assert list(tile)[0].children == montage
    with pytest.raises(gdags.exceptions.DuplicateNodeName):
        dag.layer(name="tile")
    (tmp_path / "dagfile.dag.rescue001").write_text("# header\nDONE tile:0\nDONE tile:2\n")
    assert gdags.find_rescue_file(tmp_path).name == "dagfile.dag.rescue001"
    gdags.rescue(dag, gdags.find_rescue_file(tmp_path))
    assert list(tile)[0].done == {0: True, 2: True} and list(montage)[0].done == {}
