"""The DAGMan job's submit description (condor_submit_dag's <dag>.condor.sub, Submit.from_dag)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.console.cli import build_parser
from gridbus.console.cli.dag import dag_table
from gridbus.dag import DagError
from gridbus.jobargs import split_v2
from gridbus.submit import Submit


def test_from_dag_makes_a_scheduler_universe_dagman_job(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.dag").write_text("JOB A a.sub\nSET_JOB_ATTR Team = \"blue\"\n")
    sub = Submit.from_dag("d.dag", {"maxidle": 50, "MaxJobs": 7, "force": 1, "notification": "never"})
    ad = sub.build().jobs()[0]
    assert ad["JobUniverse"] == 7 and ad["Iwd"] == str(tmp_path)
    argv = split_v2(ad["Arguments"])
    assert argv[:2] == ["-m", "gridbus.console.dagman"]
    assert argv[argv.index("-Dag") + 1] == "d.dag" and argv[argv.index("-MaxIdle") + 1] == "50"
    assert argv[argv.index("-MaxJobs") + 1] == "7" and "-Force" in argv
    assert ad["UserLog"] == str(tmp_path / "d.dag.dagman.log")
    assert ad["Out"].endswith("d.dag.lib.out") and ad["Err"].endswith("d.dag.lib.err")
    assert ad["RemoveKillSig"] == "SIGUSR1" and ad["Team"] == "blue"
    assert "GRIDBUS" in ad["Environment"] or "PATH=" in ad["Environment"]


def test_from_dag_refuses_a_dag_that_cannot_run(tmp_path: Path):
    (tmp_path / "bad.dag").write_text("JOB A a.sub\nPARENT A CHILD Z\n")
    with pytest.raises(DagError, match=r"bad\.dag:2: no node named 'Z'"):
        Submit.from_dag(str(tmp_path / "bad.dag"))


def test_from_dag_checks_its_options_as_htcondor2s(tmp_path: Path):
    (tmp_path / "d.dag").write_text("JOB A a.sub\n")
    dag = str(tmp_path / "d.dag")
    with pytest.raises(TypeError, match="options must be a dict"):
        Submit.from_dag(dag, [("maxidle", 5)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="options key is empty"):
        Submit.from_dag(dag, {"": 5})
    with pytest.raises(TypeError, match="values must be int, bool or str"):
        Submit.from_dag(dag, {"maxidle": 5.5})
    with pytest.raises(TypeError, match="the DAG file must be a path"):
        Submit.from_dag(7)  # type: ignore[arg-type]


def test_submit_dag_no_submit_writes_one_dagman_job(tmp_path: Path, monkeypatch):
    """`gridbus submit_dag -no_submit` writes <dag>.condor.sub; submitted later, it queues one job."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.dag").write_text("JOB A a.sub\n")
    args = build_parser().parse_args(["submit_dag", "-no_submit", "-maxidle", "3", "d.dag"])
    assert args.handler(args) == 0
    written = Submit((tmp_path / "d.dag.condor.sub").read_text())
    jobs = written.build().jobs()
    assert len(jobs) == 1 and jobs[0]["JobUniverse"] == 7 and "-MaxIdle" in jobs[0]["Arguments"]


def test_q_dag_lists_nodes_under_their_dagman_job():
    ads = [{"ClusterId": 5, "ProcId": 0, "Owner": "u", "JobStatus": 2, "Cmd": "/usr/bin/python3"},
           {"ClusterId": 6, "ProcId": 0, "Owner": "u", "JobStatus": 1, "DAGManJobId": 5, "DAGNodeName": "A"},
           {"ClusterId": 7, "ProcId": 0, "Owner": "u", "JobStatus": 2, "DAGManJobId": 5, "DAGNodeName": "B"}]
    rows = dag_table(ads).splitlines()
    assert rows[1].startswith("5.0") and rows[1].endswith("python3")
    assert rows[2].startswith("6.0") and rows[2].endswith("  |-A") and " I " in rows[2]
    assert rows[3].endswith("  |-B") and " R " in rows[3]
