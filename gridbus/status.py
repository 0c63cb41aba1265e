"""QMF status codes, shared by agents (which answer with them) and consoles (which read them)."""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    OK = 0
    UNKNOWN_OBJECT = 1
    UNKNOWN_METHOD = 2
    NOT_IMPLEMENTED = 3
    INVALID_PARAMETER = 4
    FEATURE_NOT_IMPLEMENTED = 5
    FORBIDDEN = 6
    EXCEPTION = 7
    USER = 0x10000  # application errors are USER + n, always with a sentence


# What a reply says when the handler gave no sentence of its own (QMF's canned texts).
CANNED_TEXT: dict[int, str] = {  # keyed by Status, looked up with a reply's plain int
    Status.OK: "OK",
    Status.UNKNOWN_OBJECT: "UnknownObject",
    Status.UNKNOWN_METHOD: "UnknownMethod",
    Status.NOT_IMPLEMENTED: "NotImplemented",
    Status.INVALID_PARAMETER: "InvalidParameter",
    Status.FEATURE_NOT_IMPLEMENTED: "FeatureNotImplemented",
    Status.FORBIDDEN: "Forbidden",
    Status.EXCEPTION: "Exception",
}


TEXT_MAX = 1000  # characters of a reply's sentence: enough for any sentence, never a whole argument


def cap_text(text: str, n: int = TEXT_MAX) -> str:
    """``text`` cut to ``n`` characters, saying how long it was (a sentence that quotes what a
    caller sent must not repeat 10 MB of it, in a reply or a log line)."""
    if not isinstance(text, str) or len(text) <= n:
        return text
    return f"{text[:n]}... [{len(text):,} characters in all]"


class MethodError(Exception):
    """Raised by a method handler to answer with a status and a sentence naming what was wrong."""

    def __init__(self, status: int, text: str, out: dict | None = None):
        text = cap_text(text)
        super().__init__(text)
        self.status = int(status)
        self.text = text
        self.out = out or {}


def invalid(text: str) -> MethodError:
    return MethodError(Status.INVALID_PARAMETER, text)


def forbidden(text: str) -> MethodError:
    return MethodError(Status.FORBIDDEN, text)


def unknown_object(text: str) -> MethodError:
    return MethodError(Status.UNKNOWN_OBJECT, text)


def app_error(n: int, text: str) -> MethodError:
    return MethodError(Status.USER + n, text)
