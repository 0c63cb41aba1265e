"""`gridbus config`: every knob's effective value and where it came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GRIDBUS = str(Path(sys.executable).with_name("gridbus"))


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_")}
    return subprocess.run([GRIDBUS, "config", *args], cwd=tmp_path, env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def test_config_prints_values_and_sources(tmp_path: Path) -> None:
    (tmp_path / "gridbus.toml").write_text("NEGOTIATOR_INTERVAL = 20\n[schedd]\nUPDATE_INTERVAL = 7\n")
    out = run(tmp_path, GRIDBUS_CLAIM_WORKLIFE="60")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"# configuration file: {(tmp_path / 'gridbus.toml').resolve()}"
    assert f"NEGOTIATOR_INTERVAL = 20.0  # file {(tmp_path / 'gridbus.toml').resolve()}" in lines
    assert "CLAIM_WORKLIFE = 60.0  # env GRIDBUS_CLAIM_WORKLIFE" in lines
    assert "UPDATE_INTERVAL = 300.0  # default" in lines
    # Knobs the daemon modules declare are listed too.
    assert any(line.startswith("MASTER_BACKOFF_CONSTANT = ") for line in lines)
    schedd = run(tmp_path, "--daemon", "schedd", "--json", "update_interval")
    assert schedd.returncode == 0, schedd.stderr
    assert json.loads(schedd.stdout) == {
        "UPDATE_INTERVAL": {"value": 7.0, "source": f"file {(tmp_path / 'gridbus.toml').resolve()} [schedd]"}}


def test_config_names_an_unknown_knob(tmp_path: Path) -> None:
    out = run(tmp_path, "NO_SUCH_KNOB")
    assert out.returncode == 1 and "NO_SUCH_KNOB" in out.stderr


def test_config_reports_a_bad_value_as_invalid(tmp_path: Path) -> None:
    out = run(tmp_path, "UPDATE_INTERVAL", GRIDBUS_UPDATE_INTERVAL="soon")
    assert out.returncode == 0
    assert "UPDATE_INTERVAL = <invalid: UPDATE_INTERVAL from env GRIDBUS_UPDATE_INTERVAL: 'soon'" in out.stdout
