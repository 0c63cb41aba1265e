"""`gridbus wait` over a user log: condor_wait's -num and -echo, read from a log HTCondor's format."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from gridbus.console.cli import jobs
from gridbus.eventlog import writer


def _log(path: Path, *events: str) -> None:
    for text in events:
        writer.append(path, text)


def _args(log: Path, **kw: object) -> argparse.Namespace:
    base = {"log": str(log), "job": None, "wait": 0.5, "quiet": True, "num": None, "echo": False}
    base.update(kw)
    return argparse.Namespace(**base)


def test_num_returns_once_that_many_jobs_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "a.log"
    now = time.time()
    _log(log, writer.submit(7, 0, now, "<schedd>"), writer.submit(7, 1, now, "<schedd>"),
         writer.terminated(7, 0, now, exit_code=0))
    # Without -num one job of the two is still running: time expires.
    assert jobs.cmd_wait(_args(log)) == 1
    assert jobs.cmd_wait(_args(log, num=1)) == 0
    assert "All jobs done." in capsys.readouterr().out


def test_num_must_be_positive(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    _log(log, writer.submit(7, 0, time.time(), "<schedd>"))
    with pytest.raises(ValueError, match="-num"):
        jobs.cmd_wait(_args(log, num=0))


def test_echo_prints_the_wanted_jobs_events_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "a.log"
    now = time.time()
    _log(log, writer.submit(7, 0, now, "<schedd>"), writer.submit(8, 0, now, "<schedd>"),
         writer.terminated(8, 0, now, exit_code=0), writer.terminated(7, 0, now, exit_code=3))
    assert jobs.cmd_wait(_args(log, job="7", echo=True)) == 0
    out = capsys.readouterr().out
    assert out.count("...") == 2 and "(007.000.000)" in out and "(008." not in out
    assert "return value 3" in out


def test_without_echo_no_event_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "a.log"
    now = time.time()
    _log(log, writer.submit(7, 0, now, "<schedd>"), writer.terminated(7, 0, now, exit_code=0))
    assert jobs.cmd_wait(_args(log)) == 0
    assert capsys.readouterr().out == "All jobs done.\n"
