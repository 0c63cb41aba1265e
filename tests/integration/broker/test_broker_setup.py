"""`gridbus broker setup` on the real broker: accounts, permissions, topology.

A user account cannot publish ads, bind to private ads, read a daemon's requests or spoof
another user; the daemon account runs an agent; running setup twice changes nothing.
"""

from __future__ import annotations

import uuid

import pika
import pika.exceptions
import pytest

from gridbus import accounts, bus
from gridbus.agent.threaded import AgentThread
from gridbus.bus import BrokerURL
from gridbus.console import Session
from gridbus.mgmt import Management
from tests.integration.framework.echoer import Echoer

pytestmark = pytest.mark.broker


@pytest.fixture
def accts(mgmt: Management, broker_url: BrokerURL, vhost: str):
    tag = uuid.uuid4().hex[:8]
    names = {"daemon": f"gbt-{tag}-daemon", "alice": f"gbt-{tag}-alice", "bob": f"gbt-{tag}.bob"}
    passwords = {"daemon": "d-secret", "alice": "a-secret", "bob": None}
    report = accounts.setup(
        mgmt, vhost, names["daemon"], passwords["daemon"],
        {names["alice"]: passwords["alice"], names["bob"]: passwords["bob"]},
    )
    passwords["bob"] = report.passwords[names["bob"]]  # made up by setup, told once
    urls = {k: broker_url.with_vhost(vhost).with_credentials(names[k], passwords[k]) for k in names}
    try:
        yield names, urls, report
    finally:
        for name in names.values():
            mgmt.delete_user(name)


def channel(url: BrokerURL) -> tuple[pika.BlockingConnection, pika.adapters.blocking_connection.BlockingChannel]:
    conn = pika.BlockingConnection(pika.URLParameters(url.url))
    ch = conn.channel()
    ch.confirm_delivery()  # a refused publish closes the channel and raises here, not later
    return conn, ch


def refused(action, code: int) -> str:
    """Run ``action``; it must fail with the channel closed by the broker with ``code``."""
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        action()
    assert info.value.reply_code == code, info.value
    return info.value.reply_text


def test_setup_is_idempotent_and_declares_the_topology(accts, mgmt: Management, vhost: str):
    names, urls, report = accts
    assert any("created account" in line for line in report.lines)
    again = accounts.setup(mgmt, vhost, names["daemon"], None, {names["alice"]: None, names["bob"]: None})
    assert again.passwords == {}
    assert all("created" not in line for line in again.lines), again.lines
    assert sum("unchanged" in line for line in again.lines) == 3
    # The old passwords still work after the second run.
    for key in ("daemon", "alice", "bob"):
        conn, _ = channel(urls[key])
        conn.close()
    exchanges = {e["name"]: e["type"] for e in mgmt.exchanges(vhost)}
    for name, kind in bus.EXCHANGES:
        assert exchanges[name] == kind
    perms = mgmt.request("GET", f"/permissions/{mgmt.q(vhost)}/{mgmt.q(names['alice'])}")
    assert perms["write"] == accounts.user_permissions(names["alice"]).write


def test_a_user_cannot_publish_ads_or_events(accts):
    names, urls, _ = accts
    conn, ch = channel(urls["alice"])
    try:
        text = refused(lambda: ch.basic_publish(bus.ADS, "machine.slot1@evil", b"{}",
                                                pika.BasicProperties(user_id=names["alice"])), 403)
        assert "gridbus.ads" in text
    finally:
        conn.close()
    conn, ch = channel(urls["alice"])
    try:
        refused(lambda: ch.basic_publish(bus.EVENTS, f"job.terminated.{names['alice']}", b"{}"), 403)
    finally:
        conn.close()


def test_a_user_cannot_spoof_another_user(accts):
    names, urls, _ = accts
    conn, ch = channel(urls["alice"])
    try:
        props = pika.BasicProperties(user_id=names["bob"], type=bus.T_METHOD_REQUEST)
        text = refused(lambda: ch.basic_publish(bus.RPC, "schedd@x", b"{}", props), 406)
        assert "user_id" in text
    finally:
        conn.close()
    conn, ch = channel(urls["alice"])
    try:  # as itself it may call
        ch.basic_publish(bus.RPC, "schedd@x", b"{}", pika.BasicProperties(user_id=names["alice"]))
    finally:
        conn.close()


def test_a_user_cannot_see_claim_ids_or_daemon_requests(accts):
    names, urls, _ = accts
    conn, ch = channel(urls["alice"])
    try:
        q = ch.queue_declare("", exclusive=True).method.queue
        assert q.startswith("amq.gen-")
        ch.queue_bind(q, bus.ADS, "machine.#")  # public ads: allowed
        for key in ("#", "private.machine.#", "*.machine.#", "#.slot1"):
            refused(lambda ch=ch, q=q, key=key: ch.queue_bind(q, bus.ADS, key), 403)
            ch = conn.channel()
            q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, bus.EVENTS, f"job.*.{names['alice']}")  # own job events
        ch.queue_bind(q, bus.EVENTS, "daemon.#")
        refused(lambda: ch.queue_bind(q, bus.EVENTS, "job.#"), 403)
        ch = conn.channel()
        refused(lambda: ch.queue_bind(q, bus.RPC, "schedd@x"), 403)  # no snooping on calls
        ch = conn.channel()
        refused(lambda: ch.queue_declare(bus.rpc_queue("schedd@x")), 403)
        ch = conn.channel()
        refused(lambda: ch.basic_get(bus.DEAD), 403)
    finally:
        conn.close()


def test_the_daemon_account_runs_an_agent_and_users_call_it_as_themselves(accts):
    names, urls, _ = accts
    with AgentThread(Echoer("e1", urls["daemon"].url, update_interval=1)), Session(urls["bob"].url, timeout=10) as s:
        # The dotted user name shows the event-key mapping works for the permissions too.
        result = s.call("echoer@e1", "WhoAmI", {})
        assert result.status == 0 and result.User == names["bob"]
        # A user's queue bound to public ads sees the daemon's ad.
        conn, ch = channel(urls["bob"])
        try:
            q = ch.queue_declare("", exclusive=True).method.queue
            ch.queue_bind(q, bus.ADS, "echoer.#")
            got = None
            for _method, _props, body in ch.consume(q, inactivity_timeout=5):
                got = body
                break
            assert got, "no Echoer ad reached the user's queue"
        finally:
            conn.close()


def test_the_broker_setup_command_is_idempotent(mgmt: Management, broker_url: BrokerURL, vhost: str, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    tag = uuid.uuid4().hex[:8]
    daemon, user = f"gbt-{tag}-d", f"gbt-{tag}-u"
    gridbus = str(Path(sys.executable).with_name("gridbus"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_")}
    cmd = [gridbus, "--pool", broker_url.with_vhost(vhost).url, "broker", "setup",
           "--daemon-user", daemon, "--daemon-password", "dpw", "--user", user]
    try:
        first = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stderr
        assert f"created account {user}" in first.stdout and f"password of the new account {user}:" in first.stdout
        assert f'GRIDBUS_URL = "amqp://{daemon}:dpw@' in first.stdout
        second = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert "created" not in second.stdout and "password of the new account" not in second.stdout
        assert f"account {user} exists; unchanged" in second.stdout
    finally:
        mgmt.delete_user(daemon)
        mgmt.delete_user(user)
