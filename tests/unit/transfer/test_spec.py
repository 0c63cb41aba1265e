"""Which files a job's sandbox holds and where they go (gridbus/transfer/spec.py)."""

from __future__ import annotations

import os

import pytest

from gridbus.transfer import spec
from gridbus.transfer.stream import TransferError, safe_name


@pytest.fixture
def iwd(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "one").write_text("1")
    (tmp_path / "d" / "e" / "two").write_text("22")
    (tmp_path / "prog.sh").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "prog.sh", 0o755)
    (tmp_path / "stdin").write_text("in")
    return tmp_path


def _ad(iwd, **kw):
    return {"Iwd": str(iwd), "Cmd": str(iwd / "prog.sh"), "In": "/dev/null", "Out": "/dev/null", "Err": "/dev/null",
            "ShouldTransferFiles": "YES", **kw}


def test_inputs_are_files_directories_and_a_directory_s_contents(iwd):
    names = [e.name for e in spec.input_entries(_ad(iwd, TransferInput="a.txt, d"))]
    assert names == ["a.txt", "d", "d/e", "d/one", "d/e/two", "prog.sh"]
    names = [e.name for e in spec.input_entries(_ad(iwd, TransferInput="d/", In="stdin"))]
    assert names == ["e", "one", "e/two", "prog.sh", "stdin"]


def test_no_executable_when_transfer_executable_is_false(iwd):
    assert [e.name for e in spec.input_entries(_ad(iwd, TransferInput="a.txt", TransferExecutable=False))] == ["a.txt"]


def test_a_missing_input_names_the_file(iwd):
    with pytest.raises(TransferError) as err:
        spec.input_entries(_ad(iwd, TransferInput="a.txt, missing.dat"))
    assert not err.value.link and str(iwd / "missing.dat") in err.value.reason and "No such file" in err.value.reason


def test_the_job_runs_in_its_sandbox_with_its_streams_there(iwd):
    ad = spec.sandbox_ad(_ad(iwd, In="stdin", Out="out.txt", Err="out.txt"), "/scratch/dir_1")
    assert ad["Iwd"] == "/scratch/dir_1" and ad["Cmd"] == "/scratch/dir_1/prog.sh"
    assert (ad["In"], ad["Out"], ad["Err"]) == ("stdin", spec.STDOUT, spec.STDOUT)
    ad = spec.sandbox_ad(_ad(iwd, Out="o", Err="e", TransferExecutable=False), "/s")
    assert ad["Cmd"] == str(iwd / "prog.sh") and (ad["Out"], ad["Err"], ad["In"]) == (spec.STDOUT, spec.STDERR, "/dev/null")


def test_outputs_are_the_new_or_changed_top_level_files_unless_listed(tmp_path):
    (tmp_path / "input").write_text("x")
    before = spec.snapshot(str(tmp_path))
    (tmp_path / "made").write_text("y")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep").write_text("z")
    (tmp_path / spec.STDOUT).write_text("out")
    os.symlink("/etc/passwd", tmp_path / "link")
    names = [e.name for e in spec.output_entries(str(tmp_path), {}, before)]
    assert names == [spec.STDOUT, "made"]  # no directory, no symbolic link, no unchanged input
    names = [e.name for e in spec.output_entries(str(tmp_path), {"TransferOutput": "sub,input"}, before)]
    assert names == [spec.STDOUT, "sub", "sub/deep", "input"]


def test_a_missing_or_linked_listed_output_fails_naming_it(tmp_path):
    with pytest.raises(TransferError, match="nothere.*No such file"):
        spec.output_entries(str(tmp_path), {"TransferOutput": "nothere"}, {})
    os.symlink("/etc/passwd", tmp_path / "link")
    with pytest.raises(TransferError, match="link"):
        spec.output_entries(str(tmp_path), {"TransferOutput": "link"}, {})


def test_output_destinations_follow_out_err_and_the_remaps():
    ad = {"Iwd": "/home/u/run", "Out": "job.out", "Err": "/tmp/job.err",
          "TransferOutputRemaps": "out.txt = renamed.txt; results = /data/results"}
    assert spec.output_destination(ad, spec.STDOUT) == "/home/u/run/job.out"
    assert spec.output_destination(ad, spec.STDERR) == "/tmp/job.err"
    assert spec.output_destination(ad, "out.txt") == "/home/u/run/renamed.txt"
    assert spec.output_destination(ad, "results/x") == "/data/results/x"
    assert spec.output_destination(ad, "other") == "/home/u/run/other"


def test_transfer_is_wanted_as_should_transfer_files_says():
    assert spec.wants_transfer({"ShouldTransferFiles": "YES"}, "here")
    assert not spec.wants_transfer({"ShouldTransferFiles": "NO"}, "here")
    assert not spec.wants_transfer({"ShouldTransferFiles": "IF_NEEDED", "FileSystemDomain": "here"}, "here")
    assert spec.wants_transfer({"ShouldTransferFiles": "IF_NEEDED", "FileSystemDomain": "there"}, "here")


@pytest.mark.parametrize("name,ok", [("a", True), ("a/b", True), ("../a", False), ("/etc/x", False), ("a/../b", False),
                                     ("a//b", False), ("", False), ("./a", False)])
def test_names_that_would_leave_the_sandbox_are_refused(name, ok):
    assert safe_name(name) is ok
