"""Text a crashed schedd owed, replayed by the next one: what a log has already is left out, even
when the owner's other logs' text was queued between (a log ends with the first of ALL the text
owed to it, not with the first of each run of entries queued together)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gridbus.agents.schedd.userlogs import UserLogs


class Shadows:
    """The owner's shadow, as UserLogs uses it: appends and reads of the real files."""

    async def append(self, owner: str, path: str, text: str) -> None:
        with open(path, "a") as fh:
            fh.write(text)

    async def read(self, owner: str, path: str, start: int, end: int, most: int) -> str:
        data = Path(path).read_bytes()
        return data[max(0, len(data) + start):][:most].decode()

    async def stop_all(self) -> None:
        pass


def test_replayed_text_a_log_has_is_not_written_again_across_other_logs_text(tmp_path: Path):
    nodes, other = tmp_path / "nodes.log", tmp_path / "other.log"
    # Before the crash: A and C reached the nodes log, B the other log; D never went out.
    nodes.write_text("earlier\nA\nC\n")
    other.write_text("B\n")
    delivered: list[int] = []

    async def main() -> None:
        logs = UserLogs(Shadows(), on_error=lambda *a: None, on_delivered=delivered.extend)  # type: ignore[arg-type]
        logs.write([(1, "alice", str(nodes), "A\n"), (2, "alice", str(other), "B\n"),
                    (3, "alice", str(nodes), "C\n"), (4, "alice", str(nodes), "D\n")], replayed=True)
        assert await logs.written(timeout=5)
        assert logs.skipped == 3

    asyncio.run(main())
    assert nodes.read_text() == "earlier\nA\nC\nD\n"
    assert other.read_text() == "B\n"
    assert sorted(delivered) == [1, 2, 3, 4]


def test_replayed_text_none_of_which_is_there_is_written_once_in_order(tmp_path: Path):
    nodes, other = tmp_path / "nodes.log", tmp_path / "other.log"
    nodes.write_text("earlier\n")

    async def main() -> None:
        logs = UserLogs(Shadows(), on_error=lambda *a: None)  # type: ignore[arg-type]
        logs.write([(1, "alice", str(nodes), "A\n"), (2, "alice", str(other), "B\n"),
                    (3, "alice", str(nodes), "C\n")], replayed=True)
        assert await logs.written(timeout=5)
        assert logs.skipped == 0

    asyncio.run(main())
    assert nodes.read_text() == "earlier\nA\nC\n" and other.read_text() == "B\n"


def _event(n: int) -> str:
    return f"000 (001.{n:03d}.000) 2026-12-03 19:00:00 Job submitted from host: <127.0.0.1:0>\n...\n"


def test_a_write_cut_short_is_completed_not_followed_so_htcondor_reads_every_event(tmp_path: Path):
    # The owner's shadow was SIGKILLed in the middle of its write of events 1 and 2: the log ends
    # with event 0 and the first characters of event 1. The text goes again (replayed): the log is
    # completed with the rest, and HTCondor's reader, which stops at a torn event in the middle of a
    # log (ULOG_RD_ERROR), reads all three.
    import htcondor2

    log = tmp_path / "job.log"
    owed = _event(1) + _event(2)
    log.write_text(_event(0) + owed[:30])
    delivered: list[int] = []

    async def main() -> UserLogs:
        logs = UserLogs(Shadows(), on_error=lambda *a: None, on_delivered=delivered.extend)  # type: ignore[arg-type]
        logs.write([(7, "alice", str(log), owed), (8, "alice", str(log), _event(3))], replayed=True)
        assert await logs.written(timeout=5)
        return logs

    logs = asyncio.run(main())
    assert log.read_text() == _event(0) + _event(1) + _event(2) + _event(3)
    assert [e.proc for e in htcondor2.JobEventLog(str(log)).events(0)] == [0, 1, 2, 3]
    assert logs.completed == 1 and sorted(delivered) == [7, 8]


def test_a_log_that_ends_mid_event_with_other_text_is_appended_to_as_before(tmp_path: Path):
    log = tmp_path / "job.log"
    log.write_text(_event(0) + "000 (009.")  # a cut write, but not of this text
    logs_written: list[UserLogs] = []

    async def main() -> None:
        logs = UserLogs(Shadows(), on_error=lambda *a: None)  # type: ignore[arg-type]
        logs.write([(1, "alice", str(log), _event(1))], replayed=True)
        assert await logs.written(timeout=5)
        logs_written.append(logs)

    asyncio.run(main())
    assert log.read_text() == _event(0) + "000 (009." + _event(1) and logs_written[0].completed == 0
