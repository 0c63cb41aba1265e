"""Big received files written around the page cache (O_DIRECT).

A file of a sandbox that is big (DIRECT_IO_MIN bytes or more) is read once by the job, or once by
its owner, if ever: written through the page cache it pushes out pages the host still uses (the
schedd's, other jobs'), and on a machine whose memory is handed back to a hypervisor while free
(virtio-balloon's free page reporting) every page of cache so filled costs its first touch again
(here about 3 s of system time per GiB, three times the disk's own write). So a receiver writes
such a file with O_DIRECT: straight from one page-aligned buffer of its own to the disk, no copy
left behind in the cache. A file system that refuses O_DIRECT (tmpfs on older kernels, some
network file systems) gets ordinary writes, as does whatever part of a file is not a whole number
of blocks at an aligned offset (its last bytes, or a resumed part): O_DIRECT is then turned off
for the rest of that file.

This module imports only the standard library (the owner's shadow imports it).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os

DIRECT_IO_MIN = 64 << 20  # bytes: the default of TRANSFER_DIRECT_IO_MIN_MB (a file this big or bigger goes around the cache)
BLOCK = 4096  # the alignment O_DIRECT asks of offsets, lengths and buffers (a page: enough for every disk)
_O_DIRECT = getattr(os, "O_DIRECT", 0)


def _aligned_buffer(size: int) -> mmap.mmap:
    """An anonymous mapping (so page-aligned) of ``size`` bytes rounded up to whole blocks."""
    return mmap.mmap(-1, max(BLOCK, _whole_blocks(size)))


def _whole_blocks(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def big(size: int, threshold: int = DIRECT_IO_MIN) -> bool:
    """Whether a file of ``size`` bytes is read and written around the page cache (a threshold of
    0: never)."""
    return threshold > 0 and size >= threshold


class DirectFile:
    """A file opened for writing with O_DIRECT, with the few methods a transfer's sink uses
    (write, seek, truncate, fileno, close): each write is copied into one page-aligned buffer and
    written from there while it and its offset are whole blocks; the first that is not turns
    O_DIRECT off and it, and every later write, go through the page cache as usual."""

    def __init__(self, fd: int, chunk: int):
        self._fd = fd
        self._buffer = _aligned_buffer(chunk)
        self._direct = True
        self.closed = False

    @property
    def direct(self) -> bool:
        return self._direct

    def fileno(self) -> int:
        return self._fd

    def write(self, data: bytes) -> int:
        size = len(data)
        if self._direct and size % BLOCK == 0 and size <= len(self._buffer) \
                and os.lseek(self._fd, 0, os.SEEK_CUR) % BLOCK == 0:
            view = memoryview(self._buffer)[:size]
            try:
                view[:] = data
                done = 0
                while done < size:  # (a direct write may be short: the rest from where it stopped)
                    done += os.write(self._fd, view[done:])
            finally:
                view.release()
            return size
        self._buffered()
        view = memoryview(data)
        done = 0
        while done < size:
            done += os.write(self._fd, view[done:])
        return size

    def _buffered(self) -> None:
        if self._direct:
            self._direct = False
            fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~_O_DIRECT)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self._fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def truncate(self, size: int | None = None) -> int:
        size = self.tell() if size is None else size
        os.ftruncate(self._fd, size)
        return size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._buffer.close()
            os.close(self._fd)

    def __enter__(self) -> DirectFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_direct(path: str, flags: int, mode: int, chunk: int) -> DirectFile | None:
    """``path`` opened with ``flags`` | O_DIRECT, as a DirectFile; None where the file system (or
    the platform) has no O_DIRECT: the caller opens it as usual. Other errors are raised."""
    if not _O_DIRECT:
        return None
    try:
        fd = os.open(path, flags | _O_DIRECT, mode)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return None
        raise
    return DirectFile(fd, chunk)


class _Residency:
    """Whether a range of a file is in the page cache: mincore(2) on a mapping of it that is never
    touched (so asking fills nothing, unlike a read). Through ctypes: Python has no mincore."""

    def __init__(self) -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self._mmap, self._mincore, self._munmap = libc.mmap, libc.mincore, libc.munmap
        except (OSError, AttributeError):
            self.works = False
            return
        self._mmap.restype = ctypes.c_void_p
        self._mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self._mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self._munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.works = True

    def cached(self, fd: int, offset: int, size: int) -> bool:
        """All of ``size`` bytes at ``offset`` (a multiple of the page size) are in the cache (True
        as well where it cannot be told: the file is then read as usual)."""
        if not self.works or size <= 0:
            return True
        addr = self._mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
        if addr in (None, ctypes.c_void_p(-1).value):
            return True
        try:
            pages = -(-size // mmap.PAGESIZE)
            vec = (ctypes.c_ubyte * pages)()
            if self._mincore(addr, size, vec) != 0:
                return True
            return all(b & 1 for b in vec)
        finally:
            self._munmap(addr, size)


_RESIDENCY = _Residency()


class Reader:
    """Reads a big file to be sent, chunk by chunk, from the page cache where it is there and
    straight from the disk (O_DIRECT) where it is not: a file the job wrote is read from the cache
    it is in, a file nobody has read since it was written around the cache (a job's input renamed
    as its output, say) does not fill the cache on its way out. Whether a chunk is cached is asked
    of mincore (a read would start the readahead that fills it); a chunk that is not is read with
    O_DIRECT turned on for that read only."""

    def __init__(self, fd: int, chunk: int, size: int):
        self._fd = fd
        self._size = size  # the file's, as it was opened (one that changes is refused by the sender)
        self._buffer = _aligned_buffer(chunk)
        self._around = bool(_O_DIRECT) and _RESIDENCY.works
        self.direct_bytes = 0  # bytes read around the cache (for the tests and the curious)

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer only at the end of the file)."""
        end = min(offset + size, self._size)  # (past its end nothing is cached)
        if not self._around or size > len(self._buffer) or offset % mmap.PAGESIZE or end <= offset \
                or _RESIDENCY.cached(self._fd, offset, end - offset):
            return os.pread(self._fd, size, offset)
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        try:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags | _O_DIRECT)
        except OSError:  # (no O_DIRECT on this file system: plain reads from now on)
            self._around = False
            return os.pread(self._fd, size, offset)
        try:
            view = memoryview(self._buffer)[:_whole_blocks(size)]
            try:
                got = os.preadv(self._fd, [view], offset)
                data = bytes(view[:min(got, size)])
            finally:
                view.release()
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self._around = False
            return os.pread(self._fd, size, offset)
        finally:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags)
        self.direct_bytes += len(data)
        return data

    def close(self) -> None:
        self._buffer.close()
