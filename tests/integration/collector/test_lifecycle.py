"""An ad's life in the collector, on the real broker: appear, refresh, expire, invalidate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.agents.collector import Collector
from gridbus.console.collector import AdType
from gridbus.console.collector import Collector as CollectorClient
from tests.integration.collector.advertiser import Advertiser
from tests.integration.collector.conftest import stats, wait_for

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[3]


def held(client: CollectorClient, name: str, ad_type: AdType = AdType.Generic) -> bool:
    return bool(client.query(ad_type, f'Name == "{name}"', ["Name"]))


def test_an_agents_ad_appears_within_one_interval(collector, client, amqp_url):
    interval = 1.0
    with AgentThread(Advertiser("adv1", amqp_url, update_interval=interval)):
        started = time.monotonic()
        wait_for(lambda: held(client, "adv1"), 5, "the advertiser's ad")
        assert time.monotonic() - started < interval
        (ad,) = client.query(AdType.Generic, 'Name == "adv1"')
        assert ad["MyAddress"] == "advertiser@adv1" and ad["UpdateSequenceNumber"] >= 1
        assert ad["ClassAdLifetime"] == 3 * interval and ad["LastHeardFrom"] > 0


def _spawn(amqp_url: str, name: str, interval: float, lifetime: float) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tests.integration.collector.advertiser", amqp_url, name, str(interval), str(lifetime)]
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_killed_agents_ad_expires_at_its_lifetime(collector, client, amqp_url):
    lifetime, interval = 2.0, 0.5
    proc = _spawn(amqp_url, "doomed", interval, lifetime)
    try:
        wait_for(lambda: held(client, "doomed"), 20, "the subprocess's ad")
        time.sleep(interval)  # let it advertise again, so the kill comes between two updates
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        # Still held for most of its lifetime: nobody told the collector anything.
        time.sleep(lifetime - interval - 0.3)
        assert held(client, "doomed"), "the ad went away before its lifetime"
        wait_for(lambda: not held(client, "doomed"), 5, "expiry of the killed agent's ad", every=0.02)
        after = time.monotonic() - killed
        # Its last update came at most one interval before the kill.
        # (+1 s: the expiry tick and this poll's round trip, on a shared, loaded machine)
        assert lifetime - interval - 0.3 <= after <= lifetime + 1.0
        assert stats(client.session)["AdsExpired"] >= 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_gracefully_stopped_agents_ad_is_gone_at_once(collector, client, amqp_url):
    proc = _spawn(amqp_url, "polite", 0.5, 60.0)  # a lifetime far beyond the test
    try:
        wait_for(lambda: held(client, "polite"), 20, "the subprocess's ad")
        proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        assert proc.wait(10) == 0
        wait_for(lambda: not held(client, "polite"), 2, "the invalidation of a stopped agent's ad", every=0.02)
        assert time.monotonic() - stopped < 2
        assert stats(client.session)["AdsInvalidated"] >= 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_collector_started_last_holds_every_ad_within_one_interval(amqp_url):
    interval = 1.0
    names = [f"early{i}" for i in range(4)]
    agents = [AgentThread(Advertiser(n, amqp_url, update_interval=interval)).start() for n in names]
    try:
        time.sleep(0.3)  # the advertisers' first updates went to nobody
        with AgentThread(Collector("late", amqp_url, update_interval=5.0)):
            ready = time.monotonic()
            with CollectorClient(amqp_url, name="late", timeout=10) as client:
                wait_for(
                    lambda: {a["Name"] for a in client.query(AdType.Generic, "true", ["Name"])} >= set(names),
                    5, "every advertiser's ad in a collector started last",
                )
                assert time.monotonic() - ready < interval + 0.5  # + the polling query's round trip
    finally:
        for a in agents:
            a.stop()


def test_an_ad_that_goes_away_is_invalidated_at_the_next_update(collector, client, amqp_url):
    slots = [{"MyType": "Machine", "Name": f"slot1_{i}@h", "Cpus": 1} for i in range(3)]
    agent = Advertiser("startdlike", amqp_url, ads=slots, update_interval=30.0)
    with AgentThread(agent) as t:
        wait_for(lambda: len(client.query(AdType.Startd, "true", ["Name"])) == 3, 5, "three slot ads")
        # A dynamic slot goes away: the change is advertised at once, not after 30 s.
        t.loop.call_soon_threadsafe(lambda: (agent.extra_ads.pop(), agent.ads_changed()))
        wait_for(lambda: len(client.query(AdType.Startd, "true", ["Name"])) == 2, 3, "the vanished slot's invalidation")
        # A change of a slot is advertised at once too.
        t.loop.call_soon_threadsafe(lambda: (agent.extra_ads[0].update(Cpus=7), agent.ads_changed()))
        wait_for(lambda: client.query(AdType.Startd, 'Name == "slot1_0@h"', ["Cpus"])[0]["Cpus"] == 7, 3, "the changed slot")


def test_an_out_of_order_update_is_ignored(collector, client, session, publisher):
    base = {"MyType": "Machine", "Name": "slot1@ooo", "DaemonStartTime": 1000, "ClassAdLifetime": 60}
    publisher.ads([{**base, "UpdateSequenceNumber": 5, "State": "Claimed"}])
    publisher.ads([{**base, "UpdateSequenceNumber": 4, "State": "Unclaimed"}])
    wait_for(lambda: stats(session)["UpdatesOutOfOrder"] >= 1, 5, "the out-of-order update counted")
    (ad,) = client.query(AdType.Startd, 'Name == "slot1@ooo"')
    assert ad["State"] == "Claimed" and ad["UpdateSequenceNumber"] == 5
    # The daemon restarted: a new DaemonStartTime wins whatever its sequence number.
    publisher.ads([{**base, "DaemonStartTime": 2000, "UpdateSequenceNumber": 1, "State": "Owner"}])
    wait_for(lambda: client.query(AdType.Startd, 'Name == "slot1@ooo"')[0]["State"] == "Owner", 5, "the restarted daemon's ad")
