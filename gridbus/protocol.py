"""The version of gridbus's protocol, carried by every message, and which versions a daemon takes.

Every message a gridbus process publishes (ads, invalidations, events, method and query requests
and their answers) carries the AMQP header ``x-gridbus-protocol``: ``<major>.<minor>`` of the
sender. A minor version only adds (attributes, methods, optional arguments); a major version may
change what a message means. A message without the header comes from gridbus 0.1.0, protocol 0.1,
which had none.

A daemon takes messages of its own major version whose minor version is at least the previous one
(so execute nodes can be upgraded one at a time while jobs run: the schedd and the negotiator
work with startds one version older, and the old startds with them); a newer minor version is
taken too (it only adds). Any other message is refused with `refusal`'s sentence: a request is
answered with it and dead-lettered, an ad is dropped and the refusal logged.

A caller reads an answer from any version of its own major version (the agent took the request
and answered in its own terms; an older minor version's answer only lacks what was added since),
never one of another major version, whose answer may mean something else: `answer_refusal`'s
sentence is the call's error instead (`gridbus.rpc.answer_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HEADER = "x-gridbus-protocol"
VERSION = (0, 2)
WITHOUT_HEADER = (0, 1)  # gridbus 0.1.0 sent no version


def text(version: tuple[int, int] = VERSION) -> str:
    return f"{version[0]}.{version[1]}"


CURRENT = text()  # this process's version as the header carries it (made once: every publish sends it)
_CURRENT_BYTES = CURRENT.encode()


def headers(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The headers of a message this process publishes (``extra`` added)."""
    return {HEADER: CURRENT, **extra} if extra else {HEADER: CURRENT}


def of(message_headers: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """The sender's version from a message's headers; None if the header is not a version."""
    raw = (message_headers or {}).get(HEADER)
    if raw is None:
        return WITHOUT_HEADER
    if isinstance(raw, bytes):
        raw = raw.decode(errors="replace")
    major, dot, minor = str(raw).partition(".")
    if not dot or not major.isdigit() or not minor.isdigit():
        return None
    return int(major), int(minor)


def refusal(message_headers: Mapping[str, Any] | None, sender: str = "") -> str | None:
    """None if a message with these headers is taken, else the sentence that says why not."""
    raw = (message_headers or {}).get(HEADER)
    if raw == CURRENT or raw == _CURRENT_BYTES:  # nearly every message: nothing to parse
        return None
    version = of(message_headers)
    who = f" from {sender}" if sender else ""
    if version is None:
        return _not_a_version(f"message{who}", raw)
    if version[0] == VERSION[0] and version[1] >= VERSION[1] - 1:
        return None
    return (f"message{who} refused: gridbus protocol {text(version)}, but this daemon speaks {text()} and takes "
            f"{text((VERSION[0], max(VERSION[1] - 1, 0)))} and later of major version {VERSION[0]}: upgrade the sender")


def answer_refusal(message_headers: Mapping[str, Any] | None, sender: str = "") -> str | None:
    """None if an answer with these headers is read, else the sentence that says why not (the
    answer of another major version, or a header that is not a version)."""
    raw = (message_headers or {}).get(HEADER)
    if raw == CURRENT or raw == _CURRENT_BYTES:
        return None
    version = of(message_headers)
    who = f" from {sender}" if sender else ""
    if version is None:
        return _not_a_version(f"answer{who}", raw)
    if version[0] == VERSION[0]:
        return None
    older = "the agent" if version[0] < VERSION[0] else "this caller"
    return (f"answer{who} not read: gridbus protocol {text(version)}, another major version than this caller's "
            f"{text()} (its answer may mean something else): upgrade {older}")


def _not_a_version(what: str, raw: Any) -> str:
    return f"{what} refused: its {HEADER} header {raw!r} is not a version (major.minor)"
