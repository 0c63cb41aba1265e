"""Who may call a method: the rule each method declares in ``schemas/`` (``access``), checked by
the framework before the handler runs.

Broker permissions are the first wall (a user publishes only as itself and reads only public ads
and its own events and replies); this is the second: the broker-validated ``user_id`` of a call
against the method's rule. A refusal is status 6 (Forbidden) with HTCondor's sentence since
8.3.6: who was refused, what they asked, and why (the rule).

Rules: ``anyone``; ``owner`` (the object's owner, as the agent tells through ``object_owner``; for
an object that acts on many owners' objects, such as the scheduler's Hold by constraint, the
handler checks each one and the framework asks only for an authenticated caller), a queue super
user or an administrator; ``superuser``; ``admin`` (the daemon account and ALLOW_ADMINISTRATOR);
``daemon`` (the pool's daemon accounts: the agent's own broker user and ALLOW_DAEMON).
"""

from __future__ import annotations

from typing import Protocol

from gridbus.schema import ACCESS, Method
from gridbus.status import MethodError, Status


class Authorizer(Protocol):
    def is_admin(self, user: str | None) -> bool: ...
    def is_daemon(self, user: str | None) -> bool: ...
    def is_super(self, user: str | None) -> bool: ...
    def object_owner(self, class_name: str, name: str) -> str | None: ...


def allowed(agent: Authorizer, method: Method, class_name: str, obj: str, user: str | None) -> bool:
    rule = method.rule
    if rule == "anyone":
        return True
    if not user:
        return False
    if rule == "daemon":
        return agent.is_daemon(user)
    if rule == "admin":
        return agent.is_admin(user)
    if rule == "superuser":
        return agent.is_super(user)
    if rule == "owner":
        owner = agent.object_owner(class_name, obj)
        return owner is None or owner == user or agent.is_super(user)
    return False


def denial(method: Method, obj: str, user: str | None) -> MethodError:
    who = f"user {user}" if user else "an anonymous caller"
    return MethodError(
        Status.FORBIDDEN, f"Permission denied: {who} may not call {method.name} on {obj}: {ACCESS[method.rule]}"
    )


def check(agent: Authorizer, method: Method, class_name: str, obj: str, user: str | None) -> None:
    """Raise the refusal when ``user`` may not call ``method`` on ``obj``."""
    if not allowed(agent, method, class_name, obj, user):
        raise denial(method, obj, user)
