"""Job events survive a schedd that dies between the commit of a change and the delivery of its
events: what a commit owes the user logs and the bus is in its transaction (the outbox), and the
next schedd on the same job queue delivers it, with the same EventIds; once delivered, the rows
are deleted by a later commit. A schedd of this process stands in (no broker, no restart of a
process: the first one is abandoned with its deliveries stuck, as SIGKILL would leave them)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from htcondor2 import JobEventLog, JobEventType

from gridbus.agents.schedd.agent import Schedd
from gridbus.agents.schedd.store import Store
from tests.unit.schedd.inproc import make_schedd, run_on_claim, submit


class Bus:
    """Records the published job events; ``stuck``: publishes never come back (a broker away)."""

    def __init__(self, stuck: bool = False):
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.stuck = stuck

    async def publish(self, kind: str, event: str, who: str, body: dict[str, Any]) -> None:
        if self.stuck:
            await asyncio.Event().wait()
        for one in body.get("Events", [body]):
            self.events.append((event, one))


async def start(schedd: Schedd, bus: Bus) -> asyncio.Task[None]:
    schedd.events._publish = bus.publish  # the framework's publish_event, replaced
    await schedd.setup()
    return asyncio.get_running_loop().create_task(schedd.events.pump())


def submit_logged(schedd: Schedd, **kw: Any) -> int:
    """A cluster into the queue with its submit events recorded, as the Submit handler does."""
    cluster = submit(schedd, **kw)
    c = schedd.queue.clusters[cluster]
    schedd.submission.log_submit(c, list(c.procs.values()))
    return cluster


def outbox_rows(spool: Path) -> int:
    store = Store(spool / "job_queue.sqlite3")
    try:
        return len(store.outbox_rows())
    finally:
        store.close()


def test_events_owed_at_a_crash_are_delivered_by_the_next_schedd(tmp_path: Path):
    spool, log = tmp_path / "spool", tmp_path / "job.log"
    first_bus = Bus(stuck=True)

    async def crashing() -> None:
        schedd = make_schedd(spool)

        async def never(owner: str, path: str, text: str) -> None:  # the shadow never answers
            await asyncio.Event().wait()

        schedd.owner_shadows.append = never  # type: ignore[method-assign]
        pump = await start(schedd, first_bus)
        cluster = submit_logged(schedd, UserLog=str(log), Iwd=str(tmp_path))
        await schedd.commits.now()
        await run_on_claim(schedd, cluster, 0)  # committed: submit and execute owed
        await asyncio.sleep(0.1)
        assert schedd.outbox is not None and schedd.outbox.recorded >= 3
        pump.cancel()  # the process dies: nothing more runs, nothing is closed
        schedd.queue.store.close()

    asyncio.run(crashing())
    assert not log.exists() and first_bus.events == []
    assert outbox_rows(spool) >= 3  # two user-log appends and the bus events

    bus = Bus()

    async def restarted() -> list[str]:
        schedd = make_schedd(spool)
        pump = await start(schedd, bus)
        try:
            assert schedd.events.replayed >= 3
            assert await schedd.user_logs.written(timeout=10)
            await schedd.events.drain()
            for _ in range(50):  # the deletes go with a write-behind commit
                await asyncio.sleep(0.02)
                if not schedd.commits.pending and not schedd.commits.writing:
                    break
            await schedd.commits.now()
            return [row for row, *_ in schedd.queue.store.outbox_rows()]
        finally:
            pump.cancel()
            await schedd.commits.close()
            await schedd.user_logs.close()

    left = asyncio.run(restarted())
    assert left == []
    types = [e.type for e in JobEventLog(str(log)).events(0)]
    assert types == [JobEventType.SUBMIT, JobEventType.EXECUTE]
    assert [e for e, _ in bus.events] == ["submit", "execute"]
    ids = [body["EventId"] for _, body in bus.events]
    assert len(set(ids)) == 2 and all(isinstance(i, str) and len(i) == 32 for i in ids)
    assert outbox_rows(spool) == 0


def test_delivered_rows_are_deleted_by_the_next_commit(tmp_path: Path):
    spool, log = tmp_path / "spool", tmp_path / "job.log"
    bus = Bus()

    async def main() -> None:
        schedd = make_schedd(spool)
        pump = await start(schedd, bus)
        try:
            cluster = submit_logged(schedd, count=3, UserLog=str(log), Iwd=str(tmp_path))
            await schedd.commits.now()
            writes = schedd.queue.store.writes
            assert await schedd.user_logs.written(timeout=10)
            await schedd.events.drain()
            await schedd.commits.now()
            # The deletes rode write-behind commits: one for the log's append, one for the bus's
            # confirm at most (they came apart), none per row.
            assert schedd.queue.store.writes - writes <= 2
            assert schedd.queue.store.outbox_rows() == []
            assert schedd.outbox is not None and schedd.outbox.delivered == schedd.outbox.recorded == 2
            assert [b["ProcIds"] for e, b in bus.events if e == "submit"] == [[0, 1, 2]]
            assert cluster == 1
        finally:
            pump.cancel()
            await schedd.commits.close()
            await schedd.user_logs.close()

    asyncio.run(main())
    assert len([e for e in JobEventLog(str(log)).events(0) if e.type == JobEventType.SUBMIT]) == 3


def test_without_durable_events_nothing_is_kept(tmp_path: Path):
    spool, log = tmp_path / "spool", tmp_path / "job.log"
    bus = Bus()

    async def main() -> None:
        schedd = make_schedd(spool, durable_events=False)
        pump = await start(schedd, bus)
        try:
            submit_logged(schedd, UserLog=str(log), Iwd=str(tmp_path))
            await schedd.commits.now()
            assert schedd.queue.store.outbox_rows() == []
            assert await schedd.user_logs.written(timeout=10)
            await schedd.events.drain()
        finally:
            pump.cancel()
            await schedd.commits.close()
            await schedd.user_logs.close()

    asyncio.run(main())
    assert [e for e, _ in bus.events] == ["submit"]
    assert "000 (" in log.read_text()


def test_text_the_log_already_has_is_not_written_again(tmp_path: Path):
    """The crash came after the submit event's append and before the commit that deleted its row,
    and before the execute event's append: the next schedd writes the execute event only."""
    spool, log = tmp_path / "spool", tmp_path / "job.log"

    async def crashing() -> None:
        schedd = make_schedd(spool)
        schedd.commits.write_behind = 1e6  # no commit deletes a delivered row before the crash
        real_append = schedd.owner_shadows.append
        gate, first_done = asyncio.Event(), asyncio.Event()
        appends = 0

        async def first_only(owner: str, path: str, text: str) -> None:
            nonlocal appends
            appends += 1
            if appends > 1:
                await asyncio.Event().wait()  # the execute event's append never happens
            await gate.wait()
            await real_append(owner, path, text)
            first_done.set()

        schedd.owner_shadows.append = first_only  # type: ignore[method-assign]
        pump = await start(schedd, Bus(stuck=True))
        cluster = submit_logged(schedd, UserLog=str(log), Iwd=str(tmp_path))
        await schedd.commits.now()
        await run_on_claim(schedd, cluster, 0)  # the last commit before the crash
        gate.set()
        await asyncio.wait_for(first_done.wait(), 10)  # the submit event is in the log, its row not deleted
        await asyncio.sleep(0.05)
        pump.cancel()
        await schedd.owner_shadows.stop_all()
        schedd.queue.store.close()

    asyncio.run(crashing())
    assert [e.type for e in JobEventLog(str(log)).events(0)] == [JobEventType.SUBMIT]

    async def restarted() -> int:
        schedd = make_schedd(spool)
        pump = await start(schedd, Bus())
        try:
            assert await schedd.user_logs.written(timeout=10)
            return schedd.user_logs.skipped
        finally:
            pump.cancel()
            await schedd.commits.close()
            await schedd.user_logs.close()

    assert asyncio.run(restarted()) == 1
    assert [e.type for e in JobEventLog(str(log)).events(0)] == [JobEventType.SUBMIT, JobEventType.EXECUTE]


def test_events_the_broker_did_not_confirm_go_again_in_order(tmp_path: Path, monkeypatch):
    """A broker connection that fails (publishes raise, as Connection.publish does once its own
    retries are over): the events are sent again, before anything later, and their outbox row is
    deleted only once they are confirmed."""
    from gridbus.agents.schedd import jobevents

    monkeypatch.setattr(jobevents, "PUBLISH_RETRY", 0.01)
    spool = tmp_path / "spool"

    class Flaky(Bus):
        def __init__(self) -> None:
            super().__init__()
            self.failures = 3

        async def publish(self, kind: str, event: str, who: str, body: dict[str, Any]) -> None:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("the broker went away")
            await super().publish(kind, event, who, body)

    bus = Flaky()

    async def main() -> None:
        schedd = make_schedd(spool)
        pump = await start(schedd, bus)
        try:
            cluster = submit_logged(schedd)
            await schedd.commits.now()
            await run_on_claim(schedd, cluster, 0)
            await asyncio.wait_for(schedd.events.drain(), 10)
            assert bus.failures == 0
            await schedd.commits.now()  # the deletes of the confirmed rows
            assert schedd.queue.store.outbox_rows() == []
        finally:
            pump.cancel()
            await schedd.commits.close()
            await schedd.user_logs.close()

    asyncio.run(main())
    assert [e for e, _ in bus.events] == ["submit", "execute"]  # each once, in order
