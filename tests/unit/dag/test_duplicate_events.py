"""A nodes log with events written twice (the schedd delivers a job's events at least once: after
a crash it writes again what it had not yet marked written). htcondor2's JobEventLog reads such a
log, and DAGMan counts each proc's end once, in a run and in a recovery."""

from __future__ import annotations

import time
from pathlib import Path

from htcondor2 import JobEventLog, JobEventType

from gridbus.console.dagman.engine import DONE, EXIT_OKAY, SUBMITTED, Engine
from gridbus.dag import parse_text
from gridbus.eventlog import writer
from tests.unit.dag.test_engine import FakeSchedd, drive, engine_for


class TwoProcSchedd(FakeSchedd):
    """Each node is a cluster of two procs."""

    def submit(self, run, engine):
        cluster, self.next = self.next, self.next + 1
        self.submitted.append(run.node.name)
        for proc in (0, 1):
            writer.append(self.log, writer.submit(cluster, proc, time.time(), "schedd@x", f"DAG Node: {run.node.name}"))
        self.idle.append((cluster, run.node.name))
        return cluster, 2


def test_htcondor_reads_a_log_with_a_replayed_run_of_events(tmp_path: Path):
    log = tmp_path / "job.log"
    now = time.time()
    batch = writer.execute(1, 0, now, "slot1@x") + writer.terminated(1, 0, now, exit_code=0)
    for text in (writer.submit(1, 0, now, "schedd@x"), batch, batch, writer.submit(2, 0, now, "schedd@x")):
        writer.append(log, text)
    types = [(e.cluster, e.type) for e in JobEventLog(str(log)).events(0)]
    assert types == [(1, JobEventType.SUBMIT), (1, JobEventType.EXECUTE), (1, JobEventType.JOB_TERMINATED),
                     (1, JobEventType.EXECUTE), (1, JobEventType.JOB_TERMINATED), (2, JobEventType.SUBMIT)]


def test_a_repeated_terminated_event_ends_one_proc_once(tmp_path: Path):
    text = "JOB A x.sub\nJOB B x.sub\nPARENT A CHILD B\n"
    dag_file = tmp_path / "t.dag"
    dag_file.write_text(text)
    fake = TwoProcSchedd(tmp_path / "t.dag.nodes.log")
    eng = Engine(parse_text(text, "t.dag", tmp_path), dag_file, fake, options={})
    eng.start()
    eng.step()
    (cluster, _name), = fake.idle
    now = time.time()
    for _ in range(2):  # proc 0's events, then the same again
        writer.append(fake.log, writer.execute(cluster, 0, now, "slot1@x") + writer.terminated(cluster, 0, now, exit_code=0))
    eng.step()
    assert eng.runs["A"].state == SUBMITTED  # proc 1 still runs: A is not done
    assert fake.submitted == ["A"]
    writer.append(fake.log, writer.execute(cluster, 1, now, "slot2@x") + writer.terminated(cluster, 1, now, exit_code=0))
    eng.step()
    assert eng.runs["A"].state == DONE
    fake.idle = []
    assert drive(eng, fake) == EXIT_OKAY
    assert fake.submitted == ["A", "B"]


def test_recovery_reads_repeated_submit_and_terminated_events_once(tmp_path: Path):
    text = "JOB A x.sub\nJOB B x.sub\nPARENT A CHILD B\n"
    eng, fake = engine_for(tmp_path, text)
    eng.step()
    fake.run()
    fake.finish()  # A ran and ended; the schedd then crashed and wrote A's events again
    lines = fake.log.read_text()
    writer.append(fake.log, lines)
    again = Engine(parse_text(text, "t.dag", tmp_path), tmp_path / "t.dag", fake, recovery=True)
    again.start()
    assert again.runs["A"].state == DONE
    assert drive(again, fake) == EXIT_OKAY
    assert fake.submitted == ["A", "B"]  # A not submitted again, B once
