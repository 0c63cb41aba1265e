"""The parts of files cut transfers left (stream.Partials, DirectorySink with a key): kept for the
same job's next attempt only while they are of the same source file, for a bounded time and
number, and removed when dropped."""

from __future__ import annotations

import hashlib
import time

from gridbus.transfer import stream


def test_kept_parts_expire_and_are_bounded(tmp_path):
    partials = stream.Partials(keep_for=60, most=2)
    now = time.monotonic()
    paths = []
    for i in range(3):
        p = tmp_path / f"p{i}"
        p.write_bytes(b"x")
        paths.append(p)
        partials.put("k", f"n{i}", stream.Partial(str(p), (1, 1), 1, None, when=now - 10 + i))
    assert not paths[0].exists() and len(partials) == 2  # the oldest went
    partials.expire(now=now - 10 + 1 + 61)
    assert not paths[1].exists() and paths[2].exists() and partials.held("k") == [str(paths[2])]
    partials.clear()
    assert not paths[2].exists() and len(partials) == 0


def test_a_sink_resumes_only_its_key_s_part_of_the_same_source(tmp_path):
    partials = stream.Partials()

    def sink(key: str) -> stream.DirectorySink:
        return stream.DirectorySink(lambda n: str(tmp_path / n), key=key, partials=partials)

    first = sink("1.0/out")
    fh = first.open("f", 10, 0o644)
    fh.write(b"hello")
    digest = hashlib.sha256(b"hello")
    first.keep("f", fh, (10, 99), 5, digest)
    (part,) = list(tmp_path.iterdir())
    assert part.name.endswith(stream.PARTIAL_SUFFIX)
    assert sink("2.0/out").resume("f", (10, 99), 0o644) is None  # another job's: not offered
    resumed = sink("1.0/out")
    fh, offset, state = resumed.resume("f", (10, 99), 0o644)
    assert offset == 5 and state.hexdigest() == digest.hexdigest()
    fh.write(b"world")
    resumed.commit("f", fh)
    assert (tmp_path / "f").read_bytes() == b"helloworld" and len(partials) == 0

    again = sink("1.0/out")
    fh = again.open("g", 10, 0o644)
    fh.write(b"abc")
    again.keep("g", fh, (10, 99), 3, hashlib.sha256(b"abc"))
    assert sink("1.0/out").resume("g", (10, 100), 0o644) is None  # another mtime: removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_sink_without_a_key_keeps_nothing(tmp_path):
    partials = stream.Partials()
    plain = stream.DirectorySink(lambda n: str(tmp_path / n), partials=partials)
    fh = plain.open("f", 10, 0o644)
    fh.write(b"abc")
    plain.keep("f", fh, (10, 1), 3, hashlib.sha256(b"abc"))
    assert list(tmp_path.iterdir()) == [] and len(partials) == 0
    assert plain.resume("f", (10, 1), 0o644) is None
