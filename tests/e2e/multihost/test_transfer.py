"""File transfer over the bus on a pool of hosts that share no file.

The submit host is this machine (the job's files under the test's directory); the jobs run on
``exec1``/``exec2``, which cannot see those files: whatever a job reads came over the bus, and
whatever comes back was written on the execute host.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from htcondor2 import JobEventType

from console.schedd import Schedd
from gridbus.transfer import stream
from tests.e2e.multihost.helpers import LEASE, all_unclaimed, finished, on
from tests.e2e.pool import logged, wait_for
from tests.integration.faults.helpers import count, events
from tests.multihost import LOCAL_DIR, SCHEDD, Host, MultiHostPool
from tests.multihost.rss import PeakRss

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

MIB = 1 << 20
# The big input: 256 MiB by default (GRIDBUS_TEST_BIG_INPUT_MIB=1024 for the 1 GiB).
BIG_MIB = int(os.environ.get("GRIDBUS_TEST_BIG_INPUT_MIB", "256"))
# The peak resident set every daemon and shadow stays under, whatever the file's size (measured
# on 2026-11-23: 31 to 40 MiB each, with 256 MiB as with 1 GiB): the transfer holds a window of
# chunks, never the file, so half of the 256 MiB file is a bound that a daemon or shadow holding
# the file could not meet.
RSS_BOUND_MIB = 128
CUT_MIB = 128  # the file a cut link interrupts: big enough to be caught on its way


def submit(pool: MultiHostPool, text: str) -> int:
    schedd = Schedd(SCHEDD, url=pool.url)
    try:
        return schedd.submit(text).cluster()
    finally:
        schedd.close()


def write_big(path: Path, mib: int) -> str:
    """A file of ``mib`` MiB, each MiB different; its sha256."""
    digest = hashlib.sha256()
    block = os.urandom(MIB)
    with open(path, "wb") as fh:
        for i in range(mib):
            chunk = i.to_bytes(8, "little") + block[8:]
            fh.write(chunk)
            digest.update(chunk)
    return digest.hexdigest()


def test_input_files_and_directories_go_out_and_outputs_and_remaps_come_back(settled: MultiHostPool,
                                                                             tmp_path: Path, monkeypatch):
    exec1 = settled.host("exec1")
    iwd = tmp_path / "job"
    (iwd / "data" / "nested").mkdir(parents=True)
    (iwd / "flat").mkdir()
    (iwd / "results").mkdir()
    (iwd / "a.txt").write_text("alpha\n")
    (iwd / "data" / "nested" / "b.txt").write_text("beta\n")
    (iwd / "flat" / "c.txt").write_text("gamma\n")
    script = iwd / "job.sh"
    script.write_text("#!/bin/sh\nset -e\nhostname\npwd\nfind . -path ./_condor_std\\* -prune -o -print | sort\n"
                      "cat a.txt data/nested/b.txt c.txt\n"
                      "hostname > out1.txt\necho second > out2.txt\nmkdir outdir\necho deep > outdir/d.txt\n"
                      "echo to-stderr >&2\n")
    script.chmod(0o755)
    monkeypatch.chdir(iwd)  # where the user runs condor_submit: the executable's path is relative to it
    cluster = submit(settled, f"""
        executable = job.sh
        initialdir = {iwd}
        should_transfer_files = YES
        when_to_transfer_output = ON_EXIT
        transfer_input_files = a.txt, data, flat/
        transfer_output_files = out1.txt, out2.txt, outdir
        transfer_output_remaps = "out2.txt = results/renamed.txt"
        output = job.out
        error = job.err
        log = job.log
        requirements = {on(exec1.fqdn)}
        queue
    """)
    job = finished(settled, cluster)[0]
    assert job["ExitCode"] == 0, job

    out = (iwd / "job.out").read_text().splitlines()
    assert out[0] == exec1.fqdn
    scratch = out[1]
    assert scratch.startswith("/tmp/gridbus/startd-exec1/execute/"), out  # the job's cwd: its scratch dir
    # What arrived: the files, the directory with its name, the trailing-slash one's contents.
    listing = out[2:out.index("alpha")]
    for name in ("./a.txt", "./data", "./data/nested", "./data/nested/b.txt", "./c.txt", "./job.sh"):
        assert name in listing, listing
    assert "./flat" not in listing, listing
    assert out[out.index("alpha"):] == ["alpha", "beta", "gamma"]
    assert (iwd / "job.err").read_text() == "to-stderr\n"

    # What came back, written on exec1; out2.txt only where its remap says.
    assert (iwd / "out1.txt").read_text() == exec1.fqdn + "\n"
    assert (iwd / "results" / "renamed.txt").read_text() == "second\n"
    assert not (iwd / "out2.txt").exists()
    assert (iwd / "outdir" / "d.txt").read_text() == "deep\n"
    # The scratch directory is removed once the output is back.
    wait_for("the scratch directory removed", lambda: not exec1.reach(scratch).exists(), 10)


def test_a_missing_input_holds_the_job_with_code_13(settled: MultiHostPool, tmp_path: Path):
    iwd = tmp_path / "job"
    iwd.mkdir()
    (iwd / "here.txt").write_text("here\n")
    cluster = submit(settled, f"""
        executable = /bin/cat
        arguments = here.txt
        transfer_executable = false
        initialdir = {iwd}
        should_transfer_files = YES
        transfer_input_files = here.txt, missing.txt
        output = job.out
        log = job.log
        queue
    """)
    job = wait_for("the job held", lambda: (j := settled.jobs(SCHEDD, f"ClusterId == {cluster} && JobStatus == 5"))
                   and j[0], 30)
    assert job["HoldReasonCode"] == 13, job
    assert "missing.txt" in job["HoldReason"], job
    # The owner's shadow writes the event just after the hold is committed: wait for the log.
    logged(iwd / "job.log", JobEventType.JOB_HELD, 1)
    assert count(iwd / "job.log", JobEventType.JOB_HELD, cluster) == 1, events(iwd / "job.log")
    assert not (iwd / "job.out").exists()
    settled.call(SCHEDD, "Remove", {"Ids": [str(cluster)], "Reason": "test over"})


def test_a_job_submitted_from_another_machine_without_spooling_cannot_reach_its_inputs(settled: MultiHostPool,
                                                                                      laptop: Host):
    # The user's laptop runs only the console; its files are its own. Submitted from there
    # without spooling, the job names inputs that the schedd's host cannot read: held, code 13.
    work = Path(f"/tmp/work-{uuid.uuid4().hex[:8]}")  # on the laptop
    laptop.reach(work).mkdir()
    (laptop.reach(work) / "in.txt").write_text("on the laptop\n")
    (laptop.reach(work) / "job.sub").write_text(
        "executable = /bin/cat\narguments = in.txt\ntransfer_executable = false\nshould_transfer_files = YES\n"
        "transfer_input_files = in.txt\noutput = out.txt\nqueue\n")
    r = settled.console_on(laptop, ["submit", "-terse", "job.sub"], cwd=work)
    assert r.returncode == 0, r.stderr
    cluster = int(r.stdout.split(".")[0])
    job = wait_for("the job held", lambda: (j := settled.jobs(SCHEDD, f"ClusterId == {cluster} && JobStatus == 5"))
                   and j[0], 30)
    assert job["HoldReasonCode"] == 13 and f"{work}/in.txt" in job["HoldReason"], job
    assert not work.exists()  # (the path is the laptop's only)
    held = settled.console_on(laptop, ["q", "-hold"], cwd=work)
    assert held.returncode == 0 and f"{cluster}.0" in held.stdout, held


def test_a_job_spooled_from_another_machine_runs_while_it_is_away_and_its_output_is_fetched_later(
        settled: MultiHostPool, laptop: Host):
    # condor_submit -spool from the user's laptop: the input goes to the schedd's spool at once,
    # the laptop leaves (its files gone, its link down), the job runs on an execute host; back on
    # the air, transfer_data brings the output into the laptop's submit directory.
    work = Path(f"/tmp/work-{uuid.uuid4().hex[:8]}")  # on the laptop
    home = laptop.reach(work)
    home.mkdir()
    (home / "in.txt").write_text("on the laptop\n")
    (home / "job.sh").write_text("#!/bin/sh\ncat in.txt\nhostname\n")
    (home / "job.sh").chmod(0o755)
    (home / "job.sub").write_text("executable = job.sh\nshould_transfer_files = YES\ntransfer_input_files = in.txt\n"
                                  "output = out.txt\nqueue\n")
    r = settled.console_on(laptop, ["submit", "-spool", "-terse", "job.sub"], cwd=work)
    assert r.returncode == 0, r.stderr
    cluster = int(r.stdout.split(".")[0])
    for name in ("in.txt", "job.sh"):
        (home / name).unlink()
    laptop.link_down()
    try:
        job = wait_for("the job completed, waiting in the queue for its owner", lambda: (
            j := settled.jobs(SCHEDD, f"ClusterId == {cluster} && JobStatus == 4")) and j[0], 30)
    finally:
        laptop.link_up()
    ran_on = settled.host(job["LastRemoteHost"].split("@")[1])
    assert not (home / "out.txt").exists()
    r = settled.console_on(laptop, ["transfer_data", str(cluster)], cwd=work)
    assert r.returncode == 0, r.stderr
    assert (home / "out.txt").read_text() == f"on the laptop\n{ran_on.fqdn}\n"
    # Once fetched, the job leaves the queue for the history.
    finished(settled, cluster)


def test_a_big_input_keeps_every_daemon_and_shadow_small(settled: MultiHostPool, tmp_path: Path):
    iwd = tmp_path / "job"
    iwd.mkdir()
    digest = write_big(iwd / "big.bin", BIG_MIB)
    with PeakRss(settled, children_of=[SCHEDD]) as rss:
        cluster = submit(settled, f"""
            executable = /usr/bin/sha256sum
            arguments = big.bin
            transfer_executable = false
            initialdir = {iwd}
            should_transfer_files = YES
            transfer_input_files = big.bin
            output = sum.txt
            queue
        """)
        job = finished(settled, cluster, timeout=120)[0]
    assert job["ExitCode"] == 0, job
    assert (iwd / "sum.txt").read_text().split()[0] == digest  # what the job read on its host is whole
    assert job["BytesRecvd"] == BIG_MIB * MIB, job  # the input the job received (HTCondor's side)
    daemons = {"collector@c", "negotiator@n", "schedd@s", "startd@exec1", "startd@exec2"}
    assert daemons <= set(rss.peaks) and any(" child " in label for label in rss.peaks), rss.peaks  # the shadow
    assert rss.over(RSS_BOUND_MIB * 1024) == {}, rss.peaks


def _new_file(root: Path, known: set[str]) -> bool:
    """Whether a file not in ``known`` (names) has bytes under ``root``: a transfer writing there
    (the receiving end writes each file under a temporary name, then renames it once verified)."""
    return any(p.is_file() and p.name not in known and p.stat().st_size > 0 for p in root.rglob("*"))


def _cut_while(host, what: str, writing: Callable[[], bool]) -> None:
    wait_for(what, writing, 30, interval=0.01)
    host.link_down()


def test_an_input_transfer_cut_by_the_link_going_down_never_runs_the_job_on_part_of_it(
        settled: MultiHostPool, tmp_path: Path, monkeypatch):
    exec1, exec2 = settled.host("exec1"), settled.host("exec2")
    iwd = tmp_path / "job"
    iwd.mkdir()
    digest = write_big(iwd / "big.bin", CUT_MIB)
    # The job fails unless its input is whole: a run on part of it could not end with exit code 0.
    script = iwd / "job.sh"
    script.write_text(f"#!/bin/sh\necho '{digest}  big.bin' | sha256sum -c - && hostname\n")
    script.chmod(0o755)
    log = iwd / "job.log"
    monkeypatch.chdir(iwd)
    cluster = submit(settled, f"""
        executable = job.sh
        should_transfer_files = YES
        transfer_input_files = big.bin
        output = job.out
        log = {log}
        rank = {on(exec1.fqdn)}
        queue
    """)
    execute = exec1.reach(LOCAL_DIR / "startd-exec1" / "execute")
    _cut_while(exec1, "the input arriving on exec1", lambda: execute.exists() and _new_file(execute, set()))
    try:
        # The activation goes unanswered: at the claim's lease the schedd gives the claim up and
        # the job, never started, matches again; it runs on exec2 while exec1 is still cut off.
        job = finished(settled, cluster, timeout=LEASE * 8)[0]
        assert exec1.link.cut_method is not None, "the job finished only after the link came back"
        # Cut off, exec1's startd gave the transfer up after TRANSFER_STALL_TIMEOUT, not once the
        # link came back (its log is on its own disk: readable while it is cut off).
        assert f"job {cluster}.0 could not start on slot" in settled.log_of("startd@exec1", "StartLog")
    finally:
        exec1.link_up()
    assert job["ExitCode"] == 0 and job["LastRemoteHost"].endswith("@exec2"), job
    assert (iwd / "job.out").read_text() == f"big.bin: OK\n{exec2.fqdn}\n"
    # It ran once, on the whole input. What the cut left on exec1 is at most the part kept for a
    # resumption of this job there (a partial file, dropped after an hour or at the startd's
    # stop), never the input under its own name.
    logged(log, JobEventType.JOB_TERMINATED, 1)  # written by the owner's shadow just after the commit
    assert count(log, JobEventType.EXECUTE, cluster) == 1 and count(log, JobEventType.JOB_TERMINATED, cluster) == 1
    wait_for("exec1 holding no file but a part kept for a resumption",
             lambda: all(f.name.endswith(stream.PARTIAL_SUFFIX) for f in execute.rglob("*") if f.is_file()), LEASE * 4)
    wait_for("every slot unclaimed", lambda: all_unclaimed(settled), LEASE * 4)


def test_an_output_transfer_cut_by_the_link_going_down_never_completes_the_job_with_part_of_it(
        settled: MultiHostPool, tmp_path: Path, monkeypatch):
    exec1 = settled.host("exec1")
    iwd = tmp_path / "job"
    iwd.mkdir()
    tag = uuid.uuid4().hex[:8]
    # The job writes a big output wherever it runs; on exec1 it then waits for the test's go, so
    # the test knows the output is whole there before it goes on its way back.
    script = iwd / "job.sh"
    script.write_text(f"#!/bin/sh\nset -e\nhead -c {CUT_MIB * MIB} /dev/urandom > big.out\n"
                      "sha256sum big.out > big.sum\n"
                      f"case $(hostname) in exec1.*) while [ ! -e /tmp/go-{tag} ]; do sleep 0.05; done;; esac\n")
    script.chmod(0o755)
    log = iwd / "job.log"
    monkeypatch.chdir(iwd)
    cluster = submit(settled, f"""
        executable = job.sh
        should_transfer_files = YES
        transfer_output_files = big.out, big.sum
        log = {log}
        requirements = ({on(exec1.fqdn)}) || (MY.NumJobStarts > 0)
        queue
    """)
    wait_for("the job running on exec1", lambda: settled.jobs(SCHEDD, f"ClusterId == {cluster} && JobStatus == 2"), 30)
    exec1.reach(f"/tmp/go-{tag}").write_text("")
    _cut_while(exec1, "the output arriving on the submit host", lambda: _new_file(iwd, {"job.sh", "job.log"}))
    try:
        wait_for("the job requeued or held", lambda: count(log, JobEventType.JOB_EVICTED, cluster)
                 or count(log, JobEventType.JOB_HELD, cluster), LEASE * 6)
        # Nothing of the cut transfer is left under the output's names.
        assert not (iwd / "big.out").exists() or count(log, JobEventType.EXECUTE, cluster) > 1
    finally:
        exec1.link_up()
    if count(log, JobEventType.JOB_HELD, cluster):
        assert not settled.history(SCHEDD, f"ClusterId == {cluster}")
    else:
        # Requeued, it runs again (on exec2, since exec1 was still cut off) and comes back whole.
        job = finished(settled, cluster, timeout=60)[0]
        assert job["ExitCode"] == 0 and job["NumJobStarts"] == 2 and job["LastRemoteHost"].endswith("@exec2"), job
        assert (iwd / "big.out").stat().st_size == CUT_MIB * MIB
        digest = hashlib.sha256((iwd / "big.out").read_bytes()).hexdigest()
        assert (iwd / "big.sum").read_text().split()[0] == digest
    assert count(log, JobEventType.JOB_TERMINATED, cluster) <= 1, events(log)
    wait_for("every slot unclaimed", lambda: all_unclaimed(settled), LEASE * 4)
