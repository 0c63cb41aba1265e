"""The README's first command, `make demo` (scripts/demo.py), end to end on the real daemons."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.master.helpers import REPO, env_for
from tests.integration.master.test_personal_pool import processes_mentioning

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def test_demo_runs_a_cluster_to_completion_and_stops_the_pool(tmp_path: Path, amqp_url: str):
    local = tmp_path / "local"
    env = env_for(local, amqp_url, UPDATE_INTERVAL="1", NEGOTIATOR_INTERVAL="1")
    try:
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--jobs", "3", "--down", "--timeout", "120"],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        for proc in range(3):
            assert f"hello from job {proc} of cluster" in done.stdout
        assert "all 3 jobs completed" in done.stdout
        assert "OWNER" in done.stdout  # gridbus q's table was shown
        assert processes_mentioning(str(local)) == []
    finally:
        for pid in processes_mentioning(str(local)):
            subprocess.run(["kill", "-9", str(pid)], check=False)
