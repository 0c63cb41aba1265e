"""Small sandboxes inline (gridbus/transfer/inline.py): read whole under the threshold, written
with the stream's checks, and the owner's shadow's batched requests (shadow_child.py) in process."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest

from gridbus.agents.schedd import shadow_child
from gridbus.transfer import inline, spec, stream
from gridbus.transfer.stream import Entry, TransferError


def _ad(iwd, **kw):
    return {"Iwd": str(iwd), "Cmd": str(iwd / "prog.sh"), "ShouldTransferFiles": "YES", **kw}


@pytest.fixture
def iwd(tmp_path):
    d = tmp_path / "submit"
    (d / "data dir").mkdir(parents=True)
    (d / "prog.sh").write_text("#!/bin/sh\n")
    (d / "naïve file.txt").write_text("ü" * 100)  # 200 bytes
    (d / "data dir" / "inner").write_text("i")
    return d


def test_an_input_under_the_threshold_is_read_whole_with_names_of_spaces_and_non_ascii(iwd):
    files = inline.read_input(_ad(iwd, TransferInput="naïve file.txt, data dir"), 1 << 10)
    assert files == [["naïve file.txt", 0o644, ("ü" * 100).encode()], ["data dir", 0o755, None],
                     ["data dir/inner", 0o644, b"i"], ["prog.sh", 0o644, b"#!/bin/sh\n"]]


def test_the_threshold_counts_every_file_of_the_sandbox(iwd):
    ad = _ad(iwd, TransferInput="naïve file.txt, data dir")
    size = 200 + 1 + len("#!/bin/sh\n")
    assert inline.read_input(ad, size) is not None  # at the threshold: inline
    assert inline.read_input(ad, size - 1) is None  # one byte over: streamed


def test_a_sandbox_of_zero_bytes_goes_inline_and_arrives(iwd, tmp_path):
    (iwd / "empty").write_bytes(b"")
    files = inline.read_input(_ad(iwd, TransferInput="empty", TransferExecutable=False), 0)
    assert files == [["empty", 0o644, b""]]
    out = tmp_path / "scratch"
    out.mkdir()
    assert inline.write_files(files, stream.DirectorySink(lambda n: str(out / n))) == 0
    assert (out / "empty").read_bytes() == b""
    assert inline.read_input(_ad(iwd, TransferExecutable=False), 0) == []  # nothing at all


def test_a_missing_input_fails_naming_it(iwd):
    with pytest.raises(TransferError, match="nothere.*No such file"):
        inline.read_input(_ad(iwd, TransferInput="nothere"), 1 << 20)


def test_a_file_that_changes_while_it_is_read_is_refused_with_htcondor_s_sentence(tmp_path):
    path = tmp_path / "growing"
    path.write_bytes(b"x" * 100)

    def opener(p: str) -> int:
        fd = os.open(p, os.O_RDONLY)
        with open(p, "ab") as fh:  # the job's file grows between the size taken and the read
            fh.write(b"more")
        return fd

    real_fstat = os.fstat
    calls = []

    def fstat_once_stale(fd):  # the size as it was when the read began
        st = real_fstat(fd)
        calls.append(st)
        if len(calls) == 1:
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 100,
                                   st.st_atime, st.st_mtime, st.st_ctime))
        return st

    mp = pytest.MonkeyPatch()
    mp.setattr(inline.os, "fstat", fstat_once_stale)
    try:
        with pytest.raises(TransferError, match=r"growing: ReliSock: put_file: only sent 101 bytes out of 104"):
            inline.read_entries([Entry("growing", str(path))], opener)
    finally:
        mp.undo()


def test_a_symbolic_link_out_of_the_sandbox_is_never_read_as_output(tmp_path):
    (tmp_path / spec.STDOUT).write_text("out")
    os.symlink("/etc/passwd", tmp_path / "secret")
    with pytest.raises(TransferError, match="secret.*symbolic link"):
        inline.read_output(str(tmp_path), {"TransferOutput": "secret"}, {}, 1 << 20)
    # Not listed: a link the job made is left out, never followed.
    assert inline.read_output(str(tmp_path), {}, {}, 1 << 20) == [[spec.STDOUT, 0o644, b"out"]]


def test_names_from_the_other_end_that_leave_the_sandbox_are_refused(tmp_path):
    sink = stream.DirectorySink(lambda n: str(tmp_path / n))
    for bad in ("../x", "/etc/x", "a/../../x", ""):
        with pytest.raises(TransferError, match="leave the sandbox"):
            inline.write_files([[bad, 0o644, b"x"]], sink)
    with pytest.raises(TransferError, match="must be"):
        inline.write_files([["ok", "rw", b"x"]], sink)
    assert list(tmp_path.iterdir()) == []


def test_the_shadow_reads_and_writes_many_jobs_in_one_request_each(iwd, tmp_path):
    (iwd / "big").write_bytes(b"b" * 5000)
    small = _ad(iwd, TransferInput="naïve file.txt")
    jobs = [{"id": "1.0", "spec": small}, {"id": "1.1", "spec": _ad(iwd, TransferInput="big")},
            {"id": "1.2", "spec": _ad(iwd, TransferInput="gone")}]
    answer = asyncio.run(shadow_child._handle({"op": "inline_in", "limit": 1000, "jobs": jobs}))["jobs"]
    assert [n for n, _m, _d in answer["1.0"]["files"]] == ["naïve file.txt", "prog.sh"]
    assert base64.b64decode(answer["1.0"]["files"][0][2]) == ("ü" * 100).encode()
    assert answer["1.1"] == {"big": True}
    assert "gone" in answer["1.2"]["error"] and answer["1.2"]["errno"] == 2
    out = tmp_path / "back"
    out.mkdir()
    data = base64.b64encode(b"result").decode()
    answer = asyncio.run(shadow_child._handle({"op": "inline_out", "jobs": [
        {"id": "1.0", "spec": {"Iwd": str(out), "Out": "job.out", "TransferOutputRemaps": "r.txt = moved.txt"},
         "files": [[spec.STDOUT, 0o644, data], ["r.txt", 0o600, data]]},
        {"id": "1.1", "spec": {"Iwd": str(out / "job.out" / "sub")}, "files": [["x", 0o644, data]]}]}))["jobs"]
    assert answer["1.0"] == {"bytes": 12}
    assert (out / "job.out").read_bytes() == b"result" and (out / "moved.txt").read_bytes() == b"result"
    assert answer["1.1"]["errno"] == 20 and "Not a directory" in answer["1.1"]["error"]
    assert [p.name for p in out.iterdir() if "partial" in p.name] == []


def test_a_killed_writer_s_temporary_files_are_swept_by_its_pid_and_only_its(tmp_path):
    sink = stream.DirectorySink(lambda n: str(tmp_path / n))
    fh = sink.open("out.txt", 3, 0o644)  # left open, as by a writer killed mid-file
    fh.write(b"par")
    other = tmp_path / f".out.txt.{stream.partial_tag(os.getpid() + 1)}abcd{stream.PARTIAL_SUFFIX}"
    other.write_text("another writer's")
    assert stream.sweep_partials([str(tmp_path), str(tmp_path / "missing")], os.getpid()) == 1
    assert [p.name for p in tmp_path.iterdir()] == [other.name]
    fh.close()


def test_the_directories_an_output_goes_to():
    ad = {"Iwd": "/home/u/run", "Out": "logs/job.out", "Err": "/dev/null",
          "TransferOutputRemaps": "a.txt = /data/a.txt; results = /data/results"}
    # (A remap's destination counts as a directory too: it may name one; a file's is passed over.)
    assert spec.output_directories(ad) == {"/home/u/run", "/home/u/run/logs", "/data", "/data/results", "/data/a.txt"}
