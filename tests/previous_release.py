"""The previous tagged release, checked out and installed for the upgrade tests (a pytest plugin).

`previous_release` makes, once per test session, a git worktree of the tag PREVIOUS_TAG in a
temporary directory and a virtual environment of its own, the release installed in it (editable,
its dependencies those of this checkout's environment: a .pth file names its site-packages). It
takes about half a minute; a test asking for it is skipped, saying why, where the tag is absent
(a shallow clone, or a clone made before the tag) or the release cannot be installed. Such a skip is
also said at the end of the run, with the command that makes the tag available: `pytest -q` (what
CI runs) shows no skip reasons, and the upgrade tests must not go missing unnoticed.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PREVIOUS_TAG = "v0.1.0"
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Release:
    tag: str
    source: Path  # its worktree
    python: Path  # its environment's interpreter

    def run(self, code: str, *args: str, timeout: float = 120) -> str:
        """Run ``code`` with the release's interpreter (in its worktree); its stdout."""
        done = subprocess.run([str(self.python), "-c", code, *args], cwd=self.source, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"{self.tag} failed: {done.stderr[-2000:]}")
        return done.stdout


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


# The command that brings the tag into a clone that lacks it (from the clone's origin).
FETCH_TAG = f"git -C {REPO} fetch origin tag {PREVIOUS_TAG}"
_skipped: list[str] = []  # why the upgrade tests were skipped in this session, said at its end


def _skip(reason: str) -> None:
    _skipped.append(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    if _git("rev-parse", "-q", "--verify", f"refs/tags/{PREVIOUS_TAG}").returncode != 0:
        _skip(f"the tag {PREVIOUS_TAG} is not in this clone (a shallow clone, or one made before the tag): "
              f"`{FETCH_TAG}` makes it available and the upgrade tests run")
    root = tmp_path_factory.mktemp("previous-release")
    source, venv = root / "src", root / "venv"
    added = _git("worktree", "add", "--detach", str(source), PREVIOUS_TAG)
    if added.returncode != 0:
        _skip(f"could not check out {PREVIOUS_TAG}: {added.stderr.strip()}")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        # This environment's packages (pip among them) serve the release: same dependencies.
        Path(purelib, "this-checkout-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(source)],
                                   capture_output=True, text=True, timeout=600)
        if installed.returncode != 0:
            _skip(f"could not install {PREVIOUS_TAG} in a venv of its own: {installed.stderr.strip()[-500:]}")
        yield Release(PREVIOUS_TAG, source, python)
    finally:
        _git("worktree", "remove", "--force", str(source))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The upgrade tests' skip, said even under -q (which lists no skip reasons)."""
    if _skipped:
        terminalreporter.write_line(f"the upgrade tests against {PREVIOUS_TAG} were SKIPPED: {_skipped[0]}",
                                    yellow=True, bold=True)
