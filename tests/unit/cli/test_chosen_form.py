"""`formats.chosen_form`: the -json / -l / -af choice every listing command shares."""

from __future__ import annotations

import argparse
import json

from gridbus.console.cli import formats

ADS = [{"Name": "slot1@a", "Cpus": 2}, {"Name": "slot2@a", "Cpus": 4}]


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"json": False, "long": False, "af": None, **kw})


def test_json_comes_first():
    text = formats.chosen_form(_args(json=True, long=True, af=["Name"]), ADS)
    assert [ad["Name"] for ad in json.loads(text)] == ["slot1@a", "slot2@a"]


def test_long_before_autoformat():
    assert formats.chosen_form(_args(long=True, af=["Name"]), ADS) == "Cpus = 2\nName = \"slot1@a\"\n\nCpus = 4\nName = \"slot2@a\"\n\n"


def test_autoformat_prints_the_named_attributes():
    assert formats.chosen_form(_args(af=["Name", "Cpus"]), ADS) == "slot1@a 2\nslot2@a 4\n"


def test_no_form_asked_leaves_the_table_to_the_command():
    assert formats.chosen_form(_args(), ADS) is None
    assert formats.chosen_form(argparse.Namespace(), ADS) is None
