"""-version on `gridbus` and on each of its commands prints the version lines, as condor_version
and every condor tool do; the version is written once (gridbus.__version__)."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import gridbus
from gridbus.console import cli
from gridbus.console.version import version_lines

ROOT = Path(__file__).resolve().parents[3]
LINES = re.compile(r"\$CondorVersion: (\S+) \d{4}-\d\d-\d\d BuildID: gridbus \$\n\$CondorPlatform: \S+ \$\n")


def _commands() -> list[str]:
    parser = cli.build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(subs[0].choices)


def test_every_command_is_covered():
    assert {"q", "submit", "status", "analyze", "submit_dag", "pool", "rm"} <= set(_commands())


@pytest.mark.parametrize("argv", [["-version"], ["--version"], *([c, "-version"] for c in _commands()),
                                  ["pool", "up", "-version"], ["q", "-nobatch", "-version", "1.0"]])
def test_version_option_prints_the_version_lines(argv, capsys, monkeypatch):
    monkeypatch.delenv("GRIDBUS_URL", raising=False)  # no pool is needed, none is reached
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    m = LINES.fullmatch(out.out)
    assert m and m.group(1) == gridbus.__version__ and out.err == ""
    assert out.out == version_lines()


def test_version_after_double_dash_is_an_argument():
    assert not cli.asks_version(["q", "--", "-version"])
    assert cli.asks_version(["q", "-version", "--", "x"])


@pytest.mark.parametrize("command", ["q", "status", "submit_dag"])
def test_each_commands_help_lists_version(command, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([command, "--help"])
    assert "-version" in capsys.readouterr().out


def test_the_version_is_written_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("gridbus") == gridbus.__version__
