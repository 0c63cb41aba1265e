"""Running a master as a real process in the tests, and waiting on conditions with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gridbus.agents.master import pidfile

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, poll: float = 0.1) -> T:
    """Return the first truthy value of ``condition()`` within ``timeout`` seconds, else fail."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except Exception as exc:  # not ready yet (no answer, no file)
            last = exc
        else:
            if last:
                return last
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def env_for(local_dir: Path, url: str, **knobs: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_")}
    env.update({"GRIDBUS_URL": url, "GRIDBUS_LOCAL_DIR": str(local_dir), "PYTHONPATH": str(REPO)})
    env.update({f"GRIDBUS_{k}": v for k, v in knobs.items()})
    return env


def start_master(config: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "gridbus.agents.master", "--config", str(config)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return proc.returncode


def alive(pid: int) -> bool:
    return pidfile.alive(pid)
