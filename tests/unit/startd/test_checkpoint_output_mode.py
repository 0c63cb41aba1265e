"""A self-checkpointing job's Out and Err are appended to (as HTCondor's starter opens them for a
job with WantFTOnCheckpoint, or EraseOutputAndErrorOnRestart false): a run restarted from a
checkpoint goes on with the output its checkpoint brought back. Others are truncated."""

from __future__ import annotations

import os

import pytest

from gridbus.agents.startd.launch import output_mode


@pytest.mark.parametrize(("ad", "mode"), [
    ({}, os.O_TRUNC),
    ({"WantFTOnCheckpoint": True}, os.O_APPEND),
    ({"WantFTOnCheckpoint": "true"}, os.O_APPEND),
    ({"WantFTOnCheckpoint": False}, os.O_TRUNC),
    ({"EraseOutputAndErrorOnRestart": False}, os.O_APPEND),
    ({"EraseOutputAndErrorOnRestart": True}, os.O_TRUNC),
])
def test_output_is_appended_to_for_self_checkpointing_jobs(ad, mode):
    assert output_mode(ad) == mode
