"""What a self-checkpointing job's checkpoint holds, when an exit is one, and how a later run's
input brings it back (gridbus/transfer/spec.py)."""

from __future__ import annotations

import os

import pytest

from gridbus.transfer import spec
from gridbus.transfer.stream import TransferError

CKPT = {"SuccessCheckpointExitCode": 85, "WantFTOnCheckpoint": True}


@pytest.mark.parametrize(("ad", "exit_info", "expected"), [
    (CKPT, {"ExitBySignal": False, "ExitCode": 85}, True),
    (CKPT, {"ExitBySignal": False, "ExitCode": 0}, False),
    (CKPT, {"ExitBySignal": True, "ExitSignal": 9}, False),
    ({"SuccessCheckpointExitCode": 85}, {"ExitBySignal": False, "ExitCode": 85}, False),  # no WantFTOnCheckpoint
    ({**CKPT, "WantFTOnCheckpoint": "true"}, {"ExitBySignal": False, "ExitCode": 85}, True),
    ({}, {"ExitBySignal": False, "ExitCode": 85}, False),
])
def test_an_exit_is_a_checkpoint_with_the_code_and_want_ft_on_checkpoint(ad, exit_info, expected):
    assert spec.wants_checkpoint(ad, exit_info) is expected


@pytest.fixture
def scratch(tmp_path):
    for name, text in (("prog.sh", "#!/bin/sh\n"), ("input.dat", "in"), ("saved-state", "3"), ("steps.log", "x"),
                       ("scratch.tmp", "t"), (spec.STDOUT, "out")):
        (tmp_path / name).write_text(text)
    os.symlink("/etc/passwd", tmp_path / "link")
    return tmp_path


def _names(entries):
    return sorted(e.name for e in entries)


def test_a_checkpoint_is_transfer_checkpoint_else_the_output_list_with_stdout(scratch):
    ad = {"Cmd": str(scratch / "prog.sh"), "TransferInput": "input.dat", "TransferCheckpoint": "saved-state, steps.log",
          "TransferOutput": "steps.log"}
    assert _names(spec.checkpoint_entries(str(scratch), ad)) == [spec.STDOUT, "saved-state", "steps.log"]
    del ad["TransferCheckpoint"]
    assert _names(spec.checkpoint_entries(str(scratch), ad)) == [spec.STDOUT, "steps.log"]


def test_a_checkpoint_without_lists_is_every_top_level_file_but_the_input(scratch):
    ad = {"Cmd": str(scratch / "prog.sh"), "TransferInput": "input.dat", "In": "/dev/null"}
    assert _names(spec.checkpoint_entries(str(scratch), ad)) == [spec.STDOUT, "saved-state", "scratch.tmp", "steps.log"]


def test_a_missing_checkpoint_file_is_named(scratch):
    with pytest.raises(TransferError, match="absent"):
        spec.checkpoint_entries(str(scratch), {"TransferCheckpoint": "absent"})


def test_the_next_input_brings_the_checkpoint_over_an_input_of_the_same_name(tmp_path):
    iwd, ckpt = tmp_path / "iwd", tmp_path / "ckpt"
    iwd.mkdir()
    ckpt.mkdir()
    (iwd / "prog.sh").write_text("#!/bin/sh\n")
    (iwd / "saved-state").write_text("from the submit directory")
    (ckpt / "saved-state").write_text("6")
    (ckpt / spec.STDOUT).write_text("resuming after 3\n")
    ad = {"Iwd": str(iwd), "Cmd": str(iwd / "prog.sh"), "In": "/dev/null", "TransferInput": "saved-state",
          spec.CHECKPOINT_FROM: str(ckpt)}
    entries = {e.name: e.path for e in spec.input_entries(ad)}
    assert sorted(entries) == [spec.STDOUT, "prog.sh", "saved-state"]
    assert entries["saved-state"] == str(ckpt / "saved-state")
