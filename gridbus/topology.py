"""What gridbus wants of a durable (or long-lived) queue, and how a queue found on the broker compares.

RabbitMQ refuses to declare a queue again with arguments other than those it was first declared
with, so a pool whose queues were declared by another version, or with other knobs, could not
start. Each queue is therefore looked at before it is declared, and judged here (no broker I/O in
this module: the agents and `gridbus broker check` share it):

- **same**: the queue is as this version declares it.
- **adopt**: it differs only in arguments that act on messages as they arrive or are dropped
  (length limits, overflow, time to live, dead-lettering), or it is a quorum queue where a classic
  one is wanted (a quorum queue does all a classic queue does, replicated). It is used as it is.
- **migrate**: its type or durability must change, which RabbitMQ cannot do in place: a classic
  queue where a quorum queue is wanted (a cluster pool), a stream (whose messages are never
  removed by an ack and which basic.get cannot read), a transient queue where a durable one is
  wanted. The messages are moved to a new queue (see `gridbus.agent.reconcile`).
- a migration is refused while something consumes the queue (a daemon of another version still
  running on it, or a consumer gridbus does not own: an integrator's reader, a stream consumer):
  moving messages from under a consumer could deliver them twice, or take from a reader the queue
  it reads. The broker's own count (queue.declare-ok) misses a stream's consumers, so who consumes
  a queue is also asked of the management API (`Consumers`), which names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gridbus import bus

# The command that makes every gridbus queue of a vhost as this version declares it.
FIX_COMMAND = "gridbus broker check --fix"
# HTCondor's DAEMON_NO_RESTART: a daemon that exits with it is not restarted by its master.
DAEMON_NO_RESTART = 4
# The suffix of the queue that holds a queue's messages while it is declared again.
MIGRATING_SUFFIX = ".migrating"
# Every gridbus process names its broker connections so ("gridbus schedd@host", "gridbus console@host"):
# a consumer on a connection named otherwise is not gridbus's own.
OWN_CONNECTION_PREFIX = "gridbus "

@dataclass(frozen=True)
class QueueSpec:
    """A queue as this version declares it: its name, durability, arguments and bindings
    (exchange, routing key)."""

    name: str
    durable: bool
    arguments: dict[str, Any]
    bindings: tuple[tuple[str, str], ...] = ()

    @property
    def queue_type(self) -> str:
        return queue_type(self.arguments)


@dataclass(frozen=True)
class Found:
    """A queue as the broker has it."""

    durable: bool
    arguments: dict[str, Any]
    messages: int = 0
    consumers: int = 0

    @property
    def queue_type(self) -> str:
        return queue_type(self.arguments)


@dataclass(frozen=True)
class Consumers:
    """Who consumes a queue, as the management API sees it: how many by the queue's statistics, and
    (connection name, user) of each consumer it lists (a client's own connection name where it
    gave one)."""

    count: int = 0
    named: tuple[tuple[str, str], ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.count or self.named)

    def foreign(self) -> list[tuple[str, str]]:
        """The consumers on connections that are not gridbus's own."""
        return [c for c in self.named if not c[0].startswith(OWN_CONNECTION_PREFIX)]


@dataclass
class Verdict:
    action: str  # "declare" (absent), "same", "adopt", "migrate", "refuse"
    differences: list[str] = field(default_factory=list)
    sentence: str = ""


def queue_type(arguments: dict[str, Any]) -> str:
    """classic, quorum or stream (a queue declared without x-queue-type is classic)."""
    return str(arguments.get("x-queue-type") or "classic")


def describe(durable: bool, arguments: dict[str, Any]) -> str:
    """``durable classic {x-max-length=10000, ...}``: a queue's declaration, for a sentence."""
    args = ", ".join(f"{k}={arguments[k]}" for k in sorted(arguments) if k != "x-queue-type")
    return f"{'durable' if durable else 'transient'} {queue_type(arguments)} {{{args}}}"


def differences(spec: QueueSpec, found: Found) -> list[str]:
    """What differs, one phrase each: ``x-max-length: 10000 wanted, none found``."""
    out = []
    if spec.durable != found.durable:
        out.append(f"durable: {spec.durable} wanted, {found.durable} found")
    if spec.queue_type != found.queue_type:
        out.append(f"type: {spec.queue_type} wanted, {found.queue_type} found")
    for key in sorted((set(spec.arguments) | set(found.arguments)) - {"x-queue-type"}):
        want, have = spec.arguments.get(key), found.arguments.get(key)
        if want != have:
            out.append(f"{key}: {'none' if want is None else want} wanted, {'none' if have is None else have} found")
    return out


def judge(spec: QueueSpec, found: Found | None) -> Verdict:
    """What to do with ``found`` (None: no such queue) to serve as ``spec``."""
    if found is None:
        return Verdict("declare")
    diffs = differences(spec, found)
    if not diffs:
        return Verdict("same")
    if _must_move(spec, found):
        if found.consumers:
            return Verdict("refuse", diffs, refusal(spec, found))
        return Verdict("migrate", diffs)
    return Verdict("adopt", diffs)


def _must_move(spec: QueueSpec, found: Found) -> bool:
    if spec.durable and not found.durable:
        return True
    want, have = spec.queue_type, found.queue_type
    if want == have or (want == "classic" and have == "quorum"):
        return False
    return True  # a stream, or a classic queue where a replicated one is wanted


def refusal(spec: QueueSpec, found: Found, seen: Consumers | None = None) -> str:
    """The one sentence a daemon stops with when it may not migrate the queue because something
    consumes it (``seen``: who, where the management API says)."""
    was = (f"queue {spec.name} exists as {describe(found.durable, found.arguments)} but this version needs "
           f"{describe(spec.durable, spec.arguments)}")
    seen = seen or Consumers()
    foreign = seen.foreign()
    if foreign:
        return (f"{was}, and {len(foreign)} consumer(s) gridbus does not own read it ({_named(foreign)}): it is not "
                f"migrated, which would take its messages from under them; once they have stopped, run `{FIX_COMMAND}`")
    count = max(found.consumers, seen.count, len(seen.named))
    named = f" ({_named(seen.named)})" if seen.named else ""
    return f"{was}, and {count} consumer(s) still use it{named}: stop them and run `{FIX_COMMAND}`"


def unseen_readers(spec: QueueSpec, found: Found) -> str:
    """The sentence for a stream that must change when nobody can say who reads it: the broker
    does not count a stream's consumers, and the management API did not answer."""
    return (f"queue {spec.name} exists as {describe(found.durable, found.arguments)} but this version needs "
            f"{describe(spec.durable, spec.arguments)}, and who reads it is not known (the broker does not count a "
            f"stream's consumers, and its management API did not answer): it is not migrated, which could take its "
            f"messages from under a reader; once nothing reads it, run `{FIX_COMMAND}`")


def _named(consumers: tuple[tuple[str, str], ...] | list[tuple[str, str]], shown: int = 3) -> str:
    text = "; ".join(f"connection '{name}' of user {user}" for name, user in consumers[:shown])
    return text + (f"; and {len(consumers) - shown} more" if len(consumers) > shown else "")


def dead_queue_spec(*, quorum: bool) -> QueueSpec:
    """gridbus.dead as this version declares it (a quorum queue on a cluster)."""
    args: dict[str, Any] = dict(bus.DEAD_QUEUE_ARGS) | ({"x-queue-type": "quorum"} if quorum else {})
    return QueueSpec(bus.DEAD, True, args, ((bus.DEAD, ""),))


def request_queue_arguments(*, durable: bool, quorum: bool) -> dict[str, Any]:
    """Arguments of an agent's request queue: dead-lettering always; a transient agent's queue
    expires ten minutes after it is gone; a durable one (the schedd's) may be a quorum queue."""
    args: dict[str, Any] = {"x-dead-letter-exchange": bus.DEAD}
    if not durable:
        return args | {"x-expires": 600_000}
    # A classic queue is declared without the argument, as before it existed.
    return args | {"x-queue-type": "quorum"} if quorum else args


# ---------------------------------------------------------------------- the broker's refusals
# "inequivalent arg 'x-max-length' for queue 'q' in vhost 'v': received the value '10000' of type
# 'signedint' but current is none" -- what the broker says of a declaration it refuses.
_INEQUIVALENT = re.compile(r"inequivalent arg '(?P<arg>[^']+)' for queue .*?: received .*? but current is "
                           r"(?P<cur>none|the value '.*?' of type '[^']+'|'[^']*')")
_VALUE = re.compile(r"the value '(?P<value>.*)' of type '(?P<type>[^']+)'")
_INT_TYPES = {"signedint", "long", "short", "byte", "unsignedint", "unsignedshort", "unsignedbyte", "timestamp"}


def current_of_refusal(text: str, sent: dict[str, Any] | None = None) -> tuple[str, Any] | None:
    """(argument, the queue's current value, None for absent) from a PRECONDITION_FAILED text;
    ``sent``: the arguments declared, whose value's type is the current one's where the broker
    names no type (it does not when both are of one type)."""
    match = _INEQUIVALENT.search(text)
    if match is None:
        return None
    arg, cur = match["arg"], match["cur"].strip()
    if arg == "durable":
        return arg, cur.strip("'") == "true"
    if cur == "none":
        return arg, None
    value = _VALUE.search(cur)
    if value is None:
        plain = cur.strip("'")
        if isinstance((sent or {}).get(arg), bool):
            return arg, plain == "true"
        if isinstance((sent or {}).get(arg), int) and plain.lstrip("-").isdigit():
            return arg, int(plain)
        return arg, plain
    if value["type"] in _INT_TYPES:
        return arg, int(value["value"])
    if value["type"] == "bool":
        return arg, value["value"] == "true"
    return arg, value["value"]
