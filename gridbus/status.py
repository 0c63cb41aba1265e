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
CANNED_TEXT = {
    Status.OK: "OK",
    Status.UNKNOWN_OBJECT: "UnknownObject",
    Status.UNKNOWN_METHOD: "UnknownMethod",
    Status.NOT_IMPLEMENTED: "NotImplemented",
    Status.INVALID_PARAMETER: "InvalidParameter",
    Status.FEATURE_NOT_IMPLEMENTED: "FeatureNotImplemented",
    Status.FORBIDDEN: "Forbidden",
    Status.EXCEPTION: "Exception",
}


class MethodError(Exception):
    """Raised by a method handler to answer with a status and a sentence naming what was wrong."""

    def __init__(self, status: int, text: str, out: dict | None = None):
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
