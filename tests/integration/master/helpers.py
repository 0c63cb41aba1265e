"""Running a master as a real process in the tests, and waiting on conditions with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gridbus.agents.master import pidfile
from tests.helpers import wait_for as shared_wait_for

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, poll: float = 0.1) -> T:
    """The first truthy value of ``condition()`` within ``timeout`` seconds, else fail; an
    exception counts as not ready yet (no answer, no file)."""
    return shared_wait_for(condition, timeout, what, interval=poll, tolerate=(Exception,))


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


GRIDBUS = str(Path(sys.executable).with_name("gridbus"))


def gridbus(env: dict[str, str], cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The `gridbus` command, run to its end; its output captured."""
    return subprocess.run([GRIDBUS, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (our pool's directories)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd and alive(int(entry.name)):
                found.append(int(entry.name))
    return found
