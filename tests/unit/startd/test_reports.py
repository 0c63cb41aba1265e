"""The startd's JobReports batching, against a recording schedd (no broker)."""

from __future__ import annotations

import asyncio
from typing import Any

from gridbus import wire
from gridbus.agents.startd.reports import Reporter
from gridbus.rpc import MethodResult
from gridbus.schema import builtin


def test_a_backlog_of_reports_leaves_in_calls_the_schedd_takes():
    """Reports pile up while a schedd is away; each call stays under the size JobReports takes
    (a call over it would be refused whole, and retried for ever), and every report arrives."""
    bound = builtin().cls("scheduler").methods["JobReports"].max_bytes
    calls: list[int] = []
    got: list[int] = []

    async def schedd(address: str, batch: list[dict[str, Any]], timeout: float) -> MethodResult:
        calls.append(len(wire.encode({"object": address, "method": "JobReports", "args": {"Reports": batch}})))
        got.extend(r["ProcId"] for r in batch)
        return MethodResult(0, "OK", {"Unknown": []})

    async def scenario() -> None:
        reporter = Reporter(schedd, timeout=5, retry=0.1, keep=lambda r: True,
                            on_unknown=lambda c: None, on_answered=lambda c: None)
        held = "x" * 4000  # a long hold reason, as a starter's error can give
        for proc in range(5000):
            reporter.add("schedd@s", {"ClaimId": f"c{proc}", "Event": "exit", "ProcId": proc, "HoldReason": held})
        deadline = asyncio.get_running_loop().time() + 10
        while len(got) < 5000 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await reporter.close()

    asyncio.run(scenario())
    assert sorted(got) == list(range(5000))
    assert max(calls) <= bound, f"a call of {max(calls):,} bytes; JobReports takes {bound:,}"


def test_a_schedd_answered_leaves_no_outbox_behind():
    """Schedds come and go (each of a pool's users may run one): the reporter keeps an outbox only
    for a schedd with reports pending or in flight."""
    answered: list[str] = []

    async def schedd(address: str, batch: list[dict[str, Any]], timeout: float) -> MethodResult:
        answered.append(address)
        return MethodResult(0, "OK", {"Unknown": []})

    async def scenario() -> int:
        reporter = Reporter(schedd, timeout=5, retry=0.1, keep=lambda r: True,
                            on_unknown=lambda c: None, on_answered=lambda c: None)
        for i in range(200):
            reporter.add(f"schedd@s{i}", {"ClaimId": f"c{i}", "Event": "exit", "ProcId": i})
        deadline = asyncio.get_running_loop().time() + 10
        while len(answered) < 200 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await reporter.close()
        return reporter.outboxes

    assert asyncio.run(scenario()) == 0
    assert len(answered) == 200


def test_reports_made_during_a_call_linger_after_its_answer_unless_an_exit_hurries(monkeypatch):
    """What is made while a call is out leaves after REPORT_LINGER once the answer is in (so a
    steady stream of short jobs' reports travels in a few calls, not one per round trip), except
    an exit that hurries (its claim has no next job queued): that leaves with the answer."""
    from gridbus.agents.startd import reports

    monkeypatch.setattr(reports, "REPORT_LINGER", 30.0)
    calls: list[list[str]] = []
    answer: asyncio.Event

    async def schedd(address: str, batch: list[dict[str, Any]], timeout: float) -> MethodResult:
        calls.append([r["Event"] for r in batch])
        await answer.wait()
        answer.clear()
        return MethodResult(0, "OK", {"Unknown": []})

    async def settle() -> None:
        for _ in range(20):
            await asyncio.sleep(0.005)

    async def scenario() -> None:
        nonlocal answer
        answer = asyncio.Event()
        reporter = Reporter(schedd, timeout=5, retry=0.1, keep=lambda r: True,
                            on_unknown=lambda c: None, on_answered=lambda c: None)
        reporter.add("schedd@s", {"ClaimId": "c1", "Event": "exit", "ProcId": 1})
        await settle()
        assert calls == [["exit"]]  # an exit that hurries leaves at once
        reporter.add("schedd@s", {"ClaimId": "c1", "Event": "execute", "ProcId": 2})
        reporter.add("schedd@s", {"ClaimId": "c2", "Event": "exit", "ProcId": 3}, hurry=False)
        answer.set()
        await settle()
        assert calls == [["exit"]]  # answered; the two made meanwhile linger
        reporter.add("schedd@s", {"ClaimId": "c3", "Event": "exit", "ProcId": 4})
        await settle()
        assert calls == [["exit"], ["execute", "exit", "exit"]]  # a hurried exit takes them along
        reporter.add("schedd@s", {"ClaimId": "c1", "Event": "exit", "ProcId": 2})
        reporter.add("schedd@s", {"ClaimId": "c4", "Event": "usage", "ProcId": 5})
        await settle()
        assert len(calls) == 2  # one call at a time: the hurried exit waits for the answer...
        answer.set()
        await settle()
        assert calls[2:] == [["exit", "usage"]]  # ...and leaves with it, the usage report beside it
        answer.set()
        await reporter.close()

    asyncio.run(scenario())
