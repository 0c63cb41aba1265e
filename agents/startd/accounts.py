"""Which account a job runs as: the run-as policy of the starter.

A job's Owner is the broker user that submitted it. USER_MAP (HTCondor's user map) turns it into a
Unix account on this node: `alice=asmith` maps one user, `*=nobody` everyone not listed, and a user
not mapped is the account of the same name (so `gridbus broker setup --user alice` is `alice`).

HTCondor's rule, made explicit with knobs: a startd running as root runs a job as its Owner's
account when that account exists here (STARTER_ALLOW_RUNAS_OWNER); otherwise as a fixed unprivileged account
(STARTER_UNPRIVILEGED_USER, e.g. ``nobody``) if one is configured; otherwise the job is refused
with a hold reason. A job runs as root only when its Owner maps to root (the Owner root, or USER_MAP
``alice=root`` / ``*=root``) and STARTER_ALLOW_ROOT_JOBS says so: an Owner with no account is never
promoted to root, whatever the knob says. A startd that
is not root cannot switch accounts, so jobs run as the startd's own user (a personal pool).
"""

from __future__ import annotations

import os
import pwd
import time
from dataclasses import dataclass

# HTCondor's HoldReasonCode FailedToAccessUserAccount.
HOLD_USER_ACCOUNT = 23


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    @property
    def switch(self) -> bool:
        """True when the job must run under another uid than the startd's."""
        return self.uid != os.geteuid()


class RunAsRefused(Exception):
    """The policy forbids running the job; ``reason`` is the hold reason the schedd records."""

    def __init__(self, reason: str, code: int = HOLD_USER_ACCOUNT):
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True)
class UserMap:
    """Broker user -> Unix account (USER_MAP); a user not listed keeps its name, or takes `*`'s."""

    entries: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, spec: str | list[str] | tuple[str, ...] | None) -> UserMap:
        items = spec.replace(",", " ").split() if isinstance(spec, str) else list(spec or ())
        entries: list[tuple[str, str]] = []
        for item in items:
            user, sep, account = str(item).partition("=")
            user, account = user.strip(), account.strip()
            if not sep or not user or not account or any(c.isspace() for c in user + account):
                raise ValueError(f"USER_MAP entry {item!r} is not 'broker_user=unix_account' (or '*=account')")
            entries.append((user, account))
        return cls(tuple(entries))

    def account_name(self, user: str | None) -> str | None:
        """The account ``user`` maps to; a job with no Owner takes ``*``'s account, if any."""
        fallback = None
        for who, account in self.entries:
            if user and who == user:
                return account
            if who == "*" and fallback is None:
                fallback = account
        return fallback or user


@dataclass(frozen=True)
class RunAsPolicy:
    allow_runas_owner: bool = True
    unprivileged_user: str = ""
    allow_root_jobs: bool = False
    _cache_seconds: float = 60.0
    user_map: UserMap = UserMap()

    def account_for(self, owner: str | None) -> Account:
        """The account ``owner``'s job (and its Fetch, user log and transfer) runs as.

        Root only ever for an Owner that maps to root, and only with STARTER_ALLOW_ROOT_JOBS: an
        Owner without an account here runs as STARTER_UNPRIVILEGED_USER (never root, whatever
        STARTER_ALLOW_ROOT_JOBS says) or is refused. A knob named for root's own jobs must never
        promote a stranger to root.
        """
        if os.geteuid() != 0:
            return _current()
        mapped = self.user_map.account_name(owner)
        if mapped and mapped != "root" and self.allow_runas_owner:
            found = _lookup(mapped, self._cache_seconds)
            if found is not None and found.uid != 0:
                return found
        if mapped == "root" and self.allow_root_jobs:
            return _lookup("root", self._cache_seconds) or _current()
        if self.unprivileged_user:
            found = _lookup(self.unprivileged_user, self._cache_seconds)
            if found is None:
                raise RunAsRefused(
                    f"STARTER_UNPRIVILEGED_USER {self.unprivileged_user!r} has no account on this machine"
                )
            if found.uid == 0:
                raise RunAsRefused(
                    f"STARTER_UNPRIVILEGED_USER {self.unprivileged_user!r} is root; a job whose Owner "
                    "has no account here never runs as root"
                )
            return found
        why = (
            "STARTER_ALLOW_RUNAS_OWNER is false"
            if not self.allow_runas_owner and mapped != "root"
            else f"Owner {owner!r} has no account on this machine"
            if owner and mapped == owner and owner != "root"
            else f"Owner {owner!r} maps (USER_MAP) to {mapped!r}, which has no account on this machine"
            if owner and mapped != "root"
            else f"the job's Owner {owner!r} maps to root and STARTER_ALLOW_ROOT_JOBS is false"
            if owner
            else "the job has no Owner"
        )
        raise RunAsRefused(
            f"this daemon runs as root and will not run this job as root: {why}, and no "
            "STARTER_UNPRIVILEGED_USER is configured (STARTER_ALLOW_ROOT_JOBS runs as root only "
            "the jobs of an Owner that maps to root)"
        )


_CACHE: dict[str, tuple[float, Account | None]] = {}


def _lookup(name: str, ttl: float) -> Account | None:
    """The account called ``name``, cached for ``ttl`` seconds (a job start must stay cheap)."""
    now = time.monotonic()
    hit = _CACHE.get(name)
    if hit is not None and now - hit[0] < ttl:
        return hit[1]
    try:
        pw = pwd.getpwnam(name)
        account: Account | None = Account(
            pw.pw_name, pw.pw_uid, pw.pw_gid, tuple(os.getgrouplist(pw.pw_name, pw.pw_gid)), pw.pw_dir
        )
    except KeyError:
        account = None
    _CACHE[name] = (now, account)
    return account


def _current() -> Account:
    uid = os.geteuid()
    try:
        pw = pwd.getpwuid(uid)
        name, home = pw.pw_name, pw.pw_dir
    except KeyError:
        name, home = str(uid), "/"
    return Account(name, uid, os.getegid(), tuple(os.getgroups()), home)


def may_access(path: str, account: Account, write: bool) -> bool:
    """Whether ``account`` may open ``path`` for reading or writing (create in its directory).

    The startd opens a job's In/Out/Err for it before the job's process changes uid, so it checks
    the job account's rights from the mode bits rather than opening files as root for anyone.
    """
    if not account.switch or account.uid == 0:
        return True
    try:
        st = os.stat(path)
        return _mode_allows(st, account, 2 if write else 4)
    except FileNotFoundError:
        if not write:
            return False
        parent = os.path.dirname(os.path.abspath(path)) or "/"
        try:
            return _mode_allows(os.stat(parent), account, 3)
        except OSError:
            return False
    except OSError:
        return False


def _mode_allows(st: os.stat_result, account: Account, bits: int) -> bool:
    if st.st_uid == account.uid:
        granted = (st.st_mode >> 6) & 7
    elif st.st_gid == account.gid or st.st_gid in account.groups:
        granted = (st.st_mode >> 3) & 7
    else:
        granted = st.st_mode & 7
    return granted & bits == bits
