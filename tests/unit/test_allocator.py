"""gridbus.allocator: with malloc tuned, a process that passes big buffers through keeps reusing
the same memory instead of faulting in new pages for every buffer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A stream's buffers, as a transfer's receiving end has them: a 256 KiB socket read and a 1 MiB
# body each chunk, the last 8 bodies held (the window). Prints the page faults over ``n`` chunks.
_STREAM = """
import os, resource, sys
sys.path.insert(0, {root!r})
if {tuned}:
    from gridbus import allocator
    assert allocator.tune()
held = []
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({n}):
    read = os.urandom(1 << 18)
    held.append(bytes(bytearray(1 << 20)))
    del held[:-8]
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(tuned: bool, n: int) -> int:
    code = _STREAM.format(root=str(ROOT), tuned=tuned, n=n)
    return int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_tuned_process_faults_in_its_buffers_once_not_per_chunk() -> None:
    # Tuned: the pages of the first chunks serve every later one (8x the chunks, no more faults
    # than a window's worth over). Untuned: every chunk's buffers are new pages (the comparison
    # shows the test can fail).
    assert _faults(True, 1024) < _faults(True, 128) + 512
    assert _faults(False, 1024) > 4 * _faults(True, 1024)
