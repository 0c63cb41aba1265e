"""The digests a transfer checks files by (gridbus/transfer/digests.py): what an opening message
offers, which one two ends agree on, and that each is the algorithm it is named after."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridbus.transfer import digests

ROOT = Path(__file__).resolve().parents[3]


def test_this_end_offers_xxh3_first_and_sha256_for_older_peers() -> None:
    assert digests.OFFER == "xxh3_128,sha256"
    assert digests.offered(digests.OFFER) == ("xxh3_128", "sha256")


@pytest.mark.parametrize("header", [None, "", 7, " , "])
def test_an_end_that_names_no_digest_knows_sha256(header: object) -> None:
    assert digests.offered(header) == ("sha256",)


@pytest.mark.parametrize(("theirs", "chosen"), [
    (("xxh3_128", "sha256"), "xxh3_128"),
    (("sha256", "xxh3_128"), "xxh3_128"),  # this end's preference decides
    (("sha256",), "sha256"),
    (("md5", "blake3"), "sha256"),  # nothing shared: what every gridbus end knows
    ((), "sha256"),
])
def test_the_sender_takes_its_first_digest_the_receiver_knows(theirs: tuple[str, ...], chosen: str) -> None:
    assert digests.choose(theirs) == chosen


def test_xxh3_128_is_xxh3_128() -> None:
    # XXH3's 128-bit digest of no bytes (seed 0), as xxHash's own tools print it.
    assert digests.of(b"", "xxh3_128") == "99aa06d3014798d86001c324468d497f"


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_a_digest_fed_in_parts_is_the_digest_of_the_whole(data: bytes, cut: int) -> None:
    for name in digests.KNOWN:
        digest = digests.new(name)
        digest.update(data[:cut])
        copy = digest.copy()  # (a kept part's state, answered without ending it)
        digest.update(data[cut:])
        assert digest.hexdigest() == digests.of(data, name)
        assert digests.name_of(copy) == name
    assert digests.of(data, "sha256") == hashlib.sha256(data).hexdigest()


def test_an_unknown_digest_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown digest 'md5'"):
        digests.new("md5")


def test_a_process_without_xxhash_offers_and_takes_sha256_alone() -> None:
    # An owner's shadow may run on the system's Python, which cannot load a C extension built for
    # the daemons' one: it still transfers, by sha256, the digest every end knows.
    code = """
import sys
sys.modules["xxhash"] = None  # (its import fails, as a missing or unloadable module's does)
from gridbus.transfer import digests, stream
assert digests.KNOWN == ("sha256",) and digests.OFFER == "sha256", digests.OFFER
assert stream.OPENING["hashes"] == "sha256"
assert digests.choose(("xxh3_128", "sha256")) == "sha256"
try:
    digests.new("xxh3_128")
except ValueError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=str(ROOT)).stdout
    assert "unknown digest 'xxh3_128' (known: sha256)" in out
