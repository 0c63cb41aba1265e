"""GRIDBUS_URL naming several brokers (a cluster): both spellings, and the parts people read."""

from __future__ import annotations

from gridbus.bus import BrokerURL, split_brokers


def test_comma_separated_urls_are_tried_in_order() -> None:
    spec = "amqp://u:p@h1:5781/v,amqp://u:p@h2:5782/v"
    assert split_brokers(spec) == ["amqp://u:p@h1:5781/v", "amqp://u:p@h2:5782/v"]
    assert [a.port for a in BrokerURL(spec).alternatives] == [5781, 5782]


def test_one_url_with_several_hosts_shares_credentials_vhost_and_query() -> None:
    url = BrokerURL("amqps://alice:s%40c@h1:5671,h2,h3:5673/pool?heartbeat=5")
    assert [a.url for a in url.alternatives] == [
        "amqps://alice:s%40c@h1:5671/pool?heartbeat=5",
        "amqps://alice:s%40c@h2/pool?heartbeat=5",
        "amqps://alice:s%40c@h3:5673/pool?heartbeat=5",
    ]
    assert (url.user, url.password, url.host, url.port, url.vhost) == ("alice", "s@c", "h1", 5671, "pool")
    assert url.alternatives[1].port == 5671  # amqps' default


def test_vhost_credentials_and_redaction_apply_to_every_broker() -> None:
    url = BrokerURL("amqp://u:secret@h1:1/a,amqp://u:secret@h2:2/a")
    assert url.with_vhost("b").url == "amqp://u:secret@h1:1/b,amqp://u:secret@h2:2/b"
    assert url.with_credentials("w", "x").url == "amqp://w:x@h1:1/a,amqp://w:x@h2:2/a"
    assert "secret" not in url.redacted() and url.redacted().count("amqp://") == 2


def test_a_single_url_is_unchanged() -> None:
    url = BrokerURL("amqp://guest:guest@127.0.0.1:5672/")
    assert url.alternatives == (url,)
    assert url.with_vhost("x").url == "amqp://guest:guest@127.0.0.1:5672/x"


def test_the_management_url_follows_the_broker_port(monkeypatch) -> None:
    from gridbus.mgmt import mgmt_url_for

    monkeypatch.delenv("GRIDBUS_MGMT_URL", raising=False)
    assert mgmt_url_for(BrokerURL("amqp://g:g@127.0.0.1:5672/")) == "http://127.0.0.1:15672"
    assert mgmt_url_for(BrokerURL("amqp://g:g@127.0.0.1:5781/,amqp://g:g@127.0.0.1:5782/")) == "http://127.0.0.1:15781"
    assert mgmt_url_for(BrokerURL("amqps://g:g@broker/")) == "https://broker:15671"
    monkeypatch.setenv("GRIDBUS_MGMT_URL", "http://elsewhere:8080")
    assert mgmt_url_for(BrokerURL("amqp://g:g@127.0.0.1:5781/")) == "http://elsewhere:8080"


def test_pool_up_starts_a_local_rabbitmq_only_for_the_default_node(monkeypatch) -> None:
    import pytest

    from gridbus.console.cli import pool

    started: list[list[str]] = []
    monkeypatch.setattr(pool, "_answers", lambda host, port: False)
    monkeypatch.setattr(pool.shutil, "which", lambda name: "/usr/sbin/rabbitmq-server")
    monkeypatch.setattr(pool.subprocess, "run", lambda cmd, **kw: started.append(cmd))
    for url in ("amqp://g:g@127.0.0.1:5781/", "amqp://g:g@127.0.0.1:5672/,amqp://g:g@127.0.0.1:5782/",
                "amqp://g:g@broker.example:5672/"):
        with pytest.raises(RuntimeError, match="does not answer"):
            pool.ensure_broker(url, wait=0)
    assert started == []
    with pytest.raises(RuntimeError, match="was started but does not answer"):
        pool.ensure_broker("amqp://g:g@127.0.0.1:5672/", wait=0, say=lambda _: None)
    assert started == [["/usr/sbin/rabbitmq-server", "-detached"]]
