"""A personal pool with its web console, one for the package's tests (WEB in DAEMON_LIST, as `gridbus pool up` runs it), in a
vhost of its own, and two people's broker accounts, alice and bob (named apart per run: broker
users are the broker's, not the vhost's), whose jobs run as nobody."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gridbus import accounts
from gridbus.bus import BrokerURL
from gridbus.console.personal import PersonalPool
from gridbus.mgmt import Management
from tests.e2e.pool import BASE_ENV, wait_for

FAST = {name.removeprefix("GRIDBUS_"): value for name, value in BASE_ENV.items()}


@dataclass
class WebPool:
    pool: PersonalPool
    url: str  # the web console's, http://host:port
    users: dict[str, tuple[str, str]]  # "alice" -> (broker user, password)
    broker: BrokerURL

    def user_url(self, who: str) -> str:
        name, password = self.users[who]
        return self.broker.with_credentials(name, password).url


@pytest.fixture(scope="package")
def web_pool(mgmt: Management, broker_url: BrokerURL, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebPool]:
    vhost = f"gridbus-web-{uuid.uuid4().hex[:10]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    users = {who: (f"{who}-{uuid.uuid4().hex[:6]}", secrets.token_urlsafe(12)) for who in ("alice", "bob")}
    report = accounts.SetupReport()
    for name, password in users.values():
        accounts.ensure_user(mgmt, name, password, accounts.USER_TAGS, report)
        accounts.apply_permissions(mgmt, vhost, name, accounts.user_permissions(name))
    url = broker_url.with_vhost(vhost)
    local = Path(tmp_path_factory.mktemp("webpool"))
    config = {**FAST, "NUM_CPUS": 1, "WEB_ADDRESS": "127.0.0.1:0", "USER_MAP": ["*=nobody"],
              "STARTER_UNPRIVILEGED_USER": "nobody"}
    pool = PersonalPool(local_dir=local, url=url.url, config=config, use_config=False)
    try:
        pool.start()
        address_file = local / "log" / ".web_address"
        web = wait_for("the web daemon's address file", lambda: address_file.is_file() and address_file.read_text().strip(), 30)
        yield WebPool(pool, web, users, url)
    finally:
        pool.stop()
        for name, _ in users.values():
            mgmt.delete_user(name)
        mgmt.delete_vhost(vhost)
