"""Method calls on the wire, shared by the synchronous console and the asyncio agents.

A request is ``{"object": name, "method": m, "args": {...}}`` (or a getObjects query
``{"class": c, "filters": {...}}``); each answer is ``{"status", "text", "out", "partial"}``.
A big answer arrives as several partial messages: `Reply` folds them into one result, joining the
list out-arguments in order, so neither side ever builds one giant message.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gridbus import protocol, wire
from gridbus.errors import HTCondorException
from gridbus.status import CANNED_TEXT, Status

DEFAULT_TIMEOUT = 30.0


class CallTimeout(HTCondorException, TimeoutError):
    """No (complete) answer within the call's timeout; the message names the agent and the method."""

    def __init__(self, address: str, method: str, timeout: float):
        super().__init__(f"{address} did not answer {method} within {timeout:g} s")
        self.address = address
        self.method = method
        self.timeout = timeout


class CallFailed(HTCondorException, RuntimeError):
    """Raised by `MethodResult.check()` when a call answered with a non-zero status."""

    def __init__(self, result: MethodResult, what: str = ""):
        prefix = f"{what}: " if what else ""
        super().__init__(f"{prefix}{result.text} (status {result.status})")
        self.result = result


class MethodResult:
    """QMF's MethodResult: `.status`, `.text`, `.outArgs`, and each out argument as an attribute."""

    def __init__(self, status: int, text: str, out_args: dict[str, Any] | None = None):
        self.status = int(status)
        self.text = text
        self.outArgs: dict[str, Any] = out_args or {}

    def __getattr__(self, name: str) -> Any:
        out = self.__dict__.get("outArgs", {})
        if name in out:
            return out[name]
        raise AttributeError(f"the result has no out argument {name!r} (out arguments: {', '.join(out) or 'none'})")

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def check(self, what: str = "") -> MethodResult:
        if not self.ok:
            raise CallFailed(self, what)
        return self

    def __repr__(self) -> str:
        return f"{self.text} ({self.status}) - {self.outArgs!r}"


@dataclass
class Reply:
    """Accumulates the messages of one answer until the last one arrives."""

    status: int = 0
    text: str = "OK"
    out: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    def add(self, body: Any) -> None:
        if not isinstance(body, dict):
            self.status, self.text, self.done = Status.EXCEPTION, f"garbled reply: {body!r:.80}", True
            return
        for key, value in (body.get("out") or {}).items():
            if isinstance(value, list) and isinstance(self.out.get(key), list):
                self.out[key].extend(value)
            else:
                self.out[key] = value
        self.status = int(body.get("status", 0))
        self.text = body.get("text") or CANNED_TEXT.get(self.status, "")
        self.done = not body.get("partial", False)

    def result(self) -> MethodResult:
        return MethodResult(self.status, self.text, self.out)


def answer_of(body: bytes, content_type: str | None, headers: Mapping[str, Any] | None, sender: str = "") -> Any:
    """One answer message as `Reply.add` takes it: its decoded body, or an error with the sentence
    that says why it is not read (another major version of the protocol, an undecodable body)."""
    refused = protocol.answer_refusal(headers, sender)
    if refused is not None:
        return {"status": Status.EXCEPTION, "text": refused}
    try:
        return wire.decode(body, content_type)
    except wire.DecodeError as exc:
        return {"status": Status.EXCEPTION, "text": f"garbled reply: {exc}"}


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def method_body(obj: str, method: str, args: dict[str, Any] | None) -> dict[str, Any]:
    return {"object": obj, "method": method, "args": args or {}}


def query_body(class_name: str | None, filters: dict[str, Any] | None) -> dict[str, Any]:
    return {"class": class_name, "filters": filters or {}}
