"""Pid files of a host's daemons, so `gridbus pool down` can find every process it must end.

The master writes ``$(RUN)/master.pid`` for itself and ``$(RUN)/<daemon>.pid`` for each child it
runs; a pid file names a live process only if that process is still the one that wrote it, which
is checked against its command line (a recycled pid must never be signalled).
"""

from __future__ import annotations

import os
from pathlib import Path


def write(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(path)  # atomic: a reader never sees a half-written pid


def read(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return int(text) if text.isdigit() else None


def remove(path: Path, pid: int | None = None) -> None:
    """Remove ``path``; with ``pid``, only if it still names that pid (another writer may own it)."""
    if pid is not None and read(path) != pid:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def cmdline(pid: int) -> str:
    """The process's command line with spaces between arguments, or '' if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def alive(pid: int, expect: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie), and its command line contains ``expect`` if given."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        pass
    return expect is None or expect in cmdline(pid)


def live_pid(path: Path, expect: str | None = None) -> int | None:
    """The pid in ``path`` if that process is alive (and is ``expect``), else None."""
    pid = read(path)
    return pid if pid is not None and alive(pid, expect) else None
