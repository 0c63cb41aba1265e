"""`curl $WEB_ADDRESS/metrics` on a personal pool: the jobs and slots figures follow the jobs as
they are submitted, run and complete (the web daemon makes them from the ads on the bus)."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gridbus.console.schedd import Schedd
from gridbus.submit import Submit
from tests.e2e.pool import wait_for
from tests.e2e.web.conftest import WebPool

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics: (name, sorted labels) -> value; with curl where it is installed."""
    if shutil.which("curl"):
        text = subprocess.run(["curl", "-sf", f"{url}/metrics"], capture_output=True, text=True, timeout=10,
                              check=True).stdout
    else:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
            text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


def scraped_when(url: str, what: str, test, timeout: float) -> dict:
    """The first scrape for which ``test(samples)`` holds, within ``timeout`` seconds."""
    def attempt() -> dict | None:
        samples = scrape(url)
        return samples if test(samples) else None

    return wait_for(what, attempt, timeout)


def test_metrics_follow_the_jobs(web_pool: WebPool):
    url = web_pool.url
    # The pool is shared with the other web tests, whose jobs may hold the slots a while yet.
    first = scraped_when(url, "an unclaimed slot and the daemons in /metrics",
                         lambda s: value(s, "gridbus_slots", state="Unclaimed") >= 1
                         and value(s, "gridbus_daemon_duty_cycle_ratio") > 0, 90)
    # Every daemon of the pool has its request counters and latency summary.
    daemons = {dict(ls)["daemon"] for (n, ls) in first if n == "gridbus_rpc_request_duration_seconds_count"}
    assert {d.split("@")[0] for d in daemons} >= {"collector", "negotiator", "schedd", "startd", "master", "web"}, daemons
    assert value(first, "gridbus_transfers_in_flight") == 0
    completed_before = value(first, "gridbus_schedd_jobs_completed_total")

    alice = web_pool.users["alice"][0]
    with Schedd(url=web_pool.user_url("alice")) as schedd:
        schedd.submit(Submit({"executable": "/bin/sleep", "arguments": "2", "should_transfer_files": "NO"}), count=3)
    # One cpu: one job runs while two wait, then the three complete one after another.
    # (the schedd's Submitter ad and the startd's slot ad each come when their daemon advertises)
    scraped_when(url, "a job running and others idle, a slot busy, in /metrics", lambda s:
                 value(s, "gridbus_jobs", state="running", owner=alice) >= 1
                 and value(s, "gridbus_jobs", state="idle", owner=alice) >= 1
                 and value(s, "gridbus_slots", state="Claimed", activity="Busy") >= 1, 30)
    done = scraped_when(url, "three jobs completed in /metrics", lambda s:
                        value(s, "gridbus_schedd_jobs_completed_total") >= completed_before + 3, 60)
    assert value(done, "gridbus_jobs", owner=alice) == 0
    assert value(done, "gridbus_negotiation_matches_total") >= 1
    assert value(done, "gridbus_negotiation_cycles_total") >= 1
