"""The personal pool's broker account, named after the Unix user who starts the pool.

In HTCondor a job's Owner is the user who submitted it, so scripts filter on
`Owner == getpass.getuser()`. In gridbus the Owner is the submitter's broker user, and a personal
pool's daemons log in with the pool's URL (often the broker's `guest`). So `gridbus pool up` makes,
through the management API with that URL's (administrator's) credentials, a user account named
after the Unix user who runs it, with a person's permissions in the pool's vhost (gridbus.accounts),
and records it in LOCAL_DIR. The console (the `gridbus` job commands and the Python API when given
no URL) then logs in as that account whenever its URL is the pool's: the jobs are owned by the
Unix user, and run as that user (or, in a pool started by root, as nobody).

The password is made once per Unix user and broker and kept in the user's own file
(`~/.config/gridbus/accounts/<host>_<port>_<user>`, mode 0600; in LOCAL_DIR when there is no home
to write to), so every personal pool of that user on that broker shares the account.

A pool of its own directory (`gridbus pool up --local-dir DIR`, `PersonalPool(local_dir=DIR)`) is
independent of every other pool on the machine, as HTCondor's personal pools are: it runs in a
vhost of its own, ``personal-<user>-<digest of DIR>`` (two directories never share one; the same
directory always gets the same one back), made through the management API with the URL's
credentials and recorded in ``DIR/personal-pool.json`` so the commands run with that LOCAL_DIR
find it. Stopping the pool removes the vhost.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import secrets
from collections.abc import Callable
from pathlib import Path

from gridbus.bus import BrokerURL

RECORD = "personal-account.json"
POOL_RECORD = "personal-pool.json"  # a pool of its own directory: its URL (in its own vhost)


def unix_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _record_path(local_dir: Path) -> Path:
    return Path(local_dir) / RECORD


def _password_file(broker: BrokerURL, user: str, local_dir: Path) -> Path:
    name = f"{broker.host}_{broker.port}_{user}"
    home = Path(os.path.expanduser("~"))
    base = home / ".config" / "gridbus" / "accounts"
    try:
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.access(base, os.W_OK):
            return base / name
    except OSError:
        pass
    return Path(local_dir) / f"account-{name}"


def _password(path: Path) -> str:
    """The account's password, made once (under a lock, so two pools starting at once agree)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / (path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        password = secrets.token_urlsafe(18)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        return password


def ensure(url: str, local_dir: Path, say: Callable[[str], None] = print) -> str | None:
    """Make (or keep) the personal account for the pool at ``url`` and record it; its name, or None
    when the URL already logs in as the Unix user or the broker cannot make accounts (then said)."""
    from gridbus import accounts
    from gridbus.mgmt import Management, ManagementError

    broker, me = BrokerURL(url), unix_user()
    Path(local_dir).mkdir(parents=True, exist_ok=True)
    record = _record_path(local_dir)
    if broker.user == me:
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        return None
    try:
        mgmt = Management.for_broker(broker)
        password = _password(_password_file(broker, me, local_dir))
        report = accounts.SetupReport()
        accounts.ensure_user(mgmt, me, password, accounts.USER_TAGS, report)
        accounts.apply_permissions(mgmt, broker.vhost, me, accounts.user_permissions(me))
    except (ManagementError, OSError, ValueError) as exc:
        say(f"gridbus: jobs will be owned by the broker user {broker.user!r}: no broker account "
            f"{me!r} could be made for you ({exc})")
        return None
    personal = broker.with_credentials(me, password)
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"pool": _key(broker), "url": personal.url}, f)
    return me


def _same_login(a: BrokerURL, b: BrokerURL) -> bool:
    return (a.host, a.port, a.user) == (b.host, b.port, b.user)


def _key(broker: BrokerURL) -> list:
    return [broker.host, broker.port, broker.vhost, broker.user]


def console_url(url: str, local_dir: Path | None = None) -> str:
    """The URL a console should log in with: the pool of LOCAL_DIR's own vhost when it has one on
    ``url``'s broker as ``url``'s user (``gridbus pool up --local-dir``), and as the personal
    account when that is recorded for the pool; else ``url`` itself."""
    try:
        if local_dir is None:
            from gridbus.config import Config

            local_dir = Config.load().path_of("LOCAL_DIR")
        own = own_pool_url(local_dir)
        if own is not None and _same_login(BrokerURL(own), BrokerURL(url)):
            url = own
        data = json.loads(_record_path(local_dir).read_text())
        broker = BrokerURL(url)
        if data.get("pool") == _key(broker):
            return str(data["url"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return url


# ---------------------------------------------------------------------- a pool of its own directory
def own_vhost(local_dir: Path) -> str:
    """The vhost of the pool whose LOCAL_DIR is ``local_dir``: the user's name and a digest of the
    directory's absolute path, so two directories (or two users) never share one."""
    where = str(Path(local_dir).expanduser().resolve())
    return f"personal-{unix_user()}-{hashlib.sha256(where.encode()).hexdigest()[:12]}"


def open_own_pool(url: str, local_dir: Path) -> str:
    """Make (or keep) the vhost of ``local_dir``'s pool, with the rights of ``url``'s user in it and
    the exchanges every agent declares, and record it; the URL of the pool's daemons (``url`` in
    that vhost). Needs the management API and an administrator's credentials in ``url``."""
    from gridbus import accounts
    from gridbus.mgmt import Management

    broker = BrokerURL(url)
    vhost = own_vhost(local_dir)
    mgmt = Management.for_broker(broker)
    mgmt.put_vhost(vhost)
    accounts.apply_permissions(mgmt, vhost, broker.user, accounts.daemon_permissions())
    accounts.declare_topology(mgmt, vhost, quorum=broker.is_cluster)
    pool = broker.with_vhost(vhost).url
    Path(local_dir).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(local_dir) / POOL_RECORD, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": pool, "vhost": vhost}, f)
    return pool


def own_pool_url(local_dir: Path) -> str | None:
    """The URL recorded by open_own_pool for ``local_dir``, or None when it has no pool of its own."""
    try:
        return str(json.loads((Path(local_dir) / POOL_RECORD).read_text())["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def close_own_pool(local_dir: Path) -> str | None:
    """Remove ``local_dir``'s vhost and its record (the pool is stopped); the vhost's name, or None
    when the directory had no pool of its own."""
    from gridbus.mgmt import Management, ManagementError

    url = own_pool_url(local_dir)
    if url is None:
        return None
    broker = BrokerURL(url)
    with contextlib.suppress(ManagementError):  # (already gone)
        Management.for_broker(broker).delete_vhost(broker.vhost)
    with contextlib.suppress(FileNotFoundError):
        (Path(local_dir) / POOL_RECORD).unlink()
    return broker.vhost
