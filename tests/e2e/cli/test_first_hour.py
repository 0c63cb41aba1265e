"""A new user's first minutes, from the README: `gridbus pool up --detach`, then
`printf 'executable = /bin/true\\nqueue 3\\n' > a.sub && gridbus submit a.sub && gridbus wait <cluster>`
completes, as root and as a user who is not root.

Nothing is set up for the jobs beyond what a user would do: no request lines, no STARTER_* knobs
(started by root, the pool itself says it runs jobs as nobody), no log file. The intervals are
short so the test does not sit through default negotiation cycles. The non-root run is `nobody`,
through `runuser`, with a virtualenv made from the system's Python (the test's own interpreter
lives under /root, which nobody cannot read) and a LOCAL_DIR of its own.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
# Outside the checkout: a clone under /root (mode 0700) is out of nobody's reach.
NONROOT_VENV = Path("/var/tmp/gridbus-nonroot-venv")
SYSTEM_PYTHON = Path("/usr/bin/python3")
QUICK = {"GRIDBUS_UPDATE_INTERVAL": "1", "GRIDBUS_NEGOTIATOR_INTERVAL": "1", "GRIDBUS_SCHEDD_INTERVAL": "1",
         "GRIDBUS_NEGOTIATOR_CYCLE_DELAY": "0.3"}
# The cluster id for `gridbus wait` is the one `gridbus submit` prints ("3 job(s) submitted to cluster N.").
FIRST_HOUR = ("printf 'executable = /bin/true\\nqueue 3\\n' > a.sub && gridbus submit a.sub > submitted && "
              "cat submitted && gridbus wait -wait 90 -quiet $(sed -n 's/.*submitted to cluster \\([0-9]*\\)\\./\\1/p' submitted) && "
              "gridbus history -af JobStatus ExitCode")

OWNER_SCRIPT = ("import getpass; from gridbus.console import Schedd; me = getpass.getuser(); "
                "print(me, len(Schedd().history(f\"Owner == \\\"{me}\\\"\", [\"ProcId\"])))")


def _nonroot_bin() -> Path:
    """The `gridbus` of a virtualenv any user can run, made from the system's Python outside the
    checkout (which may sit where nobody cannot read, as under /root), with this checkout installed
    into it as a copy (not editable: the copy is what nobody runs), afresh on every run."""
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"no system Python at {SYSTEM_PYTHON} to make a virtualenv a non-root user can run")
    python = NONROOT_VENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--clear", str(NONROOT_VENV)], capture_output=True,
                              text=True, timeout=300)
        assert made.returncode == 0, made.stderr
    build = Path(tempfile.mkdtemp(prefix="gridbus-nonroot-build-"))
    try:  # pip builds in a copy, so nothing is written into the checkout
        src = build / "src"
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv*", ".git", "var", "__pycache__", "*.egg-info"))
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(src)],
                             capture_output=True, text=True, timeout=600)
        if pip.returncode == 0:  # the dependencies, once (a no-op afterwards)
            pip = subprocess.run([str(python), "-m", "pip", "install", "-q", str(src)], capture_output=True, text=True,
                                 timeout=600)
        assert pip.returncode == 0, pip.stderr[-2000:]
    finally:
        shutil.rmtree(build, ignore_errors=True)
    subprocess.run(["chmod", "-R", "a+rX", str(NONROOT_VENV)], check=True)
    return NONROOT_VENV / "bin"


@pytest.fixture
def home() -> Iterator[Path]:
    """A directory under /tmp that nobody may use too (pytest's own are root's, mode 0700)."""
    d = Path(tempfile.mkdtemp(prefix="gridbus-first-hour-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _first_hour(url: str, home: Path, bindir: Path, user: str | None) -> tuple[str, str]:
    """`pool up`, the user's three commands, `pool down`: (pool up's output, the commands' output)."""
    work, local = home / f"work-{user or 'root'}", home / f"local-{user or 'root'}"
    work.mkdir()
    local.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_") and k != "PYTHONPATH"}
    env.update(QUICK, GRIDBUS_URL=url, GRIDBUS_LOCAL_DIR=str(local), PATH=f"{bindir}:{env['PATH']}")
    prefix: list[str] = []
    if user is not None:
        account = pwd.getpwnam(user)
        os.chown(work, account.pw_uid, account.pw_gid)
        os.chown(local, account.pw_uid, account.pw_gid)
        env.update(HOME=str(work), USER=user, LOGNAME=user)
        prefix = ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items())]

    def sh(command: str, timeout: float = 150) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, "sh", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              timeout=timeout)

    up = sh("gridbus pool up --detach --timeout 60")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        done = sh(FIRST_HOUR)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{_logs(local)}"
        # An HTCondor script's filter on its user finds the jobs: Owner is the Unix user.
        mine = sh(f"{bindir}/python -c '{OWNER_SCRIPT}'")
        assert mine.returncode == 0 and mine.stdout.split() == [user or "root", "3"], mine.stdout + mine.stderr
        # The next thing a user does when a job sits idle: ask why.
        why = sh("printf 'executable = /bin/true\\nrequest_memory = 100 TB\\nqueue\\n' > big.sub && "
                 "gridbus submit big.sub && gridbus q -better-analyze")
        assert why.returncode == 0, why.stdout + why.stderr
        assert re.search(r"^\[\d+\]\s+0  TARGET\.Memory >= RequestMemory$", why.stdout, re.M), why.stdout
        assert "No machines matched the job's constraints" in why.stdout, why.stdout
        return up.stdout, done.stdout
    finally:
        down = sh("gridbus pool down", timeout=90)
        assert down.returncode == 0, down.stdout + down.stderr


def _logs(local: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted((local / "log").glob("*Log")))


def test_first_hour_as_root(amqp_url: str, home: Path):
    assert os.geteuid() == 0, "this variant is the root one (CI runs as root)"
    up, out = _first_hour(amqp_url, home, Path(sys.executable).parent, None)
    assert "runs jobs as nobody" in up and "your jobs are owned by root" in up
    assert re.search(r"3 job\(s\) submitted to cluster \d+", out) and "All jobs done." in out
    assert out.splitlines()[-3:] == ["4 0"] * 3, out  # completed, exit code 0


def test_first_hour_as_a_user_who_is_not_root(amqp_url: str, home: Path):
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to act as another user")
    up, out = _first_hour(amqp_url, home, _nonroot_bin(), "nobody")
    assert "runs jobs as nobody" not in up and "your jobs are owned by nobody" in up
    assert re.search(r"3 job\(s\) submitted to cluster \d+", out) and "All jobs done." in out
    assert out.splitlines()[-3:] == ["4 0"] * 3, out  # completed, exit code 0
