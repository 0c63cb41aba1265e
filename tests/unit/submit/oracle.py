"""Find or make the interpreter that runs HTCondor 24's submit code, and run the oracle in it.

The venv lives in `.venv-htcondor24/` at the repository root (gitignored), or where
GRIDBUS_HTCONDOR24_PYTHON points to an interpreter that already has htcondor==24.0.24. It is made
once, from PyPI, the first time a test needs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VENV = ROOT / ".venv-htcondor24"
ORACLE = Path(__file__).with_name("oracle_v1.py")
PIN = "htcondor==24.0.24"


def _works(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-W", "ignore", "-c", "import htcondor; htcondor.Submit"], capture_output=True, timeout=120)
    return probe.returncode == 0


def oracle_python() -> Path:
    env = os.environ.get("GRIDBUS_HTCONDOR24_PYTHON")
    if env:
        return Path(env)
    python = VENV / "bin" / "python"
    if _works(python):
        return python
    made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], capture_output=True, text=True, timeout=300)
    if made.returncode != 0:
        pytest.fail(f"cannot make the HTCondor 24 oracle venv at {VENV}: {made.stderr.strip()}")
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", PIN], capture_output=True, text=True, timeout=900)
    if pip.returncode != 0 or not _works(python):
        pytest.fail(f"cannot install {PIN} into {VENV} (PyPI needed once): {pip.stderr.strip()[-500:]}")
    return python


def run_oracle(corpus: Path, workdir: Path, cluster: int, qdate: int) -> dict:
    python = oracle_python()
    done = subprocess.run(
        [str(python), "-W", "ignore", str(ORACLE), str(corpus), str(workdir), str(cluster), str(qdate)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "CONDOR_CONFIG": "/dev/null", "TZ": "UTC"},
    )
    if done.returncode != 0:
        pytest.fail(f"the HTCondor oracle failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)
