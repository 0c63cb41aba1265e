"""What queues behind one user-log append goes to the owner's shadow as one text per log, in
order: a burst of job events costs one round trip to the shadow, not one per event."""

from __future__ import annotations

import asyncio

from gridbus.agents.schedd.userlogs import UserLogs


class _SlowShadows:
    """Records each append and holds the first one until released."""

    def __init__(self) -> None:
        self.appends: list[tuple[str, str, str]] = []
        self.release = asyncio.Event()

    async def append(self, owner: str, path: str, text: str) -> None:
        self.appends.append((owner, path, text))
        if len(self.appends) == 1:
            await self.release.wait()

    async def stop_all(self) -> None:
        pass


def test_texts_queued_behind_an_append_go_in_one_per_log_in_order():
    async def main() -> None:
        shadows = _SlowShadows()
        delivered: list[int] = []
        logs = UserLogs(shadows, on_error=lambda *a: None, on_delivered=delivered.extend)  # type: ignore[arg-type]
        logs.write([(1, "alice", "/a.log", "1\n")])
        await asyncio.sleep(0)  # the first append is in flight and held
        logs.write([(2, "alice", "/a.log", "2\n"), (3, "alice", "/a.log", "3\n"), (4, "alice", "/b.log", "4\n"),
                    (5, "alice", "/a.log", "5\n"), (6, "bob", "/c.log", "6\n")])
        await asyncio.sleep(0)
        shadows.release.set()
        assert await logs.written(timeout=5)
        alice = [(path, text) for owner, path, text in shadows.appends if owner == "alice"]
        # Consecutive texts of one log are joined; a text for another log keeps its place.
        assert alice == [("/a.log", "1\n"), ("/a.log", "2\n3\n"), ("/b.log", "4\n"), ("/a.log", "5\n")]
        assert [(p, t) for o, p, t in shadows.appends if o == "bob"] == [("/c.log", "6\n")]
        # Every outbox row is told delivered once its text is written (the joined append: both).
        assert sorted(delivered) == [1, 2, 3, 4, 5, 6]
        await logs.close()

    asyncio.run(main())


def test_an_append_the_shadow_died_on_is_not_written_twice():
    """The shadow wrote the text, then died before it answered: the retry reads the log's end
    and finds the text there."""
    from gridbus.agents.schedd import userlogs
    from gridbus.agents.schedd.owner_shadow import ShadowDied

    class DiesAfterWriting:
        def __init__(self) -> None:
            self.log = ""
            self.died = False

        async def append(self, owner: str, path: str, text: str) -> None:
            self.log += text
            if not self.died:
                self.died = True
                raise ShadowDied("the shadow of alice died twice on one request")

        async def read(self, owner: str, path: str, start: int, end: int, most: int) -> str:
            return self.log[start:]

        async def stop_all(self) -> None:
            pass

    async def main() -> None:
        shadows = DiesAfterWriting()
        delivered: list[int] = []
        logs = UserLogs(shadows, on_error=lambda *a: None, on_delivered=delivered.extend)  # type: ignore[arg-type]
        logs.write([(1, "alice", "/a.log", "one\n")])
        await asyncio.sleep(0)
        logs.write([(2, "alice", "/a.log", "two\n")])
        assert await logs.written(timeout=5)
        assert shadows.log == "one\ntwo\n"
        assert sorted(delivered) == [1, 2] and logs.retries == 1 and logs.skipped == 1
        await logs.close()

    userlogs.RETRY_SECONDS, saved = 0.01, userlogs.RETRY_SECONDS
    try:
        asyncio.run(main())
    finally:
        userlogs.RETRY_SECONDS = saved
