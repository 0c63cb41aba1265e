"""What the schedd still owes the user logs and the bus: a transactional outbox in the job queue.

A job event is owed from the moment the change it reports is committed. So the text each commit
batch owes each user log, and the bus events it owes `gridbus.events`, are written as rows of the
`outbox` table in that batch's own transaction (`JobQueue.add_writes`): a change is never on disk
without what it owes, and nothing is owed for a change that never reached the disk. A row is
deleted once the owner's shadow has appended its text (or refused it for good: the jobs of that log
are held) or the broker has confirmed its events; the deletes ride in the next commit's transaction
(one `executemany`), and ask for one of their own only when no other commit came for DELETE_LINGER
(a row delivered and not yet deleted at a crash is delivered again: a duplicate, never a loss). A schedd
that restarts hands every row left over to the writers again, before anything new: an event whose
row survived a crash is written twice, never lost.

Rows are numbered by the schedd (`next_seq`), in the order their batches were taken, so a replay
keeps each log's text and each job's events in order. One row per user log per batch, and one
row for all the bus events of a batch: the cost is a few rows per commit, not a row per event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from gridbus.agents.schedd.store import Store, pack, unpack

log = logging.getLogger("gridbus.schedd.outbox")

LOG_TEXT = 0  # a row of user-log text: (owner, path, text)
BUS_EVENTS = 1  # a row of bus events: [(event, owner, body), ...]

INSERT = "INSERT INTO outbox (seq, kind, owner, path, body) VALUES (?, ?, ?, ?, ?)"
DELETE = "DELETE FROM outbox WHERE seq = ?"
DELETE_LINGER = 1.0  # seconds delivered rows wait for a commit to ride before asking for one

LogRow = tuple[int, str, str, str]  # seq, owner, path, text
EventRow = tuple[int, list[tuple[str, str, dict[str, Any]]]]  # seq, [(event, owner, body)]


class Outbox:
    """The outbox rows of one job queue. ``add_writes`` puts SQL in the next commit's transaction
    (JobQueue.add_writes); ``commit_soon`` asks for that commit (Commits.soon)."""

    def __init__(self, store: Store, add_writes: Callable[[list[tuple[str, list[tuple[Any, ...]]]]], None],
                 commit_soon: Callable[[], None]):
        self.store = store
        self._add_writes = add_writes
        self._commit_soon = commit_soon
        self.next_seq = store.outbox_top() + 1
        self._done: list[tuple[int]] = []  # rows delivered, deleted with the next commit
        self._timer: asyncio.TimerHandle | None = None
        self.recorded = 0  # rows written (statistics, tests)
        self.delivered = 0  # rows deleted

    def record(self, logs: Iterable[tuple[str, str, str]], events: list[tuple[str, str, dict[str, Any]]]
               ) -> tuple[list[LogRow], EventRow | None]:
        """Rows for a batch about to be taken: (owner, path, text) per user log and the batch's bus
        events; they go into that batch's transaction. Returns them with their numbers."""
        rows: list[tuple[Any, ...]] = []
        log_rows: list[LogRow] = []
        for owner, path, text in logs:
            seq = self._take_seq()
            rows.append((seq, LOG_TEXT, owner, path, text.encode()))
            log_rows.append((seq, owner, path, text))
        event_row: EventRow | None = None
        if events:
            seq = self._take_seq()
            rows.append((seq, BUS_EVENTS, "", "", pack([list(e) for e in events])))
            event_row = (seq, events)
        if self._done:  # deletes go with the batch being taken, whatever else it holds
            rows_done, self._done = self._done, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._add_writes([(DELETE, rows_done)])
            self.delivered += len(rows_done)
        if rows:
            self._add_writes([(INSERT, rows)])
            self.recorded += len(rows)
        return log_rows, event_row

    def _take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def delivered_rows(self, seqs: Iterable[int]) -> None:
        """These rows are delivered: deleted in the next commit (asked for after DELETE_LINGER if
        none came by then: a busy schedd commits every few milliseconds anyway)."""
        before = len(self._done)
        self._done.extend((s,) for s in seqs)
        if len(self._done) > before and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(DELETE_LINGER, self._linger_over)

    def _linger_over(self) -> None:
        self._timer = None
        if self._done:
            self._commit_soon()

    def left_over(self) -> tuple[list[LogRow], list[EventRow]]:
        """The rows a previous run left undelivered (a crash), oldest first."""
        logs: list[LogRow] = []
        events: list[EventRow] = []
        for seq, kind, owner, path, body in self.store.outbox_rows():
            if kind == LOG_TEXT:
                logs.append((seq, owner, path, bytes(body).decode()))
            elif kind == BUS_EVENTS:
                events.append((seq, [(str(e), str(o), dict(b)) for e, o, b in unpack(body)]))
            else:  # a kind this schedd does not know: kept for a schedd that does
                log.warning("outbox row %d has an unknown kind %r; kept", seq, kind)
        return logs, events
