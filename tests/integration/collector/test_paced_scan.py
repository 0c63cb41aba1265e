"""A Query whose constraint is slow over many ads runs in slices: the collector answers other calls
meanwhile, and a scan past its budget ends with a sentence (gridbus/agent/pacing.py)."""

from __future__ import annotations

import threading

import pytest

from gridbus.agent import pacing
from gridbus.agent.threaded import AgentThread
from gridbus.console.collector import AdType
from gridbus.console.collector import Collector as CollectorClient
from gridbus.rpc import CallFailed
from tests.integration.collector.conftest import RawPublisher, wait_for

ADS = 10_000
# About a quarter of a millisecond per ad: a doubling chain of 120 attributes (linear, memoized).
CHAIN = "; ".join(["a0=Memory"] + [f"a{i}=a{i - 1}+a{i - 1}" for i in range(1, 120)])
SLOW = f"[{CHAIN}].a119 < 0"


@pytest.fixture
def loaded(collector: AgentThread, amqp_url: str) -> AgentThread:
    pub = RawPublisher(amqp_url)
    try:
        pub.ads([{"MyType": "Machine", "Name": f"slot{i}@h{i // 100}", "Memory": 1} for i in range(ADS)])
    finally:
        pub.close()
    with CollectorClient(amqp_url, name="c1", timeout=30) as c:
        wait_for(lambda: len(c.query(AdType.Startd, constraint="true", projection=["Name"])) == ADS, 30, "the ads stored")
    return collector


def test_other_calls_are_answered_while_a_slow_constraint_is_scanned(loaded: AgentThread, amqp_url: str) -> None:
    done = threading.Event()
    result: dict[str, object] = {}

    def slow_query() -> None:
        with CollectorClient(amqp_url, name="c1", timeout=60) as c:
            result["ads"] = c.query(AdType.Startd, constraint=SLOW, projection=["Name"])
        done.set()

    queries_before = loaded.agent.query_rate.total
    worker = threading.Thread(target=slow_query)
    worker.start()
    try:
        wait_for(lambda: loaded.agent.query_rate.total > queries_before, 30, "the slow Query begun")
        with CollectorClient(amqp_url, name="c1", timeout=30) as c:
            for i in (1, 2, 3):  # answered between the scan's slices, not after the scan
                assert c.query(AdType.Startd, constraint=f'Name == "slot{i}@h0"', projection=["Name"])[0]["Name"] == f"slot{i}@h0"
                assert not done.is_set(), "the scan ended before the other calls were answered"
    finally:
        worker.join(60)
    assert result["ads"] == []


def test_a_scan_past_its_budget_ends_with_a_sentence(loaded: AgentThread, amqp_url: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pacing, "SCAN_BUDGET", 0.2)
    with CollectorClient(amqp_url, name="c1", timeout=60) as c:
        with pytest.raises(CallFailed, match="scan budget of 0.2 s"):
            c.query(AdType.Startd, constraint=SLOW, projection=["Name"])
        # and the collector goes on answering
        assert len(c.query(AdType.Startd, constraint='Name == "slot5@h0"', projection=["Name"])) == 1
