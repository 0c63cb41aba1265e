"""The accountant: user priorities, usage with a half-life, priority factors, concurrency limits.

Follows HTCondor's accountant. A submitter's real priority moves towards the number of slot weights
(cpus) it holds, with an exponential half-life (PRIORITY_HALFLIFE):

    beta = 0.5 ** (elapsed / halflife)
    RealPriority = max(MIN_PRIORITY, RealPriority * beta + (1 - beta) * ResourcesUsed)

Its effective priority is the real priority times its priority factor; a smaller effective
priority is a better one. Accumulated usage is slot-weight-seconds, never decayed. Everything is
persisted in one JSON file (accountant_store.py), so a restarted negotiator keeps the pool's history.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

# HTCondor's floor for a real priority: a user who used nothing for a long time gets 0.5.
MIN_PRIORITY = 0.5
DEFAULT_FACTOR = 1.0

_LIMIT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass
class UserRecord:
    """One submitter's accounting record (HTCondor's accountant ad, by the same names)."""

    Name: str
    Priority: float = MIN_PRIORITY  # the real priority
    PriorityFactor: float = DEFAULT_FACTOR
    ResourcesUsed: float = 0.0  # slot weight (cpus) held at the last update
    AccumulatedUsage: float = 0.0  # slot-weight-seconds, all time
    BeginUsageTime: float = 0.0
    LastUsageTime: float = 0.0
    LastUpdateTime: float = 0.0

    @property
    def effective(self) -> float:
        return self.Priority * self.PriorityFactor

    def ad(self) -> dict[str, Any]:
        out = asdict(self)
        out["EffectivePriority"] = self.effective
        return out


@dataclass
class Accountant:
    """Priorities and usage of every submitter, and the pool's concurrency limits."""

    halflife: float = 86400.0
    default_limit: int = 2**31 - 1  # CONCURRENCY_LIMIT_DEFAULT
    users: dict[str, UserRecord] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)  # lower-cased limit name -> maximum
    last_update: float = 0.0

    def __post_init__(self) -> None:
        if self.halflife <= 0:
            raise ValueError(f"PRIORITY_HALFLIFE must be positive, got {self.halflife}")

    # ------------------------------------------------------------------ priorities
    def user(self, name: str) -> UserRecord:
        rec = self.users.get(name)
        if rec is None:
            rec = self.users[name] = UserRecord(name)
        return rec

    def effective_priority(self, name: str) -> float:
        return self.user(name).effective

    def update_usage(self, in_use: dict[str, float], now: float | None = None) -> None:
        """Age every priority to ``now`` and charge each user the slot weight it holds.

        ``in_use`` maps a submitter name to the slot weight (cpus) its claims hold right now; the
        weight held since the previous update is taken to be the one held at that update.
        """
        now = time.time() if now is None else now
        elapsed = max(0.0, now - self.last_update) if self.last_update else 0.0
        beta = 0.5 ** (elapsed / self.halflife)
        for name in set(self.users) | set(in_use):
            rec = self.user(name)
            held_before = rec.ResourcesUsed
            used = float(in_use.get(name, 0.0))
            rec.AccumulatedUsage += held_before * elapsed
            rec.Priority = max(MIN_PRIORITY, rec.Priority * beta + (1.0 - beta) * used)
            if used > 0:
                if held_before == 0:
                    rec.BeginUsageTime = rec.BeginUsageTime or now
                rec.LastUsageTime = now
            rec.ResourcesUsed = used
            rec.LastUpdateTime = now
        self.last_update = now

    def set_priority(self, name: str, priority: float) -> None:
        if not priority >= MIN_PRIORITY:
            raise ValueError(f"a real priority must be at least {MIN_PRIORITY}, got {priority}")
        self.user(name).Priority = float(priority)

    def set_factor(self, name: str, factor: float) -> None:
        if not factor >= 1.0:
            raise ValueError(f"a priority factor must be at least 1, got {factor}")
        self.user(name).PriorityFactor = float(factor)

    def set_usage(self, name: str, usage: float) -> None:
        if not usage >= 0:
            raise ValueError(f"accumulated usage cannot be negative, got {usage}")
        self.user(name).AccumulatedUsage = float(usage)

    def priorities(self) -> list[dict[str, Any]]:
        """Every user's record, best effective priority first (like condor_userprio)."""
        return [u.ad() for u in sorted(self.users.values(), key=lambda u: (u.effective, u.Name))]

    # ------------------------------------------------------------------ concurrency limits
    def set_limit(self, name: str, maximum: int) -> None:
        if not _LIMIT_NAME.match(name):
            raise ValueError(f"{name!r} is not a concurrency limit name (letters, digits, '_' and '.')")
        if maximum < 0:
            raise ValueError(f"the maximum of limit {name!r} cannot be negative, got {maximum}")
        self.limits[name.lower()] = int(maximum)

    def limit_max(self, name: str) -> float:
        """Maximum of a limit: ``a.b`` falls back to ``a``'s limit, then the default."""
        key = name.lower()
        if key in self.limits:
            return self.limits[key]
        group = key.split(".", 1)[0]
        return self.limits.get(group, self.default_limit)


def parse_limits(value: Any) -> dict[str, float]:
    """A job's ConcurrencyLimits (``"a, b:2.5"``) as {lower-cased name: amount}."""
    if not isinstance(value, str) or not value.strip():
        return {}
    out: dict[str, float] = {}
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, amount = part.partition(":")
        try:
            out[name.strip().lower()] = float(amount) if amount else 1.0
        except ValueError:
            out[name.strip().lower()] = 1.0
    return out
