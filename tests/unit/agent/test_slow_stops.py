"""A stop that goes on is reported in its log with where each of its tasks waits (the master's
SIGKILL would say nothing); tasks are ended even where Python 3.11 drops a cancellation."""

from __future__ import annotations

import asyncio
import logging

from gridbus.agent import Agent
from gridbus.agent.awaiting import SlowReport, awaits_of, cancel_and_wait

URL = "amqp://guest:guest@127.0.0.1:1/"  # never dialled


class Recorded(logging.Handler):
    """Keeps the records; `seen` is set at the first."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.seen.set()


async def _held(gate: asyncio.Event) -> None:
    await gate.wait()


async def _holding(gate: asyncio.Event) -> None:
    await _held(gate)


def test_a_start_that_fails_still_ends_the_run_with_its_error():
    async def scenario() -> None:
        agent = Agent("t", URL)

        async def failing() -> None:
            raise RuntimeError("no broker")

        agent._start = failing
        await agent.run(asyncio.Event())

    try:
        asyncio.run(scenario())
    except RuntimeError as exc:
        assert str(exc) == "no broker"
    else:
        raise AssertionError("the run did not end with the start's error")


def test_the_chain_of_awaits_names_each_coroutine_down_to_what_it_waits_on():
    async def scenario() -> str:
        gate = asyncio.Event()
        task = asyncio.ensure_future(_holding(gate))
        await asyncio.sleep(0)  # (the task runs up to its first await)
        chain = awaits_of(task)
        gate.set()
        await task
        return chain

    chain = asyncio.run(scenario())
    parts = chain.split(" > ")
    assert parts[0].startswith("tests/unit/agent/test_slow_stops.py:") and parts[0].endswith(" _holding")
    assert parts[1].endswith(" _held") and parts[2].endswith(" wait")  # asyncio's Event.wait
    assert parts[-1] == "Future"


def test_a_phase_that_goes_on_is_reported_with_its_step_and_its_tasks_until_it_is_done():
    async def scenario() -> list[logging.LogRecord]:
        log = logging.getLogger("gridbus.test.slowstop")
        log.propagate = False
        handler = Recorded()
        log.addHandler(handler)
        gate = asyncio.Event()
        held = asyncio.ensure_future(_holding(gate))
        held.set_name("closing the store")
        report = SlowReport(log, "stop", 0.05)
        report.step = "on_stop"
        await asyncio.wait_for(handler.seen.wait(), 5)
        report.done()
        count = len(handler.records)
        gate.set()
        await held
        await asyncio.sleep(0.15)  # three intervals: a report once done would have come by now
        assert len(handler.records) == count
        log.removeHandler(handler)
        return handler.records

    records = asyncio.run(scenario())
    text = records[0].getMessage()
    assert text.startswith("the stop has taken 0 s and goes on, at: on_stop;"), text
    assert "closing the store: tests/unit/agent/test_slow_stops.py:" in text and " _held > " in text, text


def test_a_task_that_dropped_its_cancellation_is_cancelled_again_until_it_ends():
    # As Python 3.11's wait_for does when the cancellation comes as its event is set: the result
    # is returned, the cancellation lost, and the task's loop goes on (a gather waited for ever).
    async def scenario() -> tuple[int, bool]:
        dropped = 0

        async def loop_that_drops_one() -> None:
            nonlocal dropped
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    if dropped:
                        raise
                    dropped += 1

        task = asyncio.ensure_future(loop_that_drops_one())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait([task], logging.getLogger("t")), 10)
        return dropped, task.cancelled()

    assert asyncio.run(scenario()) == (1, True)
