"""The schedd never loses an answered job: kill -9 of a real schedd process, then restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pika
import pytest

from gridbus import bus
from gridbus.console import CallTimeout, Session
from tests.integration.schedd.conftest import job_ad, wait_for


def start_schedd(amqp_url: str, spool: Path, logs: Path) -> subprocess.Popen:
    env = {**os.environ, "GRIDBUS_CONFIG": "/dev/null", "GRIDBUS_SCHEDD_INTERVAL": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "gridbus.agents.schedd", "--name", "k1", "--url", amqp_url,
         "--spool", str(spool), "--log-dir", str(logs)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def answers(session: Session) -> bool:
    try:
        return session.call("schedd@k1", "Query", {"Limit": 0}, timeout=1).status == 0
    except CallTimeout:
        return False


def declare_exchanges(amqp_url: str) -> None:
    """Declare gridbus's exchanges as every agent does, so a console may publish before one is up."""
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        ch = conn.channel()
        for name, kind in bus.EXCHANGES:
            ch.exchange_declare(name, kind, durable=True)
    finally:
        conn.close()


@pytest.fixture
def procs(amqp_url):
    declare_exchanges(amqp_url)
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def test_kill_9_after_submit_answered_loses_nothing(amqp_url, tmp_path, procs):
    spool, logs = tmp_path / "spool", tmp_path / "log"
    with Session(amqp_url, timeout=15) as s:
        procs.append(start_schedd(amqp_url, spool, logs))
        wait_for(lambda: answers(s), 30, "the schedd process to serve")
        answered = []
        for i in range(5):
            args = {"Ad": job_ad(Args=str(i)), "Count": 1 + i, "SubmissionId": f"sub-{i}"}
            r = s.call("schedd@k1", "Submit", args)
            assert r.status == 0, r.text
            answered.append((args, r.outArgs))
        s.call("schedd@k1", "Hold", {"Ids": [f"{answered[0][1]['ClusterId']}.0"]}).check()
        before = sorted((j["ClusterId"], j["ProcId"], j["GlobalJobId"], j["JobStatus"])
                        for j in s.call("schedd@k1", "Query", {}).Jobs)
        assert len(before) == 15

        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        procs.append(start_schedd(amqp_url, spool, logs))
        wait_for(lambda: answers(s), 30, "the restarted schedd to serve")

        after = sorted((j["ClusterId"], j["ProcId"], j["GlobalJobId"], j["JobStatus"])
                       for j in s.call("schedd@k1", "Query", {}).Jobs)
        assert after == before
        # A retried Submit (same SubmissionId) is answered with the same cluster and creates nothing.
        args, first = answered[3]
        retry = s.call("schedd@k1", "Submit", args)
        assert retry.status == 0 and retry.outArgs == first
        assert len(s.call("schedd@k1", "Query", {}).Jobs) == 15
        new = s.call("schedd@k1", "Submit", {"Ad": job_ad()})
        assert new.ClusterId > max(a[1]["ClusterId"] for a in answered)


def test_a_submit_sent_while_the_schedd_is_down_is_served_when_it_is_back(amqp_url, tmp_path, procs):
    spool, logs = tmp_path / "spool", tmp_path / "log"
    with Session(amqp_url, timeout=15) as s:
        procs.append(start_schedd(amqp_url, spool, logs))
        wait_for(lambda: answers(s), 30, "the schedd process to serve")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        # The request waits in the schedd's durable queue; the call's own timeout covers the restart.
        cid = s._publish("schedd@k1", "method_request",
                         {"object": "schedd@k1", "method": "Submit", "args": {"Ad": job_ad(), "SubmissionId": "down"}}, 60)
        s._pending.pop(cid, None)
        procs.append(start_schedd(amqp_url, spool, logs))
        wait_for(lambda: answers(s), 30, "the restarted schedd to serve")
        wait_for(lambda: len(s.call("schedd@k1", "Query", {}).Jobs) == 1, 10, "the queued Submit to be served")
