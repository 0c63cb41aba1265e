"""Job cgroups: every process a job starts is found, measured, frozen and killed by the kernel.

(One module over 500 lines: v1 and v2 told apart here only, so the starter never asks which it has.)

The startd owns a parent group ``<BASE_CGROUP>/<startd name>`` and the starter puts each job in a
child of it before the job's first instruction runs (see `launch`: on v1 the job is forked by a
thread that is in the group for that moment, `JobCgroup.thread_joined`, so it is born there; on v2
the child writes its own pid into the group's ``cgroup.procs`` before it execs the job, or, run as
another account, stops itself and the startd moves it and lets it go on). Whatever the job does after
that (double forks, setsid, new process groups) stays in the group, so:

- a kill empties the group: ``cgroup.kill`` on cgroup v2; on v1 the freezer stops every member
  (no fork can race the kill), each gets SIGKILL, and the group is thawed so they die;
- the memory limit is the kernel's (``memory.max`` / ``memory.limit_in_bytes``), and an OOM kill
  is counted by the kernel (``oom_kill`` in ``memory.events`` / ``memory.oom_control``);
- usage is the group's own counters: peak and resident memory, user and system cpu;
- suspend and continue are the freezer (``cgroup.freeze`` / ``freezer.state``).

Two layouts exist. cgroup v2 is one tree (``/sys/fs/cgroup`` on a unified machine, or
``/sys/fs/cgroup/unified`` on a hybrid one) where a group has the controllers its parent enabled
(``cgroup.subtree_control``); kill, freeze and the cpu counters are in every v2 group, memory, pids
and cpu weight only where those controllers are bound to v2. cgroup v1 is one hierarchy per
controller (``/sys/fs/cgroup/<controller>``), so a job's group is one directory in each of
freezer, memory, cpu, cpuacct and pids. `probe` picks one at start-up (``CGROUP_VERSION``: auto
prefers v2 when it has the memory controller, then v1 with a freezer, then a v2 tree without
memory) and says why none could be used (not root, nothing mounted): the starter then falls back
to its process scan (`proctree`).

(Longer than the project's other modules, at about 870 lines: it is the one place that knows the
kernel's cgroup files, and each operation's v1 and v2 halves are kept side by side.)
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shlex
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("gridbus.startd.cgroups")

CGROUP_ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("freezer", "memory", "cpu", "cpuacct", "pids")
V2_WANTED = ("memory", "pids", "cpu")
MEMORY_POLICIES = ("hard", "soft", "none")
USER_HZ = os.sysconf("SC_CLK_TCK")
_UNLIMITED = "max"


class JoinFailed(Exception):
    """A job could not be put in its group: ``reason`` says why, ``errno`` is the system's code."""

    def __init__(self, reason: str, errno: int = 0):
        super().__init__(reason)
        self.reason = reason
        self.errno = errno


class CgroupError(Exception):
    """No cgroup can be used here (the reason says why); the starter falls back to its scan."""


@dataclass
class CgroupUsage:
    """A job group's counters at one moment."""

    memory_peak_bytes: int = 0
    memory_bytes: int = 0  # resident now (anonymous memory: what the job itself allocated)
    user_cpu: float = 0.0  # seconds
    sys_cpu: float = 0.0
    oom_kills: int = 0
    processes: int = 0


_CHUNK = 65536


def _read(path: str) -> str:
    """A kernel file's text. Read with os.read, not open(): a job's exit reads several counter
    files on the startd's loop, and open()'s buffered text layers cost more than the reads."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _CHUNK)
        if len(data) == _CHUNK:  # (a kernel file reads whole unless it is this large)
            chunks = [data]
            while chunk := os.read(fd, _CHUNK):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data.decode()


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _keyed(path: str | _KeptFile) -> dict[str, int]:
    """A flat keyed file (``memory.stat``, ``cpu.stat``, ``memory.events``): name -> int."""
    out: dict[str, int] = {}
    try:
        text = path.text() if isinstance(path, _KeptFile) else _read(path)
    except OSError:
        return out
    words = text.split()
    if len(words) == 2 * text.count("\n"):  # (every line a name and a number: read as pairs)
        try:
            return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}
        except ValueError:
            pass
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def _int_file(path: str) -> int | None:
    try:
        return _int_text(_read(path))
    except OSError:
        return None


def _int_text(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


class _KeptFile:
    """A counter file of a group read through one descriptor kept for the group's life (opened at
    the first read, closed by `close`): a reused group's every job reads the same few files at
    its exit, on the startd's loop, and an open of a file below the cgroup mounts costs more than
    the read. Only for files that are never empty (a read at offset 0 then shows the counters as
    they are now). The monitor's thread reads some too: the lock keeps a read off a descriptor
    being closed."""

    _FLAGS = os.O_RDONLY

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()

    def text(self) -> str:
        """The file's text now; raises OSError as a read by path does."""
        with self._lock:
            return os.pread(self._opened(), _CHUNK, 0).decode()

    def _opened(self) -> int:
        """The descriptor, opened at the first use (the lock held)."""
        if self._fd is None:
            self._fd = os.open(self.path, self._FLAGS | os.O_CLOEXEC)
        return self._fd

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class _PeakFile(_KeptFile):
    """A group's memory peak (v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``), reset and
    read through one descriptor.

    On v2 this is needed: since Linux 6.12 a write to memory.peak resets the peak only as read
    through the descriptor written to, and a read through any other still gives the peak since
    the group was made. A v2 memory.peak before 6.12 cannot be written: the reset fails (the group
    is then not reused) and reads go by path."""

    _FLAGS = os.O_RDWR

    def reset(self) -> bool:
        with self._lock:
            try:
                os.pwrite(self._opened(), b"0", 0)
            except OSError:
                self._close()
                return False
            return True

    def read(self) -> int | None:
        with self._lock:
            if self._fd is None:
                return _int_file(self.path)
            try:
                return _int_text(os.pread(self._fd, 64, 0).decode())
            except OSError:
                return None


def safe_name(name: str) -> str:
    """A startd or job name as one directory name."""
    return re.sub(r"[^A-Za-z0-9_.@+-]", "_", name) or "_"


class JobCgroup:
    """One job's group: one directory (v2) or one per controller hierarchy (v1)."""

    def __init__(self, hierarchy: Hierarchy, rel: str):
        self.h = hierarchy
        self.rel = rel  # path below the hierarchy's root(s)
        self.version = hierarchy.version
        self.baseline = CgroupUsage()  # counters of earlier jobs in a reused group
        self.created = False
        self.written: dict[str, str] = {}  # limit files as last written: a reused group skips them
        self._limits: tuple[Any, ...] | None = None  # set_limits' arguments, once all were written
        self.final_raw: CgroupUsage | None = None  # counters read once the group was found empty
        # Groups may be made below this one (a container's and its monitor's, by the container
        # tool's --cgroup-parent): its members, kill and removal then reach into them too.
        self.nested = False
        self._oom_event: tuple[int, int] | None = None  # v1: (eventfd, oom_control) of `watch_oom`
        self._ooms = 0  # out-of-memory events the eventfd told of
        self._files: dict[tuple[str, str], str] = {}
        name = "tasks" if self.version == 1 else "cgroup.procs"
        self._join_files = tuple(os.path.join(d, name) for d in self.dirs())
        self._join_fds: tuple[int, ...] | None = None  # the join files, open while the group exists
        # Made here, not at first use: the loop and the monitor's thread both use it.
        self._peak_file: _PeakFile | None = None
        if "memory" in hierarchy.controllers:
            self._peak_file = _PeakFile(self.file("", "memory.peak") if self.version == 2 else
                                        self.file("memory", "memory.max_usage_in_bytes"))
        # The keyed counters every exit reads (memory.stat is read only while the job runs).
        self._cpu_file = self._oom_file = None
        if self.version == 2:
            self._cpu_file = _KeptFile(self.file("", "cpu.stat"))
            if "memory" in hierarchy.controllers:
                self._oom_file = _KeptFile(self.file("", "memory.events"))
        else:
            if "cpuacct" in hierarchy.controllers:
                self._cpu_file = _KeptFile(self.file("cpuacct", "cpuacct.stat"))
            if "memory" in hierarchy.controllers:
                self._oom_file = _KeptFile(self.file("memory", "memory.oom_control"))
        # v1's count of the group's tasks, read at every job's exit through a kept descriptor:
        # whether the job left anything behind, without a list of members by path each time.
        self._count_file = (_KeptFile(self.file("pids", "pids.current"))
                            if self.version == 1 and "pids" in hierarchy.controllers else None)
        self._kept = [f for f in (self._peak_file, self._cpu_file, self._oom_file, self._count_file) if f is not None]

    def file(self, controller: str, name: str) -> str:
        """The path of the group's file ``name`` in ``controller``'s hierarchy ("" on v2, or
        the tracking one), made once: a reused group reads the same few at every job's exit."""
        key = (controller, name)
        path = self._files.get(key)
        if path is None:
            path = self._files[key] = os.path.join(self.dir(controller), name)
        return path

    # ------------------------------------------------------------------ paths
    def dir(self, controller: str = "") -> str:
        return self.h.dir_of(self.rel, controller)

    def dirs(self) -> list[str]:
        return self.h.dirs_of(self.rel)

    @property
    def procs_files(self) -> tuple[str, ...]:
        """Where a process writes its own pid to join the group (one file per hierarchy)."""
        return tuple(os.path.join(d, "cgroup.procs") for d in self.dirs())

    @property
    def self_join_files(self) -> tuple[str, ...]:
        """Where a single-threaded process writes "0" to join the group itself: on v1 each
        hierarchy's ``tasks`` file, since the kernel moves the writing thread alone then without
        its global lock on every fork and exit of the machine (a ``cgroup.procs`` write takes it,
        and waits out an RCU grace period for it); on v2 ``cgroup.procs``."""
        return self._join_files

    def join_fds(self) -> tuple[int, ...]:
        """`self_join_files` open for writing, once for the group's life (closed by `remove`): a
        reused group's next job writes into them without looking up a path below the cgroup
        mounts. Raises JoinFailed if one cannot be opened."""
        if self._join_fds is None:
            fds: list[int] = []
            try:
                for path in self.self_join_files:
                    fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
            except OSError as exc:
                for fd in fds:
                    os.close(fd)
                raise JoinFailed(f"cannot put the job in its cgroup {self.rel}: {exc.strerror or exc}",
                                 exc.errno or 0) from None
            self._join_fds = tuple(fds)
        return self._join_fds

    # ------------------------------------------------------------------ life
    def create(self) -> None:
        # A reused group exists: a failing mkdir on a v1 cgroupfs costs about 0.2 ms per hierarchy.
        if not self.created:
            for d in self.dirs():
                os.makedirs(d, exist_ok=True)
            self.created = True

    @contextlib.contextmanager
    def thread_joined(self) -> Iterator[None]:
        """v1: the calling thread in this group while it forks the job, so the job is born in
        every hierarchy of it (a child starts in its parent thread's groups) and its first
        instruction runs there, with no shell and no migration; then back where the thread was.

        Never the main thread: a process's memory is charged to the memory group of its main
        thread (the mm owner), and the kernel's out-of-memory killer picks among main threads, so
        for that moment the startd's own pages, and the startd itself, would be the job's. (Moving
        the job into its memory group after its exec instead leaves what it touched before then
        outside its limit: a job was seen to pass its 100 MiB limit that way.)
        """
        if threading.current_thread() is threading.main_thread():
            raise RuntimeError("the main thread may not join a job's cgroup (see JobCgroup.thread_joined)")
        tid = str(threading.get_native_id())
        home = self.h.thread_home()
        controllers = sorted(self.h.controllers)
        try:
            try:
                for c in controllers:
                    _write(os.path.join(self.dir(c), "tasks"), tid)
            except OSError as exc:
                raise JoinFailed(f"cannot put the job in its cgroup {self.rel}: {exc.strerror or exc}",
                                 exc.errno or 0) from None
            yield
        finally:
            for c in controllers:
                try:
                    _write(home[c], tid)
                except OSError:  # its own group gone: the hierarchy's root, never a job's group
                    _write(os.path.join(self.h.roots[c], "tasks"), tid)

    def join_script(self) -> str:
        """Shell commands by which a process moves itself into the group (one write per
        hierarchy), run in the job's first process before it execs the job."""
        return " && ".join(f"echo $$ >{shlex.quote(f)}" for f in self.procs_files)

    def watch_oom(self) -> None:
        """v1, for a group with groups below it: count its out-of-memory events by the kernel's
        notification (an eventfd on memory.oom_control), since v1 counts an OOM kill in the
        victim's own group, below this one, which a container tool removes with the container.
        (v2's memory.events counts those below.)"""
        if self.version != 1 or "memory" not in self.h.controllers or self._oom_event is not None:
            return
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            cfd = os.open(self.file("memory", "memory.oom_control"), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            os.close(efd)
            raise
        self._oom_event = (efd, cfd)
        _write(self.file("memory", "cgroup.event_control"), f"{efd} {cfd}")

    def _oom_events(self) -> int:
        if self._oom_event is not None:
            with contextlib.suppress(BlockingIOError):
                self._ooms += os.eventfd_read(self._oom_event[0])
        return self._ooms

    def remove(self) -> bool:
        """Remove the (empty) group; False while members are still dying."""
        ok = True
        event, self._oom_event = self._oom_event, None
        for fd in event or ():
            os.close(fd)
        if self.nested:  # the groups below it first, deepest first
            for d in self.dirs():
                for below in _below(d):
                    with contextlib.suppress(OSError):
                        os.rmdir(below)
            # A container tool makes the job's path in every hierarchy, not only the startd's.
            for root in self.h.other_roots():
                for below in [*_below(os.path.join(root, self.rel)), os.path.join(root, self.rel)]:
                    with contextlib.suppress(OSError):
                        os.rmdir(below)
        self.created = False
        self.written.clear()
        self._limits = None
        for kept in self._kept:
            kept.close()
        fds, self._join_fds = self._join_fds or (), None
        for fd in fds:
            os.close(fd)
        for d in self.dirs():
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    log.warning("cannot remove cgroup %s: %s", d, exc.strerror)
                ok = False
        return ok

    def exists(self) -> bool:
        return os.path.isdir(self.dir())

    # ------------------------------------------------------------------ members
    def pids(self) -> list[int]:
        """Every process in the group (the tracking hierarchy: v2's group, v1's freezer)."""
        try:
            text = _read(self.file(self.h.tracker, "cgroup.procs"))
            if self.nested:
                for below in _below(self.dir(self.h.tracker)):
                    with contextlib.suppress(OSError):
                        text += "\n" + _read(os.path.join(below, "cgroup.procs"))
        except OSError:
            return []
        me = os.getpid()  # listed only while a thread of ours forks a job here: never signalled
        return [pid for pid in map(int, text.split()) if pid != me]

    def populated(self, unreaped: int = 0) -> bool:
        """Whether a process is left in the group. ``unreaped``: how many of its members are
        known to have exited and not to be reaped yet (the job's leader, at its exit), which
        v1's task count still counts; only a count above them needs the list of members."""
        if self.version == 2:
            events = _keyed(self.file("", "cgroup.events"))
            if "populated" in events:
                return events["populated"] == 1
        elif self._count_file is not None:
            try:
                count = _int_text(self._count_file.text())
            except OSError:
                count = None
            if count is not None and count <= unreaped:
                return False
        return bool(self.pids())

    def signal_all(self, sig: int) -> int:
        """Send ``sig`` to every member (a graceful stop's kill signal); returns how many."""
        sent = 0
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                sent += 1
        return sent

    def kill(self) -> None:
        """SIGKILL every member, forks racing the kill included (the group empties soon after)."""
        if self.version == 2:
            try:
                _write(self.file("", "cgroup.kill"), "1")
                return
            except OSError as exc:  # a kernel before 5.14: freeze and kill, as on v1
                if exc.errno not in (errno.ENOENT, errno.EINVAL):
                    raise
        frozen = self.freeze(wait=0.5)
        try:
            for _ in range(100):  # a frozen group gains no member; without a freezer, repeat
                if self.signal_all(signal.SIGKILL) == 0:
                    break
                if frozen:
                    break
        finally:
            if frozen:
                self.thaw()

    # ------------------------------------------------------------------ freezer
    def can_freeze(self) -> bool:
        return self.version == 2 or "freezer" in self.h.controllers

    def freeze(self, wait: float = 2.0) -> bool:
        """Freeze the group; True once every member is frozen (within ``wait`` seconds)."""
        if not self.can_freeze():
            return False
        try:
            if self.version == 2:
                _write(self.file("", "cgroup.freeze"), "1")
            else:
                _write(self.file("freezer", "freezer.state"), "FROZEN")
        except OSError:
            return False
        deadline = time.monotonic() + wait
        while True:
            if self.frozen():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)

    def thaw(self) -> None:
        if not self.can_freeze():
            return
        with contextlib.suppress(OSError):
            if self.version == 2:
                _write(self.file("", "cgroup.freeze"), "0")
            else:
                _write(self.file("freezer", "freezer.state"), "THAWED")

    def frozen(self) -> bool:
        try:
            if self.version == 2:
                return _keyed(self.file("", "cgroup.events")).get("frozen") == 1
            return _read(self.file("freezer", "freezer.state")).strip() == "FROZEN"
        except OSError:
            return False

    # ------------------------------------------------------------------ limits
    def set_limits(self, *, memory_mib: int | None, policy: str, cpus: float | None, pids_max: int) -> None:
        """The job's memory limit (by ``policy``), cpu weight and pids limit, where the controllers are."""
        # Every value is set, limited or not: a group is reused for the next job (see reset). A
        # value the group already holds is not written again (each write is a cgroupfs round),
        # and limits the same as the last job's are not even looked at (a reused group's usual case).
        limits = (memory_mib, policy, cpus, pids_max)
        if self._limits == limits and self.created:
            return
        self._limits = None  # unknown until every write succeeded
        self._write_limits(memory_mib, policy, cpus, pids_max)
        self._limits = limits

    def _write_limits(self, memory_mib: int | None, policy: str, cpus: float | None, pids_max: int) -> None:
        _write = self._set
        c = self.h.controllers
        if "memory" in c:
            limit = str(memory_mib * 1024 * 1024) if memory_mib else None
            hard = limit if limit and policy == "hard" else None
            soft = limit if limit and policy == "soft" else None
            if self.version == 2:
                _write(self.file("", "memory.max"), hard or _UNLIMITED)
                if hard:
                    with contextlib.suppress(OSError):  # a limit of memory, not memory plus swap
                        _write(self.file("", "memory.swap.max"), "0")
                _write(self.file("", "memory.low"), soft or "0")  # reclaimed last up to its share
            else:
                _write(self.file("memory", "memory.limit_in_bytes"), hard or "-1")
                if hard:
                    with contextlib.suppress(OSError):
                        _write(self.file("memory", "memory.swappiness"), "0")
                _write(self.file("memory", "memory.soft_limit_in_bytes"), soft or "-1")
        weight = cpus if cpus and cpus > 0 else 1.0
        if self.version == 2 and "cpu" in c:
            _write(self.file("", "cpu.weight"), str(max(1, min(10000, round(100 * weight)))))
        elif self.version == 1 and "cpu" in c:
            _write(self.file("cpu", "cpu.shares"), str(max(2, round(1024 * weight))))
        if "pids" in c:
            _write(self.file("pids", "pids.max"), str(pids_max) if pids_max > 0 else _UNLIMITED)

    def _set(self, path: str, value: str) -> None:
        if self.written.get(path) != value:
            self.written.pop(path, None)  # unknown until the write succeeds
            _write(path, value)
            self.written[path] = value

    def reset(self) -> bool:
        """Make an empty group used before ready for the next job: its memory peak starts again
        and its cpu and OOM counters count from now (they cannot be reset, so usage() subtracts
        this baseline). False if the peak cannot be reset (the group is then not reused).

        Reusing groups matters: making a fresh group per job costs a start about 10 ms more than
        moving into an existing one (measured on the v1 hierarchies of the test machine)."""
        if self._peak_file is not None and not self._peak_file.reset():
            return False
        # The counters read when the group was found empty are final (nothing is left to run).
        raw, self.final_raw = self.final_raw, None
        if raw is None:
            self.baseline = CgroupUsage()
            raw = self.usage()
        self.baseline = raw
        return True

    def settings(self) -> dict[str, str]:
        """The limits as the kernel holds them (tests and diagnostics)."""
        out: dict[str, str] = {}
        files = (("memory.max", "memory.low", "cpu.weight", "pids.max") if self.version == 2 else
                 ("memory/memory.limit_in_bytes", "memory/memory.soft_limit_in_bytes", "cpu/cpu.shares",
                  "pids/pids.max"))
        for f in files:
            controller, _, name = f.rpartition("/")
            with contextlib.suppress(OSError):
                out[name] = _read(self.file(controller, name)).strip()
        return out

    # ------------------------------------------------------------------ counters
    def usage(self) -> CgroupUsage:
        return self._less_baseline(self._raw_usage())

    def _raw_usage(self, empty: bool = False) -> CgroupUsage:
        """The group's counters; ``empty``: the group has no process left, so its resident memory
        is none and memory.stat (the largest file, read and parsed at every job's exit) is not read."""
        u = CgroupUsage()
        c = self.h.controllers
        if self.version == 2:
            assert self._cpu_file is not None
            cpu = _keyed(self._cpu_file)
            u.user_cpu = cpu.get("user_usec", 0) / 1e6
            u.sys_cpu = cpu.get("system_usec", 0) / 1e6
            if "memory" in c:
                u.memory_bytes = 0 if empty else _keyed(self.file("", "memory.stat")).get("anon", 0)
                u.memory_peak_bytes = self._peak_bytes() or _int_file(self.file("", "memory.current")) or 0
                assert self._oom_file is not None
                u.oom_kills = _keyed(self._oom_file).get("oom_kill", 0)
        else:
            if self._cpu_file is not None:
                cpu = _keyed(self._cpu_file)
                u.user_cpu = cpu.get("user", 0) / USER_HZ
                u.sys_cpu = cpu.get("system", 0) / USER_HZ
            if "memory" in c:
                if not empty:
                    stat = _keyed(self.file("memory", "memory.stat"))
                    u.memory_bytes = stat.get("total_rss", stat.get("rss", 0))
                u.memory_peak_bytes = self._peak_bytes() or 0
                assert self._oom_file is not None
                u.oom_kills = _keyed(self._oom_file).get("oom_kill", 0) + self._oom_events()
        return u

    def _peak_bytes(self) -> int | None:
        return self._peak_file.read() if self._peak_file is not None else None

    def final_usage(self) -> CgroupUsage:
        """``usage`` of a group found empty: its counters are final, and `reset` takes them as
        the next job's baseline instead of reading them again."""
        raw = self.final_raw = self._raw_usage(empty=True)
        return self._less_baseline(raw)

    def _less_baseline(self, u: CgroupUsage) -> CgroupUsage:
        """``u`` less the counters of the group's earlier jobs (a new record: ``u`` is kept as it is)."""
        b = self.baseline
        return CgroupUsage(memory_peak_bytes=u.memory_peak_bytes, memory_bytes=u.memory_bytes,
                           user_cpu=max(0.0, u.user_cpu - b.user_cpu), sys_cpu=max(0.0, u.sys_cpu - b.sys_cpu),
                           oom_kills=max(0, u.oom_kills - b.oom_kills), processes=u.processes)


class Hierarchy:
    """The cgroups the startd can use: a version, its roots, the controllers a job group gets, and
    the startd's parent group ``base`` (relative to the root(s))."""

    def __init__(self, version: int, roots: dict[str, str], controllers: set[str], base: str):
        self.version = version
        self.roots = roots  # v2: {"": root}; v1: {controller: mount}
        self.controllers = controllers
        self.base = base.strip("/")
        self.tracker = "" if version == 2 else "freezer"
        self._homes: dict[int, dict[str, str]] = {}  # thread id -> its own groups' tasks files (v1)

    def dir_of(self, rel: str, controller: str = "") -> str:
        root = self.roots[""] if self.version == 2 else self.roots[controller or self.tracker]
        return os.path.join(root, rel)

    def dirs_of(self, rel: str) -> list[str]:
        if self.version == 2:
            return [os.path.join(self.roots[""], rel)]
        return [os.path.join(self.roots[c], rel) for c in sorted(self.controllers)]

    def thread_home(self) -> dict[str, str]:
        """v1: controller -> the ``tasks`` file of the calling thread's own group (read once per
        thread: a thread that forks jobs returns there after each fork)."""
        tid = threading.get_native_id()
        home = self._homes.get(tid)
        if home is None:
            where: dict[str, str] = {}
            for line in _read(f"/proc/self/task/{tid}/cgroup").splitlines():
                _, controllers, path = line.split(":", 2)
                for c in controllers.split(","):
                    where[c] = path.lstrip("/")
            home = self._homes[tid] = {c: os.path.join(self.roots[c], where.get(c, ""), "tasks")
                                       for c in self.controllers}
        return home

    def describe(self) -> str:
        return f"cgroup v{self.version} ({', '.join(sorted(self.controllers)) or 'no controllers'}) under {self.base}"

    def attributes(self) -> dict[str, object]:
        return {"HasCgroup": True, "CgroupVersion": self.version,
                "CgroupControllers": ",".join(sorted(self.controllers))}

    # ------------------------------------------------------------------ groups
    def job(self, name: str) -> JobCgroup:
        return JobCgroup(self, f"{self.base}/{safe_name(name)}")

    def leftovers(self) -> list[JobCgroup]:
        """Job groups under ``base`` (a predecessor's jobs, after a crash)."""
        names: set[str] = set()
        for d in self.dirs_of(self.base):
            with contextlib.suppress(OSError):
                names.update(e.name for e in os.scandir(d) if e.is_dir())
        groups = [JobCgroup(self, f"{self.base}/{n}") for n in sorted(names)]
        for g in groups:
            g.nested = True  # (a container job's may hold its container's groups)
        return groups

    def clean_leftovers(self, timeout: float = 10.0) -> int:
        """Kill what is in a predecessor's job groups and remove them; returns how many processes
        were found in them."""
        found = 0
        groups = self.leftovers()
        for g in groups:
            members = g.pids()
            found += len(members)
            if members:
                log.warning("cgroup %s of a previous startd still holds %d process(es): killing them", g.rel, len(members))
                g.kill()
        deadline = time.monotonic() + timeout
        for g in groups:
            while not g.remove() and time.monotonic() < deadline:
                if g.pids():
                    g.kill()
                time.sleep(0.01)
        return found

    def remove_base(self) -> None:
        """Remove the startd's parent group and its empty parents (a stopping startd; tests)."""
        parts = self.base.split("/")
        for n in range(len(parts), 0, -1):
            rel = "/".join(parts[:n])
            # (and where a container tool made it in the hierarchies the startd does not use)
            for d in [*self.dirs_of(rel), *(os.path.join(root, rel) for root in self.other_roots())]:
                with contextlib.suppress(OSError):
                    os.rmdir(d)

    def other_roots(self) -> list[str]:
        """The mounted cgroup hierarchies other than this one's (a container tool makes its
        groups' paths in all of them, and leaves the empty directories)."""
        mine = set(self.roots.values())
        return [root for root in _cgroup_mounts() if root not in mine]

    def setup(self) -> None:
        """Make the parent group, enabling the v2 controllers on the way down to it."""
        if self.version == 1:
            for c in self.controllers:
                os.makedirs(os.path.join(self.roots[c], self.base), exist_ok=True)
            return
        root = self.roots[""]
        path = root
        want = " ".join(f"+{c}" for c in sorted(self.controllers))
        for part in [""] + self.base.split("/"):
            if part:
                path = os.path.join(path, part)
                os.makedirs(path, exist_ok=True)
            if want:
                _write(os.path.join(path, "cgroup.subtree_control"), want)


def _v2_root() -> str | None:
    for root in (CGROUP_ROOT, os.path.join(CGROUP_ROOT, "unified")):
        if os.path.exists(os.path.join(root, "cgroup.controllers")):
            return root
    return None


def _v1_mounts() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 4 and parts[2] == "cgroup":
                    opts = set(parts[3].split(","))
                    for c in V1_CONTROLLERS:
                        if c in opts and c not in out:
                            out[c] = parts[1]
    except OSError:
        pass
    return out


def _v2(base: str) -> Hierarchy:
    root = _v2_root()
    if root is None:
        raise CgroupError("no cgroup v2 tree is mounted")
    available = set(_read(os.path.join(root, "cgroup.controllers")).split())
    return Hierarchy(2, {"": root}, {c for c in V2_WANTED if c in available}, base)


def _v1(base: str) -> Hierarchy:
    mounts = _v1_mounts()
    if "freezer" not in mounts:
        raise CgroupError("no cgroup v1 freezer hierarchy is mounted (it finds and stops a job's processes)")
    return Hierarchy(1, mounts, set(mounts), base)


def probe(base: str, version: str = "auto") -> Hierarchy:
    """The hierarchy the starter will use, set up and tried with a test group; CgroupError says
    why none works (the starter then scans /proc)."""
    if not base.strip("/"):
        raise CgroupError("BASE_CGROUP is empty: cgroups are turned off")
    version = str(version).strip().lower().removeprefix("v")
    if os.geteuid() != 0:
        raise CgroupError("the startd does not run as root")
    if version == "2":
        candidates = [_v2]
    elif version == "1":
        candidates = [_v1]
    elif version == "auto":
        candidates = []
        with contextlib.suppress(CgroupError, OSError):
            if "memory" in _v2(base).controllers:
                candidates.append(_v2)
        candidates += [_v1, _v2]
    else:
        raise CgroupError(f"CGROUP_VERSION must be auto, 1 or 2, not {version!r}")
    reasons = []
    for make in candidates:
        try:
            h = make(base)
            h.setup()
            trial = h.job(f"probe_{os.getpid()}")
            trial.create()
            trial.remove()
            return h
        except (CgroupError, OSError) as exc:
            reasons.append(str(exc))
    raise CgroupError("; ".join(dict.fromkeys(reasons)))


def purge(base: str) -> int:
    """Kill every process under ``base`` in every mounted hierarchy and remove its groups, deepest
    first (a pool's teardown after a startd was killed and not restarted); returns how many
    processes were killed."""
    base = base.strip("/")
    if not base:
        return 0
    roots = list(_v1_mounts().values())
    if (v2 := _v2_root()) is not None:
        roots.append(v2)
    killed = 0
    for root in roots:
        top = os.path.join(root, base)
        if not os.path.isdir(top):
            continue
        version = 2 if root == v2 else 1
        dirs = [d for d, _, _ in os.walk(top)]
        for d in sorted(dirs, key=len, reverse=True):
            group = JobCgroup(Hierarchy(version, {"": root, "freezer": root}, set(), base), os.path.relpath(d, root))
            killed += len(group.pids())
            _remove_when_empty(group, d)
    return killed


def _remove_when_empty(group: JobCgroup, path: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if group.pids():
            group.signal_all(signal.SIGKILL)
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def _cgroup_mounts() -> list[str]:
    """Every mounted cgroup hierarchy (v1, named ones included, and v2)."""
    try:
        with open("/proc/self/mounts") as fh:
            return [parts[1] for line in fh if len(parts := line.split()) >= 3 and parts[2] in ("cgroup", "cgroup2")]
    except OSError:
        return []


def _below(path: str) -> list[str]:
    """The groups below the group directory ``path``, deepest first."""
    found = [d for d, _, _ in os.walk(path)][1:]
    return sorted(found, key=len, reverse=True)


def move(pid: int, procs_files: tuple[str, ...]) -> None:
    """Move a process into a group: its pid into each ``cgroup.procs`` (as root: a v2 move needs
    write access to the common ancestor's ``cgroup.procs``)."""
    data = str(pid).encode()
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def group_of_pid(pid: int, controller: str = "freezer") -> str | None:
    """The group (relative path) of a process: its v1 ``controller`` line, else its v2 line."""
    try:
        text = _read(f"/proc/{pid}/cgroup")
    except OSError:
        return None
    v2 = None
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
        if controllers == "":
            v2 = path
    return v2
