"""Where a PRE or POST script's output goes: DAGMan's own streams, or a DEBUG file's capture."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from gridbus.dag.model import Script


def inherited_streams() -> dict[str, Any]:
    """A script without DEBUG writes to DAGMan's own output and error (the DAGMan job's
    ``<dag>.lib.out`` and ``.lib.err``), as HTCondor's scripts do: what DAGMan printed goes first."""
    sys.stdout.flush()
    sys.stderr.flush()
    return {"stdout": None, "stderr": None}


class ScriptOutput:
    """A script's DEBUG capture: its STDOUT, STDERR or ALL (both) kept in temporary files (a pipe
    read only when the script ends could fill and stop it), and appended to the DEBUG file when it
    ends, in one write, under HTCondor's banner ``*** Node=... Type=... ExitCode=... Completion=...
    Cmd='...'``; several scripts may share one DEBUG file."""

    def __init__(self, script: Script, node: str, kind: str, command: str):
        self.script, self.node, self.kind, self.command = script, node, kind, command
        self.out: IO[bytes] | None = tempfile.TemporaryFile() if script.debug_type in ("STDOUT", "ALL") else None
        self.err: IO[bytes] | None = tempfile.TemporaryFile() if script.debug_type in ("STDERR", "ALL") else None

    def streams(self) -> dict[str, Any]:
        return {"stdout": self.out or subprocess.DEVNULL, "stderr": self.err or subprocess.DEVNULL}

    def finish(self, node_dir: Path, code: int) -> None:
        """Append the banner and what was captured; ``code`` is Popen's (negative: the signal)."""
        what = f"ExitCode={code}" if code >= 0 else f"Signal={-code}"
        data = (f"*** Node={self.node} Type={self.kind} {what} Completion={int(time.time())} "
                f"Cmd='{self.command}'\n").encode()
        for fh in (self.out, self.err):
            if fh is not None:
                fh.seek(0)
                data += fh.read()
        self.discard()
        target = Path(self.script.debug_file)
        try:
            fd = os.open(target if target.is_absolute() else node_dir / target,
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            print(f"ERROR: Failed to write {self.node} {self.kind} Script output to {target}: {exc}",
                  file=sys.stderr, flush=True)

    def discard(self) -> None:
        for fh in (self.out, self.err):
            if fh is not None:
                fh.close()
