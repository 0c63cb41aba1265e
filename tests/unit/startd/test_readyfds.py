"""The starter's own epoll set of descriptors to wait on (agents/startd/readyfds.py)."""

from __future__ import annotations

import asyncio
import os

from gridbus.agents.startd.readyfds import ReadyFds


def test_a_readable_descriptor_calls_back_once_and_a_closed_one_can_be_watched_again():
    async def main() -> list[tuple[str, int]]:
        ready = ReadyFds()
        calls: list[tuple[str, int]] = []
        r, w = os.pipe()
        ready.watch(r, lambda tag, n: calls.append((tag, n)), "first", 1)
        await asyncio.sleep(0.01)
        assert calls == []  # nothing to read yet
        os.write(w, b"x")
        os.write(w, b"y")  # still readable after the first call: one-shot, not called again
        for _ in range(3):
            await asyncio.sleep(0.01)
        os.close(r)  # (dropped from the set by the kernel)
        os.close(w)
        r2, w2 = os.pipe()  # very likely the same numbers again
        ready.watch(r2, lambda tag, n: calls.append((tag, n)), "second", 2)
        os.close(w2)  # EOF is readable too
        for _ in range(3):
            await asyncio.sleep(0.01)
        os.close(r2)
        assert len(ready) == 0
        ready.close()
        return calls

    assert asyncio.run(main()) == [("first", 1), ("second", 2)]


def test_a_forgotten_descriptor_does_not_call_back():
    async def main() -> list[int]:
        ready = ReadyFds()
        calls: list[int] = []
        r, w = os.pipe()
        ready.watch(r, calls.append, 1)
        ready.forget(r)
        os.write(w, b"x")
        await asyncio.sleep(0.02)
        ready.watch(r, calls.append, 2)  # watched again while still open
        await asyncio.sleep(0.02)
        os.close(r)
        os.close(w)
        ready.close()
        return calls

    assert asyncio.run(main()) == [2]


def test_a_set_used_from_a_new_loop_watches_there():
    ready = ReadyFds()
    for n in (1, 2):  # two loops one after the other, as the starter's tests use one starter
        calls: list[int] = []

        async def main(n: int = n, calls: list[int] = calls) -> None:
            r, w = os.pipe()
            ready.watch(r, calls.append, n)
            os.write(w, b"x")
            await asyncio.sleep(0.02)
            os.close(r)
            os.close(w)

        asyncio.run(main())
        assert calls == [n]
    ready.close()


def test_a_callback_that_fails_is_logged_and_the_others_of_its_batch_still_run(caplog):
    # Descriptors fire once: a failing callback must not take the rest of its batch with it
    # (a job's exit or exec never seen again).
    async def main() -> list[int]:
        ready = ReadyFds()
        calls: list[int] = []

        def fail(n: int) -> None:
            raise RuntimeError(f"callback {n} broke")

        pipes = [os.pipe() for _ in range(3)]
        for i, (r, _w) in enumerate(pipes):
            ready.watch(r, fail if i == 1 else calls.append, i)
        for _r, w in pipes:
            os.write(w, b"x")  # all three readable before the loop's next turn: one batch
        for _ in range(3):
            await asyncio.sleep(0.01)
        for r, w in pipes:
            os.close(r)
            os.close(w)
        ready.close()
        return calls

    assert sorted(asyncio.run(main())) == [0, 2]
    assert "callback 1 broke" in caplog.text


def test_what_becomes_ready_during_a_callback_is_taken_in_the_same_turn():
    # A job's exit or exec takes tens of microseconds to handle, long enough for the next one to
    # come: it is taken in the same turn of the loop (before anything the callback scheduled),
    # not in the next, whose fixed cost would be paid again for it.
    async def main() -> list[str]:
        ready = ReadyFds()
        order: list[str] = []
        (r1, w1), (r2, w2) = os.pipe(), os.pipe()
        loop = asyncio.get_running_loop()

        def first() -> None:
            order.append("first")
            loop.call_soon(order.append, "next turn")
            os.write(w2, b"x")  # the second becomes ready while the first is handled

        ready.watch(r1, first)
        ready.watch(r2, order.append, "second")
        os.write(w1, b"x")
        for _ in range(3):
            await asyncio.sleep(0.01)
        for fd in (r1, w1, r2, w2):
            os.close(fd)
        ready.close()
        return order

    assert asyncio.run(main()) == ["first", "second", "next turn"]
