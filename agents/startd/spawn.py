"""The starter's fast spawn: a job's first process made without a copy of the startd, born in its
cgroups and under its account (agents/startd/_spawn.c), where the extension is built.

``subprocess.Popen`` forks a copy of the startd whenever a job runs under another account (glibc's
setuid() may not run in a child sharing the parent's memory), and a cgroup v1 job is born in its
groups only by the startd's thread moving into them and back for the fork: on the test machine the
two were about half of the startd loop's time per job at two slots. The extension's child shares
the startd's memory and joins the groups and takes the account's ids with the raw system calls
before its exec; on x86-64 and aarch64 it runs beside the startd (`CONCURRENT`: `begin` returns
at once, the outcome comes later from `Launching`), elsewhere it is a vfork. Where the extension
is not built (no C compiler at install), the starter uses Popen (STARTER_FAST_SPAWN says which).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from gridbus.agents.startd.accounts import Account
from gridbus.agents.startd.cgroups import JobCgroup, JoinFailed

_spawn: ModuleType | None
try:
    from gridbus.agents.startd import _spawn
except ImportError:  # not built: the starter falls back to subprocess.Popen
    _spawn = None

AVAILABLE = _spawn is not None
_FS_ENCODING = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())  # what os.fsencode uses
# The child runs beside the startd (clone on a stack of its own) rather than suspending it (vfork).
CONCURRENT = bool(_spawn is not None and _spawn.CONCURRENT)

_devnull: int | None = None


class Child:
    """A job's first process, running: the part of ``Popen``'s interface the starter uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def wait(self) -> int | None:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped elsewhere
                return None
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fd(fd: int) -> int:
    """Popen's DEVNULL as a descriptor (one /dev/null kept open for every job)."""
    global _devnull
    if fd != subprocess.DEVNULL:
        return fd
    if _devnull is None:
        _devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    return _devnull


class Launching:
    """A job's first process between `begin` and its exec: the startd's loop watches ``fileno()``
    and takes the outcome with `result` (a `Child`) when it is readable, instead of waiting."""

    def __init__(self, launch: Any, group: JobCgroup | None):
        self._launch = launch
        self._group = group
        self.pid: int = launch.pid
        self.failed_stage: str | None = None  # the child's step that failed, once `result` raised

    def fileno(self) -> int:
        return self._launch.fileno()

    def result(self) -> Child:
        """The running job, once it has exec'd (waits for that). Raises OSError as Popen does
        (``filename`` is the executable, or ``cwd`` if it could not be entered), and
        cgroups.JoinFailed as a thread's join does."""
        assert _spawn is not None  # a Launching is made only by begin(), which needs the extension
        try:
            return Child(self._launch.result())
        except _spawn.SpawnError as exc:
            stage, errno, strerror, filename = exc.args
            self.failed_stage = stage
            if stage == "cgroup":
                assert self._group is not None
                raise JoinFailed(f"cannot put the job in its cgroup {self._group.rel}: {strerror}", errno) from None
            if stage in ("exec", "chdir"):
                raise OSError(errno, strerror, os.fsdecode(filename)) from None
            raise OSError(errno, f"{strerror} (in the job's {stage} step)") from None


def begin(argv: Sequence[str], *, executable: str, cwd: str | None, env: Mapping[str, str],
          fds: tuple[int, int, int], account: Account, group: JobCgroup | None = None,
          after: int | None = None) -> Launching:
    """Start the job: in a session of its own, with ``fds`` as its standard streams (Popen's
    DEVNULL allowed; they must stay open until the outcome is known), in ``cwd``, as ``account``
    (when it is not the startd's own), born in ``group``. Returns before the job's exec where the
    child runs beside the caller (`CONCURRENT`). ``after``: a pidfd; the child does all but the
    exec now, and execs when that process has exited (a SIGKILL meanwhile cancels it; it dies
    with the startd). Raises ValueError for an argument or variable no process can take,
    OSError when no process could be made."""
    if _spawn is None:
        raise RuntimeError("the fast spawn is not built (agents/startd/_spawn.c)")
    for key in env:  # (a NUL anywhere is refused by the extension)
        if "=" in key:
            raise ValueError(f"environment variable {key!r} cannot be passed to a process")
    ids = (account.uid, account.gid, list(account.groups)) if account.switch else (-1, -1, [])
    code, errors = _FS_ENCODING
    launch = _spawn.spawn(
        os.fsencode(executable),
        [a.encode(code, errors) for a in argv],  # (os.fsencode per string was a tenth of this call)
        [f"{k}={v}".encode(code, errors) for k, v in env.items()],
        os.fsencode(cwd) if cwd else None,
        tuple(_fd(fd) for fd in fds),
        *ids,
        group.join_fds() if group is not None else (),
        -1 if after is None else after,
    )
    return Launching(launch, group)

