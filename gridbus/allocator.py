"""glibc's malloc, tuned for processes that pass big messages through (the daemons, owners' shadows).

Every chunk of a file transfer, and every big ad or answer, passes through buffers of 128 KiB to a
few MiB: the socket's reads (256 KiB each), the AMQP frames (128 KiB), the joined body (1 MiB).
glibc serves a buffer that size from a fresh mmap of its own while it is over M_MMAP_THRESHOLD
(128 KiB at first; it rises only as such buffers are freed) and gives the heap's top back to the
kernel once M_TRIM_THRESHOLD of it lies free. Either way a stream's buffers are new pages each
time, faulted in and zeroed by the kernel: measured on the test machine, a 1 GiB chunk stream
cost each end 1.2-1.6 s of system time per GiB with the defaults, 6 s with the threshold held at
128 KiB, and 0.7-0.9 s with these (the peak RSS of either end the same, 40-43 MiB: the transfer's
window bounds what is in flight, and no more than TRIM of freed heap is kept).
"""

from __future__ import annotations

import ctypes
import functools

M_TRIM_THRESHOLD = -1  # mallopt's parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP = 4 << 20  # buffers up to this come from the heap, and are reused
TRIM = 32 << 20  # the free top of the heap kept for the next buffers


@functools.cache
def tune() -> bool:
    """Set the thresholds for this process, once (not for its children: exec starts afresh).
    False where the C library is not glibc (mallopt missing) or refuses; nothing changes then."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # (the process's own libc: no library search, no ldconfig)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM))
