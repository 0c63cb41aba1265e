"""The README's command-line walk-through, command for command, and an htcondor2 script run against
gridbus with only its imports changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def walkthrough_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Walk-through", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's walk-through has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_readme_walkthrough_runs_command_for_command(pool, tmp_path: Path):
    env = {**os.environ, "GRIDBUS_URL": pool.url, "PATH": f"{BIN}:{os.environ['PATH']}"}
    outputs: dict[str, str] = {}
    for line in walkthrough_commands():
        done = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, f"README command failed: {line}\n{done.stderr}"
        outputs[line] = done.stdout
    assert "3 job(s) submitted to cluster" in outputs[walkthrough_commands()[1]]
    assert outputs["cat out.0 out.1 out.2"] == "hello alpha\nhello beta\nhello gamma\n"
    history = next(v for k, v in outputs.items() if k.startswith("gridbus history"))
    assert sorted(line.split()[1:] for line in history.splitlines()) == [["0", "0"], ["1", "0"], ["2", "0"]]
    assert "Total for query: 2 jobs;" in outputs["gridbus q"]
    assert "have been marked for removal" in outputs["gridbus rm -all"]
    assert "Total" in outputs["gridbus status"]


def test_htcondor2_script_runs_with_only_its_imports_changed(pool, tmp_path: Path):
    original = (Path(__file__).with_name("scripts") / "htcondor2_script.py").read_text()
    changed = original.replace("import htcondor2 as htcondor", "import gridbus.console as htcondor").replace(
        "from htcondor2 import", "from gridbus.console import")
    assert changed.count("\n") == original.count("\n")
    diff = [(a, b) for a, b in zip(original.splitlines(), changed.splitlines(), strict=True) if a != b]
    assert len(diff) == 2 and all("import" in a for a, _ in diff)
    script = tmp_path / "script.py"
    script.write_text(changed)
    env = {**os.environ, "GRIDBUS_URL": pool.url}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "run.log")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"submitted \d+ 0 3", lines[0])
    assert sorted(line for line in lines if line.startswith("terminated")) == [
        "terminated 0 0", "terminated 1 0", "terminated 2 0"]
    assert "held [(0, 5)] HELD" in lines
    assert "history [(0, 0), (1, 0), (2, 0)]" in lines
    assert [(tmp_path / f"out.{i}").read_text() for i in range(3)] == ["alpha\n", "beta\n", "gamma\n"]


def test_readme_qmf_console_example_runs(pool, tmp_path: Path):
    text = (ROOT / "README.md").read_text()
    section = text.split("## The QMF-style console", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "the README's QMF-style console section has no ```python block"
    code = block.group(1).replace('"amqp://guest:guest@127.0.0.1:5672/"', repr(pool.url))
    script = tmp_path / "qmf.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("schedd@s ['scheduler']") for line in lines), lines
    (status_line,) = [line for line in lines if line.startswith("0 OK ")]
    cluster = status_line.split()[2]
    assert re.fullmatch(rf"s#{cluster}\.0#\d+ \d /bin/echo", lines[-1]), lines
