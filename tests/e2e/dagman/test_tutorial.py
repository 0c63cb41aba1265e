"""HTCondor's DAG-Creation-And-Submission tutorial, its calls in order, against a personal pool.

Only the imports change (``htcondor2`` -> ``gridbus.console``/``gridbus.submit``, ``htcondor2.dags``
-> ``gridbus.console.dags``). The tutorial's outside tools are replaced by small scripts: ``goatbrot``
writes the tile it is asked for (its -c/-w arguments and the -o file name), ``montage`` concatenates
its input tiles into mandelbrot.png.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest

from gridbus.console import JobEventLog, JobEventType, Schedd, dags
from gridbus.submit import Submit

pytestmark = pytest.mark.e2e

GOATBROT = """#!/bin/sh
# goatbrot stand-in: "-i N -c X,Y -w W -s WxH -o FILE" -> FILE holds the tile's centre and width
while [ $# -gt 0 ]; do
  case "$1" in -c) c="$2"; shift ;; -w) w="$2"; shift ;; -o) o="$2"; shift ;; esac; shift
done
echo "tile c=$c w=$w" > "$o"
"""
MONTAGE = """#!/bin/sh
# montage stand-in: "tile... -mode Concatenate -tile NxN OUT" -> OUT is the tiles, concatenated
out=""; tiles=""
for a in "$@"; do case "$a" in *.ppm) tiles="$tiles $a" ;; esac; out="$a"; done
cat $tiles > "$out"
"""


def make_tile_vars(num_tiles_per_side, width=3):
    width_per_tile = width / num_tiles_per_side
    centers = [width_per_tile * (n + 0.5 - (num_tiles_per_side / 2)) for n in range(num_tiles_per_side)]
    out = []
    for (tile_y, y), (tile_x, x) in itertools.product(enumerate(centers), repeat=2):
        out.append({"w": width_per_tile, "x": x, "y": -y, "tile_x": str(tile_x).rjust(5, "0"),
                    "tile_y": str(tile_y).rjust(5, "0")})
    return out


def make_montage_description(tile_vars, montage):
    n = int(len(tile_vars) ** 0.5)
    inputs = [f'tile_{d["tile_x"]}-{d["tile_y"]}.ppm' for d in tile_vars]
    return Submit(executable=montage, arguments=f'{" ".join(inputs)} -mode Concatenate -tile {n}x{n} mandelbrot.png',
                  transfer_input_files=", ".join(inputs), log="mandelbrot.log", output="montage.out",
                  error="montage.err", request_cpus="1", request_memory="128MB", request_disk="1GB")


def test_dag_creation_and_submission_tutorial(dag_pool, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("goatbrot").write_text(GOATBROT)
    Path("goatbrot").chmod(0o755)
    montage = tmp_path / "montage"
    montage.write_text(MONTAGE)
    montage.chmod(0o755)

    tile_description = Submit(
        executable="goatbrot",
        arguments="-i 10000 -c $(x),$(y) -w $(w) -s 500,500 -o tile_$(tile_x)-$(tile_y).ppm",
        log="mandelbrot.log", output="goatbrot.out.$(tile_x)_$(tile_y)", error="goatbrot.err.$(tile_x)_$(tile_y)",
        request_cpus="1", request_memory="128MB", request_disk="1GB")

    num_tiles_per_side = 2
    tile_vars = make_tile_vars(num_tiles_per_side)
    dag = dags.DAG()
    tile_layer = dag.layer(name="tile", submit_description=tile_description, vars=tile_vars)
    tile_layer.child_layer(name="montage", submit_description=make_montage_description(tile_vars, str(montage)))
    description = dag.describe()
    assert "tile" in description and "montage" in description and "ManyToMany" in description

    dag_dir = (Path.cwd() / "mandelbrot-dag").absolute()
    shutil.rmtree(dag_dir, ignore_errors=True)
    dag_file = dags.write_dag(dag, dag_dir)
    shutil.copy2("goatbrot", dag_dir)

    dag_submit = Submit.from_dag(str(dag_file), {"force": 1})
    os.chdir(dag_dir)
    schedd = Schedd()
    cluster_id = schedd.submit(dag_submit).cluster()
    os.chdir("..")

    dag_job_log = f"{dag_file}.dagman.log"
    seen = []
    for event in JobEventLog(str(dag_job_log)).events(90):
        seen.append(event.type)
        if event.type is JobEventType.JOB_TERMINATED and event.cluster == cluster_id:
            break
    assert seen[-1] is JobEventType.JOB_TERMINATED, (seen, Path(f"{dag_file}.dagman.out").read_text())
    assert seen[0] is JobEventType.SUBMIT and JobEventType.EXECUTE in seen
    image = (dag_dir / "mandelbrot.png").read_text().splitlines()
    assert image == ["tile c=-0.75,0.75 w=1.5", "tile c=0.75,0.75 w=1.5", "tile c=-0.75,-0.75 w=1.5",
                     "tile c=0.75,-0.75 w=1.5"]


def test_a_dag_written_by_htcondor2_runs_on_gridbus(dag_pool, tmp_path: Path):
    import htcondor2
    from htcondor2 import dags as hdags

    from tests.e2e.dagman.helpers import submit_dag, submits_per_node, wait_dag

    stamp = tmp_path / "stamp.sh"
    stamp.write_text('#!/bin/sh\necho "$1" >> ' + str(tmp_path / "order.txt") + "\n")
    stamp.chmod(0o755)
    dag = hdags.DAG()
    first = dag.layer(name="first", vars=[{"n": "f0"}, {"n": "f1"}], submit_description=htcondor2.Submit(
        executable=str(stamp), arguments="$(n)", request_memory="16", request_disk="64"))
    first.child_layer(name="second", vars=[{"n": "s0"}, {"n": "s1"}], submit_description=htcondor2.Submit(
        executable=str(stamp), arguments="$(n)", request_memory="16", request_disk="64"))
    dag_file = hdags.write_dag(dag, tmp_path / "h")
    ad = wait_dag(dag_pool, dag_file, submit_dag(dag_file))
    assert ad["ExitCode"] == 0, Path(f"{dag_file}.dagman.out").read_text()
    order = (tmp_path / "order.txt").read_text().split()
    assert sorted(order[:2]) == ["f0", "f1"] and sorted(order[2:]) == ["s0", "s1"]
    assert submits_per_node(dag_file) == {"first:0": 1, "first:1": 1, "second:0": 1, "second:1": 1}  # joins are NOOP
