"""HTCondor's Submitting-and-Managing-Jobs tutorial, cell by cell, against a personal pool.

Its file-transfer cells (transfer_input_files, with the inputs/ directory they make) run too: each
cat job's input file travels over the bus to the job's scratch directory.
"""

from __future__ import annotations

import getpass
import os
import random
import shutil
import string
from pathlib import Path

import pytest

from tests.e2e.pool import wait_for
from tests.e2e.tutorials.bindings import htcondor

pytestmark = pytest.mark.usefixtures("tutorial_pool")

REQUESTS = {"request_cpus": "1", "request_memory": "128MB", "request_disk": "128MB"}


@pytest.fixture(scope="module")
def state() -> dict:
    return {}


def test_a_submit_description_prints_as_submit_text(capsys):
    hostname_job = htcondor.Submit({
        "executable": "/bin/hostname",
        "output": "hostname.out",
        "error": "hostname.err",
        "log": "hostname.log",
        **REQUESTS,
    })
    print(hostname_job)
    assert capsys.readouterr().out == (
        "executable = /bin/hostname\noutput = hostname.out\nerror = hostname.err\nlog = hostname.log\n"
        "request_cpus = 1\nrequest_memory = 128MB\nrequest_disk = 128MB\nqueue\n\n")


def test_the_hostname_job_writes_its_output_here():
    hostname_job = htcondor.Submit({
        "executable": "/bin/hostname", "output": "hostname.out", "error": "hostname.err",
        "log": "hostname.log", **REQUESTS,
    })
    schedd = htcondor.Schedd()
    submit_result = schedd.submit(hostname_job)
    assert submit_result.cluster() > 0
    # The notebook polls for the file once a second; the wait fails the cell after a minute.
    wait_for("hostname.out", lambda: os.path.exists("hostname.out") and os.path.getsize("hostname.out"), 60)
    with open("hostname.out") as f:
        assert f.read().strip()  # the execute host's name


def test_ten_sleeps_each_with_its_own_output(capsys):
    sleep_job = htcondor.Submit({
        "executable": "/bin/sleep",
        "arguments": "10s",
        "output": "sleep-$(ProcId).out",
        "error": "sleep-$(ProcId).err",
        "log": "sleep.log",
        **REQUESTS,
    })
    print(sleep_job)
    assert capsys.readouterr().out.startswith("executable = /bin/sleep\narguments = 10s\noutput = sleep-$(ProcId).out\n")
    schedd = htcondor.Schedd()
    submit_result = schedd.submit(sleep_job, count=10)
    ads = schedd.query(
        constraint=f"ClusterId == {submit_result.cluster()}",
        projection=["ClusterId", "ProcId", "Out"],
    )
    # The notebook's Out values are the relative names it asked for.
    assert sorted((ad["ProcId"], os.path.basename(ad["Out"])) for ad in ads) == [
        (i, f"sleep-{i}.out") for i in range(10)]
    assert all(ad["ClusterId"] == submit_result.cluster() for ad in ads)


def test_cat_jobs_with_input_files_named_by_itemdata(capsys):
    # Five input files with made-up names in inputs/ (cleared first, as the notebook does).
    def random_string(length: int) -> str:
        return "".join(random.choices(string.ascii_lowercase, k=length))

    input_dir = Path.cwd() / "inputs"
    shutil.rmtree(input_dir, ignore_errors=True)
    input_dir.mkdir()
    for _ in range(5):
        name = random_string(5)
        (input_dir / f"{name}.txt").write_text(f"Hello from job {name}")
    input_files = list(input_dir.glob("*.txt"))

    # One cat job per file: the file travels to the job's scratch directory, where the job
    # names it by its last path component only.
    cat_job = htcondor.Submit({
        "executable": "/bin/cat",
        "arguments": "$(input_file_name)",
        "transfer_input_files": "$(input_file)",
        "should_transfer_files": "yes",
        "output": "cat-$(ProcId).out",
        "error": "cat-$(ProcId).err",
        "log": "cat.log",
        **REQUESTS,
    })
    print(cat_job)
    assert "transfer_input_files = $(input_file)" in capsys.readouterr().out

    itemdata = [{"input_file": path.as_posix(), "input_file_name": path.name} for path in input_files]
    schedd = htcondor.Schedd()
    submit_result = schedd.submit(cat_job, itemdata=iter(itemdata))
    cluster = submit_result.cluster()
    ads = schedd.query(constraint=f"ClusterId == {cluster}",
                       projection=["ClusterId", "ProcId", "Out", "Args", "TransferInput"])
    by_name = {item["input_file_name"]: item["input_file"] for item in itemdata}
    for ad in ads:  # (jobs that already finished have left the queue)
        assert ad["TransferInput"] == by_name[ad["Args"]]
        assert ad["Out"] == f"cat-{ad['ProcId']}.out"

    # The notebook waits for every output file, then prints each: each holds its input's text.
    wait_for("five cat outputs", lambda: len(list(Path.cwd().glob("cat-*.out"))) == len(itemdata)
             and all(p.stat().st_size for p in Path.cwd().glob("cat-*.out")), 60)
    texts = sorted(p.read_text() for p in Path.cwd().glob("cat-*.out"))
    assert texts == sorted(f"Hello from job {Path(name).stem}" for name in by_name)


def test_edit_hold_release_and_remove_long_sleeps(capsys, state):
    long_sleep_job = htcondor.Submit({
        "executable": "/bin/sleep",
        "arguments": "10m",
        "output": "sleep-$(ProcId).out",
        "error": "sleep-$(ProcId).err",
        "log": "sleep.log",
        **REQUESTS,
    })
    schedd = htcondor.Schedd()
    submit_result = schedd.submit(long_sleep_job, count=5)
    cluster = submit_result.cluster()
    schedd.edit(f"ClusterId == {cluster}", "foo", "\"bar\"")
    ads = schedd.query(constraint=f"ClusterId == {cluster}", projection=["ClusterId", "ProcId", "JobStatus", "foo"])
    assert sorted((ad["ProcId"], ad["foo"]) for ad in ads) == [(i, "bar") for i in range(5)]

    def statuses() -> dict[int, int]:
        found = schedd.query(constraint=f"ClusterId == {cluster}", projection=["ClusterId", "ProcId", "JobStatus"])
        for ad in found:
            print(f"ProcID = {ad['ProcID']} has JobStatus = {ad['JobStatus']}")
        return {ad["ProcID"]: ad["JobStatus"] for ad in found}

    schedd.act(htcondor.JobAction.Hold, f"ClusterId == {cluster} && ProcID <= 1")
    held = statuses()
    assert held[0] == held[1] == 5 and all(held[p] in (1, 2) for p in (2, 3, 4))
    schedd.act(htcondor.JobAction.Release, f"ClusterId == {cluster}")
    assert all(s in (1, 2) for s in statuses().values())
    answer = schedd.act(htcondor.JobAction.Remove, f"ClusterId == {cluster}")
    assert answer["TotalSuccess"] == 5 and answer["TotalError"] == 0


def test_exercise_incrementing_sleep_as_given():
    incrementing_sleep = htcondor.Submit({
        "executable": "/bin/sleep",
        "arguments": "1",
        "output": "ex1-$(ProcId).out",
        "error": "ex1-$(ProcId).err",
        "log": "ex1.log",
        **REQUESTS,
    })
    schedd = htcondor.Schedd()
    submit_result = schedd.submit(incrementing_sleep)
    # The exercise's check fails until the reader changes the block, as recorded: Got ['1'].
    ads = schedd.query(f"ClusterId == {submit_result.cluster()}", projection=["Args"])
    assert sorted(ad["Args"] for ad in ads) == ["1"]


def test_exercise_echo_without_executable_is_refused():
    echo = htcondor.Submit({**REQUESTS})
    schedd = htcondor.Schedd()
    with pytest.raises(htcondor.HTCondorException, match="executable"):
        schedd.submit(echo)
    assert not os.path.exists("ex3.txt")  # the next cell's check fails, as recorded


def test_exercise_hundred_long_sleeps_none_held():
    long_sleep = htcondor.Submit({
        "executable": "/bin/sleep",
        "arguments": "10m",
        "output": "ex2-$(ProcId).out",
        "error": "ex2-$(ProcId).err",
        "log": "ex2.log",
        **REQUESTS,
    })
    schedd = htcondor.Schedd()
    submit_result = schedd.submit(long_sleep, count=100)
    ads = schedd.query(f"ClusterId == {submit_result.cluster()}", projection=["ProcID", "JobStatus"])
    proc_to_status = {int(ad["ProcID"]): ad["JobStatus"] for ad in sorted(ads, key=lambda ad: ad["ProcID"])}
    assert len(proc_to_status) == 100
    assert not any(status == 5 for status in proc_to_status.values())  # "Not all odd jobs were held."


def test_exercise_cleanup_removes_the_users_jobs():
    schedd = htcondor.Schedd()
    answer = schedd.act(htcondor.JobAction.Remove, f'Owner=="{getpass.getuser()}"')
    assert answer["TotalSuccess"] >= 100
