"""Managed objects and method handlers, as an agent declares them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gridbus.status import forbidden


def method(class_name: str, name: str | None = None) -> Callable[[Callable], Callable]:
    """Mark an agent coroutine as the handler of ``class_name.name`` in the schema.

    The handler is called as ``await handler(call, **validated_args)``, bound to the agent or to the
    composed part that defines it (Agent.add_parts), and returns a dict of
    out arguments; an async generator handler streams its answer, one partial message per yield.
    """

    def mark(fn: Callable) -> Callable:
        fn._gridbus_method = (class_name.lower(), name or fn.__name__)  # type: ignore[attr-defined]  # the mark the dispatcher finds methods by
        return fn

    return mark


@dataclass
class Call:
    """One method call as a handler sees it."""

    user: str | None  # the broker-validated user_id, None if the request carried none
    object: str
    method: str
    args: dict[str, Any]
    correlation_id: str | None = None
    admin: bool = False  # the caller is a daemon account or a configured administrator

    def require_user(self) -> str:
        if not self.user:
            raise forbidden(
                f"{self.method} needs to know who calls: the request carried no user_id "
                "(set the AMQP user_id property to your broker user)"
            )
        return self.user


@dataclass
class ManagedObject:
    """An object an agent serves: a class from the schema, a name, and how to read its values."""

    class_name: str
    name: str
    properties: Callable[[], dict[str, Any]]
    statistics: Callable[[], dict[str, Any]] = field(default=lambda: {})

    def record(self, agent: str, methods: dict[str, list[str]]) -> dict[str, Any]:
        return {
            "class": self.class_name,
            "name": self.name,
            "agent": agent,
            "properties": self.properties(),
            "statistics": self.statistics(),
            "methods": methods,
        }
