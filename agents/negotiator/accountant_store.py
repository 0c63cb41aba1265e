"""The accountant's persistence: one JSON file in the negotiator's SPOOL, written atomically.

A restarted negotiator reads it back and keeps the pool's history: priorities, factors, usage and
concurrency limits. The file is replaced by a rename, so a crash while writing leaves the
previous one whole.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from gridbus.agents.negotiator.accountant import Accountant, UserRecord

FORMAT_VERSION = 1
FILE_NAME = "accountant.json"


class AccountantStore:
    """Where an accountant is kept; ``path`` None keeps it in memory only."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None

    @classmethod
    def in_spool(cls, spool: str | Path | None) -> AccountantStore:
        return cls(Path(spool) / FILE_NAME if spool else None)

    def load(self, halflife: float = 86400.0, default_limit: int = 2**31 - 1) -> Accountant:
        """The accountant saved here, or a fresh one when there is no file yet."""
        acc = Accountant(halflife=halflife, default_limit=default_limit)
        if self.path is None:
            return acc
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return acc
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the accountant file {self.path}: {exc}") from exc
        fields = set(UserRecord.__dataclass_fields__)
        for name, rec in (raw.get("users") or {}).items():
            acc.users[name] = UserRecord(**{k: v for k, v in rec.items() if k in fields})
        acc.limits = {str(k).lower(): int(v) for k, v in (raw.get("limits") or {}).items()}
        acc.last_update = float(raw.get("last_update") or 0.0)
        return acc

    def save(self, acc: Accountant) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "version": FORMAT_VERSION,
            "last_update": acc.last_update,
            "users": {n: asdict(u) for n, u in acc.users.items()},
            "limits": acc.limits,
        }
        # Write-then-rename: a crash mid-write leaves the previous file whole.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".accountant-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(body, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
