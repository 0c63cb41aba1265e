"""Big transferred files around the page cache (gridbus/transfer/directio.py): whole blocks are
written with O_DIRECT and the rest as usual, a file system without O_DIRECT gets ordinary writes,
and a file to send is read from the cache where it is there and around it where it is not."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from gridbus.transfer import directio, stream

CHUNK = 256 * 1024


def _fs_type(path: Path) -> str:
    """The file system type of ``path``'s mount (the longest mount point that holds it)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        point = fields[1]
        if (str(path) + "/").startswith(point.rstrip("/") + "/") and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def _cached(path: Path, size: int) -> bool:
    """Whether the first ``size`` bytes of ``path`` are all in the page cache (RWF_NOWAIT reads
    only what is there)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.preadv(fd, [bytearray(size)], 0, os.RWF_NOWAIT) == size
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.fixture
def disk(tmp_path):
    if _fs_type(tmp_path) in ("tmpfs", "ramfs", "overlay", ""):
        pytest.skip(f"{tmp_path} is on {_fs_type(tmp_path) or 'an unknown file system'}: its cache is the file itself")
    return tmp_path


def test_whole_blocks_go_around_the_cache_and_a_short_tail_through_it(disk):
    path = disk / "f"
    data = os.urandom(2 * CHUNK + 17)
    fh = directio.open_direct(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, CHUNK)
    assert fh is not None
    with fh:
        assert fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_DIRECT
        fh.write(data[:CHUNK])
        fh.write(data[CHUNK:2 * CHUNK])
        assert fh.direct
        fh.write(data[2 * CHUNK:])  # not a whole block: O_DIRECT is off for the rest of the file
        assert not fh.direct and not fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_DIRECT
    assert not _cached(path, 2 * CHUNK)  # what went around the cache is not in it
    assert path.read_bytes() == data


def test_a_write_at_an_offset_that_is_not_a_whole_block_goes_through_the_cache(disk):
    path = disk / "f"
    path.write_bytes(b"x" * 100)  # a resumed part of 100 bytes
    fh = directio.open_direct(str(path), os.O_WRONLY, 0o600, CHUNK)
    assert fh is not None
    with fh:
        fh.seek(100)
        fh.write(b"y" * 4096)
        assert not fh.direct
    assert path.read_bytes() == b"x" * 100 + b"y" * 4096


def test_a_file_system_without_o_direct_gets_ordinary_writes(tmp_path, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, mode=0o777, **kw):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", no_direct)
    assert directio.open_direct(str(tmp_path / "g"), os.O_WRONLY | os.O_CREAT, 0o600, CHUNK) is None
    sink = stream.DirectorySink(lambda n: str(tmp_path / n), direct_min=1)
    fh = sink.open("f", 2 * CHUNK, 0o644)
    assert not isinstance(fh, directio.DirectFile)
    fh.write(b"z" * CHUNK)
    sink.commit("f", fh)
    assert (tmp_path / "f").read_bytes() == b"z" * CHUNK


def test_only_files_from_the_threshold_up_go_around_the_cache(tmp_path):
    sink = stream.DirectorySink(lambda n: str(tmp_path / n), direct_min=CHUNK)
    small, big = sink.open("small", CHUNK - 1, 0o644), sink.open("big", CHUNK, 0o644)
    assert not isinstance(small, directio.DirectFile)
    assert isinstance(big, directio.DirectFile) or _fs_type(tmp_path) in ("tmpfs", "ramfs", "overlay")
    sink.abort("small", small)
    sink.abort("big", big)
    off = stream.DirectorySink(lambda n: str(tmp_path / n), direct_min=0)
    fh = off.open("never", 1 << 30, 0o644)
    assert not isinstance(fh, directio.DirectFile)
    off.abort("never", fh)
    assert not directio.big(1 << 40, 0) and directio.big(CHUNK, CHUNK) and not directio.big(CHUNK - 1, CHUNK)


def test_a_file_is_read_from_the_cache_where_it_is_there_and_around_it_where_not(disk):
    path = disk / "f"
    data = os.urandom(3 * CHUNK + 5)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        cached = directio.Reader(fd, CHUNK, len(data))
        assert b"".join(cached.read(off, CHUNK) for off in range(0, len(data), CHUNK)) == data
        assert cached.direct_bytes == 0  # all of it was in the cache
        cached.close()

        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        around = directio.Reader(fd, CHUNK, len(data))
        assert b"".join(around.read(off, CHUNK) for off in range(0, len(data), CHUNK)) == data
        assert around.direct_bytes == len(data)  # none of it was: the last, short chunk too
        assert around.read(len(data), CHUNK) == b""
        around.close()
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT  # (turned on for each read only)
    finally:
        os.close(fd)
    assert not _cached(path, CHUNK)  # reading it did not fill the cache
