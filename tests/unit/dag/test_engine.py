"""DAGMan's engine without a pool: a fake schedd that writes the nodes log as the real one does
(submit events with "DAG Node:" notes, execute, terminated), so throttles, retries, scripts,
FINAL, rescue and recovery are checked in milliseconds."""

from __future__ import annotations

import time
from pathlib import Path

from gridbus.console.dagman.engine import (
    DONE,
    ERROR,
    EXIT_ERROR,
    EXIT_OKAY,
    FUTILE,
    Engine,
    Submitter,
)
from gridbus.dag import parse_text
from gridbus.eventlog import writer


class FakeSchedd(Submitter):
    """Takes node submissions; ``run(n)`` starts the first n idle jobs, ``finish()`` ends the
    running ones with the exit code ``codes`` gives a node (a list is used up one run at a time)."""

    def __init__(self, log: Path, codes: dict[str, list[int]] | None = None):
        self.log, self.codes = log, codes or {}
        self.next = 1
        self.idle: list[tuple[int, str]] = []
        self.running: list[tuple[int, str]] = []
        self.removed: list[int] = []
        self.submitted: list[str] = []

    def submit(self, run, engine):
        cluster, self.next = self.next, self.next + 1
        self.submitted.append(run.node.name)
        writer.append(self.log, writer.submit(cluster, 0, time.time(), "schedd@x", f"DAG Node: {run.node.name}"))
        self.idle.append((cluster, run.node.name))
        return cluster, 1

    def remove(self, clusters, reason):
        self.removed += clusters
        for c in clusters:
            writer.append(self.log, writer.aborted(c, 0, time.time(), reason))

    def run(self, n: int = 1000) -> None:
        for cluster, name in self.idle[:n]:
            writer.append(self.log, writer.execute(cluster, 0, time.time(), "slot1@x"))
            self.running.append((cluster, name))
        self.idle = self.idle[n:]

    def finish(self) -> None:
        for cluster, name in self.running:
            codes = self.codes.get(name, [0])
            code = codes.pop(0) if len(codes) > 1 else codes[0]
            writer.append(self.log, writer.terminated(cluster, 0, time.time(), exit_code=code))
        self.running = []


def engine_for(tmp_path: Path, text: str, codes=None, **options) -> tuple[Engine, FakeSchedd]:
    dag_file = tmp_path / "t.dag"
    dag_file.write_text(text)
    fake = FakeSchedd(tmp_path / "t.dag.nodes.log", codes)
    opts = {k.upper(): v for k, v in options.items()}
    eng = Engine(parse_text(text, "t.dag", tmp_path), dag_file, fake, options=opts)
    eng.start()
    return eng, fake


def drive(eng: Engine, fake: FakeSchedd, rounds: int = 200, per_round: int = 1000) -> int:
    for _ in range(rounds):
        if eng.finished():
            break
        eng.step()
        fake.run(per_round)
        fake.finish()
        for r in eng.runs.values():
            if r.script is not None:
                r.script.wait()
        eng.step()
    return eng.finish()


def test_maxidle_holds_back_submissions(tmp_path: Path):
    eng, fake = engine_for(tmp_path, "".join(f"JOB N{i} x.sub\n" for i in range(30)), DAGMAN_MAX_JOBS_IDLE=5)
    eng.step()
    assert len(fake.idle) == 5  # the throttle: no more than 5 idle procs
    fake.run(2)
    eng.step()
    assert len(fake.idle) == 5 and len(fake.submitted) == 7
    assert drive(eng, fake) == EXIT_OKAY and len(fake.submitted) == 30


def test_maxjobs_and_category_throttles(tmp_path: Path):
    text = "".join(f"JOB N{i} x.sub\nCATEGORY N{i} {'slow' if i < 4 else 'fast'}\n" for i in range(8))
    eng, fake = engine_for(tmp_path, text + "MAXJOBS slow 1\n", DAGMAN_MAX_JOBS_SUBMITTED=3)
    eng.step()
    assert fake.submitted == ["N0", "N4", "N5"]  # three at most, one of category slow
    assert drive(eng, fake) == EXIT_OKAY


def test_retry_unless_exit_and_futile_children(tmp_path: Path):
    text = "JOB A x.sub\nJOB B x.sub\nJOB C x.sub\nRETRY A 5 UNLESS-EXIT 9\nRETRY B 1\nPARENT A CHILD C\n"
    eng, fake = engine_for(tmp_path, text, {"A": [1, 9, 0], "B": [2, 2]})
    assert drive(eng, fake) == EXIT_ERROR
    assert fake.submitted.count("A") == 2  # the second run's exit 9 stops the retries
    assert fake.submitted.count("B") == 2  # RETRY 1: two runs
    assert eng.runs["A"].state == ERROR and eng.runs["C"].state == FUTILE
    rescue = (tmp_path / "t.dag.rescue001").read_text()
    assert "# Nodes that failed: 2\n#   A,B,<ENDLIST>\n" in rescue


def test_post_script_decides_and_sees_return(tmp_path: Path):
    (tmp_path / "post.sh").write_text('#!/bin/sh\necho "$1 $2" >> post.out\nexit 0\n')
    (tmp_path / "post.sh").chmod(0o755)
    eng, fake = engine_for(tmp_path, "JOB A x.sub\nSCRIPT POST A post.sh $JOB $RETURN\n", {"A": [3]})
    assert drive(eng, fake) == EXIT_OKAY  # the POST script's 0 wins over the job's 3
    assert (tmp_path / "post.out").read_text() == "A 3\n"


def test_defer_runs_the_pre_script_again(tmp_path: Path):
    (tmp_path / "pre.sh").write_text('#!/bin/sh\nn=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n\n'
                                     '[ "$n" -ge 1 ] || exit 4\n')
    (tmp_path / "pre.sh").chmod(0o755)
    eng, fake = engine_for(tmp_path, "JOB A x.sub\nSCRIPT DEFER 4 0 PRE A pre.sh\n")
    assert drive(eng, fake) == EXIT_OKAY
    assert (tmp_path / "n").read_text().strip() == "2" and fake.submitted == ["A"]


def test_final_node_runs_after_a_failure_and_decides(tmp_path: Path):
    eng, fake = engine_for(tmp_path, "JOB A x.sub\nFINAL F f.sub\n", {"A": [1]})
    assert drive(eng, fake) == EXIT_OKAY  # FINAL succeeded: the DAG succeeds (HTCondor's rule)
    assert fake.submitted == ["A", "F"] and eng.runs["F"].state == DONE


def test_recovery_reads_the_nodes_log(tmp_path: Path):
    text = "JOB A x.sub\nJOB B x.sub\nJOB C x.sub\nPARENT A CHILD B C\n"
    eng, fake = engine_for(tmp_path, text)
    eng.step()
    fake.run()
    fake.finish()
    eng.step()  # A done, B and C submitted
    fake.run(1)  # B runs, C idle; DAGMan "dies" here
    again = Engine(parse_text(text, "t.dag", tmp_path), tmp_path / "t.dag", fake, recovery=True)
    again.start()
    assert {n: r.state for n, r in again.runs.items()} == {"A": DONE, "B": 3, "C": 3}
    assert drive(again, fake) == EXIT_OKAY
    assert sorted(fake.submitted) == ["A", "B", "C"]  # nothing twice


def test_node_status_file_is_classads(tmp_path: Path):
    import classad2

    eng, fake = engine_for(tmp_path, "JOB A x.sub\nJOB B x.sub\nNODE_STATUS_FILE s.txt 0\n", {"B": [1]})
    drive(eng, fake)
    ads = list(classad2.parseAds((tmp_path / "s.txt").read_text()))
    assert [a["Type"] for a in ads] == ["DagStatus", "NodeStatus", "NodeStatus", "StatusEnd"]
    assert ads[0]["NodesDone"] == 1 and ads[0]["NodesFailed"] == 1 and ads[0]["DagStatus"] == 2
    assert (ads[1]["Node"], ads[1]["NodeStatus"], ads[2]["NodeStatus"]) == ("A", DONE, ERROR)


def test_a_live_predecessor_is_left_to_finish(tmp_path: Path):
    import subprocess
    import sys

    from gridbus.console.dagman.main import _wait_for_predecessor
    from gridbus.dag.dagmanjob import DAGMAN_MODULE
    from tests.helpers import wait_for

    old = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)", DAGMAN_MODULE])
    # Until its exec, the child's command line is this process's.
    wait_for(lambda: DAGMAN_MODULE.encode() in Path(f"/proc/{old.pid}/cmdline").read_bytes(), 10, "the exec")
    lock = tmp_path / "t.dag.lock"
    lock.write_text(f"7.0 {old.pid} 0\n")
    _wait_for_predecessor(lock)
    assert old.poll() == 0  # it returned only once the old DAGMan had exited
    lock.write_text("7.0 1 0\n")  # pid 1 is not a DAGMan: no wait
    _wait_for_predecessor(lock)


def test_a_dagman_job_queued_by_an_earlier_version_runs_the_dagman_of_this_one():
    from gridbus.dag.dagmanjob import DAGMAN_MODULE, current_dagman_argv, is_dagman_cmdline

    # Its Arguments name the module where 0.1.0 had it; the schedd runs it as it is now.
    old = ["/usr/bin/python3", "-m", "gridbus.dagman", "-Dag", "a.dag", "-m", "x"]
    assert current_dagman_argv(old) == ["/usr/bin/python3", "-m", DAGMAN_MODULE, "-Dag", "a.dag", "-m", "x"]
    now = ["/usr/bin/python3", "-m", DAGMAN_MODULE, "-Dag", "a.dag"]
    assert current_dagman_argv(now) == now and current_dagman_argv(["/bin/true"]) == ["/bin/true"]
    # A DAGMan of either version still alive is told from a process that only names one.
    assert is_dagman_cmdline(b"/usr/bin/python3\0-m\0gridbus.dagman\0-Dag\0a.dag\0")
    assert is_dagman_cmdline(f"/usr/bin/python3\0-m\0{DAGMAN_MODULE}\0".encode())
    assert not is_dagman_cmdline(b"/bin/grep\0gridbus.dagmanx\0")
