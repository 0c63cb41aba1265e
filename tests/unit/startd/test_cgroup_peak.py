"""cgroup v2's memory.peak as Linux 6.12 and later serve it, against the startd's reused groups:
a job in a group used before reports its own peak, not the group's.

The machine the tests run on has its memory controller on cgroup v1, so the kernel's file is
played by `PeakKernel`, which answers as the kernel's documentation says memory.peak does: the
peak since the group was made, except through a descriptor that a write has reset, which gives
the peak since that write."""

from __future__ import annotations

import errno
import os as real_os
import types
from pathlib import Path

import pytest

from gridbus.agents.startd import cgroups

MiB = 1 << 20


class PeakKernel:
    """memory.peak of one group (``resettable=False``: a kernel before 6.12, whose memory.peak
    cannot be written)."""

    def __init__(self, resettable: bool):
        self.resettable = resettable
        self.since_made = 0
        self.current = 0
        self.own: dict[int, int] = {}  # descriptor -> the peak since a write through it
        self.open_fds: set[int] = set()

    def use(self, nbytes: int) -> None:
        """The group's memory reaches ``nbytes``."""
        self.current = nbytes
        self.since_made = max(self.since_made, nbytes)
        for fd in self.own:
            self.own[fd] = max(self.own[fd], nbytes)

    def idle(self) -> None:
        self.current = 0

    def _text(self, fd: int) -> bytes:
        return f"{self.own.get(fd, self.since_made)}\n".encode()

    def os(self) -> types.SimpleNamespace:
        """The os module as cgroups.py sees it, memory.peak served by this kernel."""
        fake = types.SimpleNamespace(**{n: getattr(real_os, n) for n in dir(real_os) if not n.startswith("__")})

        def open_(path, flags, mode=0o777, **kw):
            if str(path).endswith("memory.peak"):
                if flags & (real_os.O_WRONLY | real_os.O_RDWR) and not self.resettable:
                    raise PermissionError(errno.EACCES, "Permission denied", str(path))
                fd = real_os.open(real_os.devnull, real_os.O_RDONLY)
                self.open_fds.add(fd)
                return fd
            return real_os.open(path, flags, mode, **kw)

        def read(fd, n):
            return self._text(fd) if fd in self.open_fds else real_os.read(fd, n)

        def pread(fd, n, offset):
            return self._text(fd) if fd in self.open_fds else real_os.pread(fd, n, offset)

        def write(fd, data):
            if fd in self.open_fds:
                self.own[fd] = self.current
                return len(data)
            return real_os.write(fd, data)

        def pwrite(fd, data, offset):
            return write(fd, data) if fd in self.open_fds else real_os.pwrite(fd, data, offset)

        def close(fd):
            self.open_fds.discard(fd)
            self.own.pop(fd, None)
            real_os.close(fd)

        fake.open, fake.read, fake.pread, fake.write, fake.pwrite, fake.close = open_, read, pread, write, pwrite, close
        return fake


def _v2_group(root: Path) -> cgroups.JobCgroup:
    h = cgroups.Hierarchy(2, {"": str(root)}, {"memory"}, "base")
    group = h.job("job_1")
    group.create()
    for name, text in (("cpu.stat", "user_usec 0\nsystem_usec 0\n"), ("memory.stat", "anon 0\n"),
                       ("memory.events", "oom_kill 0\n"), ("memory.current", "0\n")):
        (Path(group.dir()) / name).write_text(text)
    return group


@pytest.mark.parametrize("resettable", [True, False], ids=["linux-6.12", "older"])
def test_a_reused_v2_groups_next_job_reports_its_own_memory_peak(tmp_path, monkeypatch, resettable):
    kernel = PeakKernel(resettable)
    monkeypatch.setattr(cgroups, "os", kernel.os())
    group = _v2_group(tmp_path)
    kernel.use(500 * MiB)  # the first job
    kernel.idle()
    assert group.final_usage().memory_peak_bytes == 500 * MiB
    if not resettable:  # the peak cannot start again: the group is not reused
        assert group.reset() is False
        return
    assert group.reset() is True
    kernel.use(20 * MiB)  # the next job, in the same group
    assert group.usage().memory_peak_bytes == 20 * MiB  # as the monitor reads it while it runs
    kernel.idle()
    assert group.final_usage().memory_peak_bytes == 20 * MiB  # not the first job's 500 MiB
    group.remove()
    assert not kernel.open_fds  # the group's descriptor goes with it
