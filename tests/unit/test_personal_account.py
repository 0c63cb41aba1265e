"""The personal pool's account: the console logs in as it only for the pool it was made for."""

from __future__ import annotations

import json
from pathlib import Path

from gridbus import personal

POOL = "amqp://guest:guest@127.0.0.1:5672/mine"


def test_the_console_uses_the_recorded_account_for_its_pool_only(tmp_path: Path):
    assert personal.console_url(POOL, tmp_path) == POOL  # no personal pool here
    mine = "amqp://alice:pw@127.0.0.1:5672/mine"
    (tmp_path / personal.RECORD).write_text(json.dumps({"pool": ["127.0.0.1", 5672, "mine", "guest"], "url": mine}))
    assert personal.console_url(POOL, tmp_path) == mine
    for other in ("amqp://guest:guest@127.0.0.1:5672/theirs", "amqp://bob:pw@127.0.0.1:5672/mine",
                  "amqp://guest:guest@broker.example.org:5672/mine"):
        assert personal.console_url(other, tmp_path) == other


def test_a_pool_url_that_is_already_the_unix_users_needs_no_account(tmp_path: Path):
    (tmp_path / personal.RECORD).write_text("{}")
    url = f"amqp://{personal.unix_user()}:pw@127.0.0.1:5672/mine"
    assert personal.ensure(url, tmp_path, say=lambda _: None) is None
    assert not (tmp_path / personal.RECORD).exists()


def test_no_management_api_is_said_and_leaves_the_pools_user(tmp_path: Path, monkeypatch):
    said: list[str] = []
    monkeypatch.setenv("GRIDBUS_MGMT_URL", "http://127.0.0.1:9")  # nothing answers there
    monkeypatch.setenv("HOME", str(tmp_path))
    assert personal.ensure("amqp://someone:pw@127.0.0.1:5672/x", tmp_path, say=said.append) is None
    assert "owned by the broker user 'someone'" in said[0]
    assert personal.console_url("amqp://someone:pw@127.0.0.1:5672/x", tmp_path).startswith("amqp://someone:")


def test_a_pool_of_its_own_directory_has_a_vhost_of_its_own_that_the_console_takes(tmp_path: Path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert personal.own_vhost(one) != personal.own_vhost(two)  # two directories never share one
    assert personal.own_vhost(one) == personal.own_vhost(tmp_path / "x" / ".." / "one")  # the same one again
    assert personal.own_vhost(one).startswith(f"personal-{personal.unix_user()}-")
    one.mkdir()
    own = f"amqp://guest:guest@127.0.0.1:5672/{personal.own_vhost(one)}"
    (one / personal.POOL_RECORD).write_text(json.dumps({"url": own, "vhost": personal.own_vhost(one)}))
    assert personal.own_pool_url(one) == own and personal.own_pool_url(two) is None
    assert personal.console_url(POOL, one) == own  # GRIDBUS_LOCAL_DIR=one reaches that pool
    other_broker = "amqp://guest:guest@broker.example.org:5672/mine"
    assert personal.console_url(other_broker, one) == other_broker  # a URL of another broker stays
