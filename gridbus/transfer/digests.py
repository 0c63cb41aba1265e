"""The digests a transfer checks each file by, and how two ends agree on one.

A file's digest is there to catch a file torn or mixed up on its way: a lost or doubled chunk, a
resumed part of some other file. It is not there against a forger (both ends are daemons of the
pool, on connections only daemons have), so it need not be a cryptographic hash, and the one the
two ends prefer is xxh3_128: it hashes a GiB in about 0.04 s of cpu, where sha256 takes 0.7 s, and a
job's input and output are hashed four times (each end, each way). sha256 stays for peers that
know nothing else (gridbus 0.1.0): each end names the digests it knows in its opening message
(``hashes``), the sender takes the first of its own it shares with the receiver and names it with
each file it sends (``hash``; absent: sha256). A process that cannot import xxhash (an owner's
shadow on a system Python the package was not built for) offers sha256 alone, and is sent it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Protocol

xxhash: Any
try:
    import xxhash
except ImportError:  # (a C extension, built for the daemons' Python: see the module's doc)
    xxhash = None

SHA256 = "sha256"
XXH3_128 = "xxh3_128"
KNOWN = (XXH3_128, SHA256) if xxhash is not None else (SHA256,)  # this end's, preferred first
OFFER = ",".join(KNOWN)  # how an opening message names them (``hashes``)


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def copy(self) -> Any: ...
    def hexdigest(self) -> str: ...


def new(name: str) -> Digest:
    """A fresh digest of the algorithm ``name`` (one of KNOWN; ValueError otherwise)."""
    if name == XXH3_128 and xxhash is not None:
        return xxhash.xxh3_128()
    if name == SHA256:
        return hashlib.sha256()
    raise ValueError(f"unknown digest {name!r} (known: {OFFER})")


def name_of(digest: Digest) -> str:
    """The algorithm of a digest made by ``new``."""
    return XXH3_128 if xxhash is not None and isinstance(digest, xxhash.xxh3_128) else SHA256


def offered(header: Any) -> tuple[str, ...]:
    """The digests an opening message's ``hashes`` names; an end that names none knows sha256."""
    if not isinstance(header, str) or not header:
        return (SHA256,)
    return tuple(part.strip() for part in header.split(",") if part.strip()) or (SHA256,)


def choose(theirs: Iterable[str]) -> str:
    """The first of this end's digests that the other end knows too (sha256 if none is)."""
    known = set(theirs)
    return next((name for name in KNOWN if name in known), SHA256)


def of(data: bytes, name: str) -> str:
    """The hex digest of ``data`` by the algorithm ``name``."""
    digest = new(name)
    digest.update(data)
    return digest.hexdigest()
