"""A loop turn that runs long is reported with where it was; short turns are not."""

from __future__ import annotations

import asyncio
import threading
import time

from gridbus.agent import dutycycle
from gridbus.agent.dutycycle import DutyCycle


def _blocking_on_purpose(seconds: float) -> None:
    time.sleep(seconds)  # sleeps release the GIL, so the watchdog thread samples meanwhile


async def _run(work, threshold: float) -> tuple[DutyCycle, list[tuple[float, list[str]]]]:
    meter = DutyCycle()
    assert meter.install(asyncio.get_running_loop())
    reports: list[tuple[float, list[str]]] = []
    meter.watch_stalls(lambda seconds, gc, samples: reports.append((seconds, samples)), threshold=threshold)
    await work()
    for _ in range(3):  # turns of the loop after the work, so the last turn ends and is reported
        await asyncio.sleep(0.01)
    return meter, reports


def test_a_long_turn_is_reported_once_with_the_function_it_was_in():
    async def work():
        await asyncio.sleep(0.01)
        _blocking_on_purpose(0.6)

    meter, reports = asyncio.run(_run(work, threshold=0.2))
    assert len(reports) == 1, reports
    seconds, samples = reports[0]
    assert seconds >= 0.6
    assert samples and all("_blocking_on_purpose" in s for s in samples), samples
    assert "tests/unit/agent/test_loop_stalls.py" in samples[0]
    assert meter.stalls == 1 and meter.longest_turn >= 0.6


def test_turns_shorter_than_the_threshold_are_not_reported():
    async def work():
        for _ in range(20):
            _blocking_on_purpose(0.01)
            await asyncio.sleep(0)
        _blocking_on_purpose(0.3)  # sampled (from a quarter of the threshold on), not reported

    meter, reports = asyncio.run(_run(work, threshold=0.5))
    assert reports == [] and meter.stalls == 0
    assert 0.3 <= meter.longest_turn < 0.5
    assert meter._samples == []  # the short turn's samples went with it


def test_a_report_that_raises_does_not_break_the_loop():
    async def main():
        meter = DutyCycle()
        meter.install(asyncio.get_running_loop())

        def broken(seconds, gc, samples):
            raise RuntimeError("a broken report")
        meter.watch_stalls(broken, threshold=0.05)
        await asyncio.sleep(0.01)  # (the turn that installed the meter is not timed)
        _blocking_on_purpose(0.1)
        await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        return meter.stalls

    assert asyncio.run(main()) == 1


def test_the_garbage_collector_s_share_of_a_long_turn_is_told():
    import gc

    reports = []

    async def main():
        meter = DutyCycle()
        meter.install(asyncio.get_running_loop())
        meter.watch_stalls(lambda seconds, gc, samples: reports.append((seconds, gc)), threshold=0.05)
        await asyncio.sleep(0.01)
        junk = []
        for _ in range(200_000):  # objects in cycles, for the collector to find
            a: list = []
            a.append(a)
            junk.append(a)
        del junk
        t = time.perf_counter()
        while time.perf_counter() - t < 0.06:
            gc.collect()
        await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        gc.callbacks.remove(meter._gc_phase)
    asyncio.run(main())
    (seconds, gc_time), = reports
    assert 0.03 < gc_time.seconds <= seconds
    assert 0 < gc_time.cpu_seconds <= gc_time.seconds + 0.01
    assert gc_time.full >= 1  # gc.collect() is a full collection



def test_another_threads_stack_is_read_from_one_dump_not_walked_frame_by_frame():
    """The watchdog reads the loop thread's stack from faulthandler's dump, which C code writes
    while the watchdog holds the GIL (walking another thread's frames from Python crashed the
    process once: the walked thread popped them between two steps)."""
    parked, release = threading.Event(), threading.Event()

    def parked_on_purpose() -> None:
        parked.set()
        release.wait(30)

    t = threading.Thread(target=parked_on_purpose)
    t.start()
    assert parked.wait(30)
    try:
        for _ in range(50):  # (a dump each time: cheap, and the stack is the same)
            stack = dutycycle._stack_of(t.ident or 0)
        assert any(name == "parked_on_purpose" for _file, _line, name in stack)
        assert stack[0][2] == "_bootstrap"  # outermost first
        assert "test_loop_stalls.py" in dutycycle._where(stack)
    finally:
        release.set()
        t.join()
    assert dutycycle._stack_of(t.ident or 0) == []  # gone: no frames


def test_a_dump_is_parsed_per_thread():
    dump = (
        'Thread 0x00007f0000000002 (most recent call first):\n'
        '  File "/x/lib.py", line 7 in inner\n'
        '  File "/x/app.py", line 3 in outer\n'
        '\n'
        'Current thread 0x00007f0000000001 (most recent call first):\n'
        '  File "/x/watch.py", line 9 in watch\n'
    )
    assert dutycycle._parse_dump(dump, 0x7F0000000002) == [("/x/app.py", 3, "outer"), ("/x/lib.py", 7, "inner")]
    assert dutycycle._parse_dump(dump, 0x7F0000000001) == [("/x/watch.py", 9, "watch")]
    assert dutycycle._parse_dump(dump, 0x7F0000000003) == []
