"""Small sandboxes inline: a job's input that fits under MAX_INLINE_TRANSFER_KB rides inside the
activation that starts the job, its output inside the exit report; neither opens a transfer.

A sandbox travels as a list of ``[name, mode, data]`` (``data`` None for a directory), in order,
names relative and '/'-separated as in a stream (stream.py). The owner's shadow reads the inputs
of many jobs in one request and writes the outputs of many in one (shadow_child.py); the startd
writes an input into the scratch directory and reads an output from it with the same checks as
the stream: no name that leaves the directory, no symbolic link the job made, and a file that
changes while it is read is refused with HTCondor's sentence (put_file's "only sent ... bytes out
of ...") rather than sent torn.

Imports only the standard library and the transfer modules (the owner's shadow imports it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gridbus.transfer import spec, stream
from gridbus.transfer.stream import Entry, TransferError

File = list[Any]  # [name, mode, bytes | None]


def total_size(entries: Iterable[Entry]) -> int:
    """The bytes of ``entries``' files as they stand now (a file that cannot be stat'ed counts
    nothing: reading it fails with its own sentence)."""
    total = 0
    for e in entries:
        if e.path is not None:
            try:
                total += os.stat(e.path).st_size
            except OSError:
                pass
    return total


def read_entries(entries: Iterable[Entry], opener: Callable[[str], int] | None = None) -> tuple[list[File], int]:
    """Every entry read whole: (files, bytes). TransferError names a file that cannot be read
    or that changed (size or mtime) while it was read."""
    open_fd = opener or (lambda p: os.open(p, os.O_RDONLY | os.O_CLOEXEC))
    out: list[File] = []
    total = 0
    for e in entries:
        if e.path is None:
            out.append([e.name, e.mode & 0o7777, None])
            continue
        try:
            fd = open_fd(e.path)
            try:
                before = os.fstat(fd)
                data = _read_fd(fd, before.st_size + 1)  # one byte more: a file that grew shows
                stream.check_unchanged(fd, before, len(data), e.path)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TransferError(f"reading from file {e.path}: (errno {exc.errno}) {exc.strerror}",
                                path=e.path, errno=exc.errno or 0) from None
        out.append([e.name, e.mode & 0o7777, data])
        total += len(data)
    return out, total


def _read_fd(fd: int, most: int) -> bytes:
    parts = []
    while most > 0:
        chunk = os.read(fd, min(most, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        most -= len(chunk)
    return b"".join(parts)


def read_input(ad: Mapping[str, Any], limit: int) -> list[File] | None:
    """The job's input sandbox, read as the owner, if its files come to at most ``limit`` bytes;
    None when they do not (the input is streamed). TransferError as spec.input_entries raises."""
    return _read_small(spec.input_entries(ad), limit)


def read_output(scratch: str, ad: Mapping[str, Any], before: Mapping[str, tuple[int, int]],
                limit: int) -> list[File] | None:
    """The output sandbox (spec.output_entries, never through a symbolic link), if it comes to at
    most ``limit`` bytes; None when it does not (the output is streamed)."""
    return _read_small(spec.output_entries(scratch, ad, before), limit, spec.open_nofollow)


def _read_small(entries: list[Entry], limit: int, opener: Callable[[str], int] | None = None) -> list[File] | None:
    """``entries`` read whole if they come to at most ``limit`` bytes (by their sizes, and as read:
    a file may grow meanwhile); None when they do not."""
    if total_size(entries) > limit:
        return None
    files, total = read_entries(entries, opener)
    return files if total <= limit else None


def write_files(files: object, sink: stream.Sink) -> int:
    """Put ``files`` (as read_entries made them, from the other end: never trusted) into
    ``sink``; answers the bytes written. TransferError names what was refused or failed."""
    if not isinstance(files, list):
        raise TransferError("an inline sandbox must be a list of [name, mode, data]", link=True)
    total = 0
    for item in files:
        if not (isinstance(item, list | tuple) and len(item) == 3 and isinstance(item[0], str)
                and isinstance(item[1], int) and (item[2] is None or isinstance(item[2], bytes))):
            raise TransferError(f"an inline sandbox entry must be [name, mode, data], not {str(item)[:80]}", link=True)
        name, mode, data = item
        if not stream.safe_name(name):
            raise TransferError(f"refusing the file name {name!r}: it would leave the sandbox", path=name)
        if data is None:
            try:
                sink.directory(name, mode)
            except OSError as exc:
                raise TransferError(f"making directory {name}: (errno {exc.errno}) {exc.strerror}",
                                    path=name, errno=exc.errno or 0) from None
            continue
        fh = stream._open(sink, name, len(data), mode)
        try:
            stream._write(fh, data, name)
        except TransferError:
            sink.abort(name, fh)
            raise
        stream._commit(sink, name, fh)
        total += len(data)
    return total
