"""Broker accounts and permissions for a gridbus pool (`gridbus broker setup`).

DESIGN.md's security section, in RabbitMQ's terms. The daemon account may do anything in the
pool's vhost. A user account may:

- publish method calls on ``gridbus.rpc`` (write on that exchange), always as itself: RabbitMQ
  refuses a message whose ``user_id`` is not the connection's user, and no account gets the
  ``impersonator`` tag;
- read its answers (direct reply-to) and declare, bind and consume its own queues: server-named
  ones (``amq.gen-*``) and ones named ``gridbus.user.<user>.*``;
- bind those queues to ``gridbus.events`` for its own job events (``job.<event>.<user>``) and the
  daemon events, and to ``gridbus.ads`` for public ads only: a topic read permission refuses a
  binding key that could match ``private.*`` (the ads with claim ids), including ``#``;

and may not publish on ``gridbus.ads`` or ``gridbus.events`` (no write on them, and a topic write
permission matching no key), nor read any daemon's request queue (``gridbus.rpc.<address>``, where
Match and RequestClaim carry claim ids) or ``gridbus.dead``.

Everything here is idempotent: run it again and it changes nothing, except what you ask anew.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

from gridbus import bus, topology
from gridbus.mgmt import Management, ManagementError

DAEMON_TAGS = "monitoring"  # lets `gridbus pool status` list the pool's connections
USER_TAGS = "management"  # the management UI, showing the user's own connections and the vhost


@dataclass(frozen=True)
class Permissions:
    configure: str
    write: str
    read: str
    topics: dict[str, tuple[str, str]] = field(default_factory=dict)  # exchange -> (write, read)


def event_key_part(user: str) -> str:
    """How a user's name appears as the last word of an event routing key (bus.event_key)."""
    return bus.event_key("job", "x", user).split(".", 2)[2]


def daemon_permissions() -> Permissions:
    return Permissions(".*", ".*", ".*")


def user_permissions(user: str) -> Permissions:
    own = rf"amq\.gen-.*|gridbus\.user\.{re.escape(user)}\..*"
    ads_ex, rpc_ex, events_ex = (re.escape(x) for x in (bus.ADS, bus.RPC, bus.EVENTS))
    return Permissions(
        configure=rf"^({own})$",
        write=rf"^({rpc_ex}|{own})$",
        read=rf"^({events_ex}|{ads_ex}|{own})$",
        topics={
            # Nothing may be published by a user on the ad and event exchanges ("^$" matches no
            # real routing key). Reading (binding) ads: the first word must be a literal MyType,
            # not a wildcard and not "private", so no binding can reach a private ad.
            bus.ADS: ("^$", r"^(?!private\.)[^.*#]+(\..*)?$"),
            # Events: the user's own job events and every daemon event.
            bus.EVENTS: ("^$", rf"^(job\.[^.#]+\.{re.escape(event_key_part(user))}|daemon\..*)$"),
        },
    )


@dataclass
class SetupReport:
    lines: list[str] = field(default_factory=list)
    passwords: dict[str, str] = field(default_factory=dict)  # accounts created with a made-up password

    def say(self, text: str) -> None:
        self.lines.append(text)


def _existing_user(mgmt: Management, user: str) -> dict | None:
    try:
        return mgmt.request("GET", f"/users/{mgmt.q(user)}")
    except ManagementError as exc:
        if "404" in str(exc):
            return None
        raise


def _tags(raw: object) -> set[str]:
    # RabbitMQ 3.10 answers a list of tags; older ones a comma-separated string.
    if isinstance(raw, list):
        return {str(t) for t in raw if t}
    return set(filter(None, str(raw or "").replace(",", " ").split()))


def ensure_user(mgmt: Management, user: str, password: str | None, tags: str, report: SetupReport) -> None:
    """Create ``user`` (with ``password``, else a generated one) or keep it, with ``tags``."""
    if not user or any(c.isspace() for c in user) or ":" in user:
        raise ValueError(f"account name {user!r} must be non-empty, without spaces or ':'")
    existing = _existing_user(mgmt, user)
    if existing is None:
        if password is None:
            password = secrets.token_urlsafe(18)
            report.passwords[user] = password
        mgmt.put_user(user, password, tags)
        report.say(f"created account {user} (tags: {tags or 'none'})")
        return
    if password is not None:
        mgmt.put_user(user, password, tags)
        report.say(f"account {user} exists; password and tags set")
        return
    if _tags(existing.get("tags")) != set(tags.split()):
        # Keep the password as it is: PUT the stored hash back with the new tags.
        mgmt.request("PUT", f"/users/{mgmt.q(user)}", {
            "password_hash": existing.get("password_hash", ""),
            "hashing_algorithm": existing.get("hashing_algorithm", "rabbit_password_hashing_sha256"),
            "tags": tags,
        })
        report.say(f"account {user} exists; tags set to {tags or 'none'}")
    else:
        report.say(f"account {user} exists; unchanged")


def apply_permissions(mgmt: Management, vhost: str, user: str, perms: Permissions) -> None:
    mgmt.put_permissions(vhost, user, perms.configure, perms.write, perms.read)
    for exchange, (write, read) in perms.topics.items():
        mgmt.put_topic_permissions(vhost, user, exchange, write, read)


def declare_topology(mgmt: Management, vhost: str, *, quorum: bool = False) -> None:
    """The exchanges and dead-letter queue, exactly as every agent declares them (idempotent);
    ``quorum`` for a pool whose GRIDBUS_URL lists several brokers (the agents' choice too)."""
    for name, kind in bus.EXCHANGES:
        mgmt.request("PUT", f"/exchanges/{mgmt.q(vhost)}/{mgmt.q(name)}",
                     {"type": kind, "durable": True, "auto_delete": False, "internal": False, "arguments": {}})
    # A dead-letter queue already there is left as it is: the daemons adopt or migrate it at their
    # start (gridbus.agent.reconcile), and `gridbus broker check` says how it differs.
    try:
        mgmt.queue(vhost, bus.DEAD)
    except ManagementError as exc:
        if "404" not in str(exc):
            raise
        spec = topology.dead_queue_spec(quorum=quorum)
        mgmt.request("PUT", f"/queues/{mgmt.q(vhost)}/{mgmt.q(bus.DEAD)}",
                     {"durable": spec.durable, "auto_delete": False, "arguments": spec.arguments})
    mgmt.request("POST", f"/bindings/{mgmt.q(vhost)}/e/{mgmt.q(bus.DEAD)}/q/{mgmt.q(bus.DEAD)}", {"routing_key": ""})


def setup(
    mgmt: Management,
    vhost: str,
    daemon_user: str,
    daemon_password: str | None = None,
    users: dict[str, str | None] | None = None,
    *,
    quorum: bool = False,
) -> SetupReport:
    """Create the vhost, the daemon account, the user accounts, their permissions, the exchanges."""
    report = SetupReport()
    if not vhost:
        raise ValueError("the vhost name must not be empty")
    mgmt.put_vhost(vhost)
    report.say(f"vhost {vhost} ready")
    ensure_user(mgmt, daemon_user, daemon_password, DAEMON_TAGS, report)
    apply_permissions(mgmt, vhost, daemon_user, daemon_permissions())
    report.say(f"{daemon_user}: daemon account, full rights in {vhost}")
    for user, password in (users or {}).items():
        if user == daemon_user:
            raise ValueError(f"{user} is the daemon account; a person needs an account of their own")
        ensure_user(mgmt, user, password, USER_TAGS, report)
        apply_permissions(mgmt, vhost, user, user_permissions(user))
        report.say(f"{user}: user account (call methods, own job events, public ads; no ad publishing, no claim ids)")
    declare_topology(mgmt, vhost, quorum=quorum)
    report.say("exchanges " + ", ".join(name for name, _ in bus.EXCHANGES) + f" and queue {bus.DEAD} declared")
    return report
