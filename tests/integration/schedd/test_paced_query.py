"""A Query whose constraint is slow over a big queue runs in slices: the schedd answers other calls
meanwhile, and a scan past its budget ends with a sentence (gridbus/agent/pacing.py)."""

from __future__ import annotations

import threading

import pytest

from gridbus.agent import pacing
from gridbus.agent.threaded import AgentThread
from gridbus.agents.schedd.queries import QUERY_SUMMARY
from gridbus.console import Session
from tests.integration.schedd.conftest import job_ad, wait_for

JOBS = 10_000
# About a quarter of a millisecond per job: a doubling chain of 120 attributes (linear, memoized).
CHAIN = "; ".join(["a0=ProcId"] + [f"a{i}=a{i - 1}+a{i - 1}" for i in range(1, 120)])
SLOW = f"[{CHAIN}].a119 < 0"


def _query(session: Session, constraint: str, **kw: object) -> object:
    return session.call("schedd@s1", "Query", {"Constraint": constraint, "Projection": ["ProcId"], **kw}, timeout=60)


def test_other_calls_are_answered_while_a_slow_constraint_is_scanned(schedd: AgentThread, session: Session,
                                                                     amqp_url: str) -> None:
    cluster = session.call("schedd@s1", "Submit", {"Ad": job_ad(), "Count": JOBS}, timeout=60).ClusterId
    done = threading.Event()
    result: dict[str, object] = {}

    def slow_query() -> None:
        with Session(amqp_url, timeout=60) as s:
            result["reply"] = _query(s, SLOW)
        done.set()

    worker = threading.Thread(target=slow_query)
    worker.start()
    try:
        # The slow Query is under way once the schedd has taken it (and not answered it).
        wait_for(lambda: schedd.agent.stats["RequestsInFlight"] > 0, 10, "the slow Query taken")
        for proc in (1, 2, 3):
            r = session.call("schedd@s1", "GetAd", {"Id": f"{cluster}.{proc}"}, timeout=30)
            assert r.status == 0 and r.JobAd["ProcId"] == proc
        assert not done.is_set(), "the scan ended before the other calls were answered"
    finally:
        worker.join(60)
    reply = result["reply"]
    assert reply.status == 0 and reply.Jobs == [], reply  # type: ignore[attr-defined]


def test_a_scan_past_its_budget_ends_with_a_sentence(schedd: AgentThread, session: Session,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    session.call("schedd@s1", "Submit", {"Ad": job_ad(), "Count": JOBS}, timeout=60)
    monkeypatch.setattr(pacing, "SCAN_BUDGET", 0.2)
    for opts in (0, QUERY_SUMMARY):  # the listing, and the counts (SummaryOnly)
        r = _query(session, SLOW, Opts=opts)
        assert r.status != 0 and "scan budget of 0.2 s" in r.text, r.text
    assert _query(session, "ProcId == 7").Jobs == [{"ProcId": 7}]
