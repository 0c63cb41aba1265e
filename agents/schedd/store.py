"""The job queue on disk: SQLite in WAL mode under the schedd's spool directory.

Seven tables. A cluster row holds the cluster ad (every attribute its procs share) and, for late
materialization, its factory state; a proc row holds only the proc's differences from its
cluster ad (often nothing at all), so 100,000 procs of one submit cost a few bytes each. Ads are
msgpack blobs in gridbus's wire codec, so expressions keep their type. Finished jobs move to the
history table; submission ids (for idempotent Submit) have their own table. The outbox holds the job events
the queue's commits still owe the user logs and the bus (outbox.py).

The file carries its schema's version (PRAGMA user_version; see STORE_VERSION): a store of an
older version is migrated forward at the start, after a copy of it is taken (`<file>.v<N>.bak`);
one of a newer version is refused with a sentence, never read half-understood.

Every change goes through `write()`, one transaction per batch; the caller decides when (a
Submit commits before it is answered, shadow updates are batched a few milliseconds).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridbus import wire
from gridbus.errors import NoRestart

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS clusters (
    cluster_id INTEGER PRIMARY KEY, owner TEXT NOT NULL, ad BLOB NOT NULL, factory BLOB);
CREATE TABLE IF NOT EXISTS procs (
    cluster_id INTEGER NOT NULL, proc_id INTEGER NOT NULL, status INTEGER NOT NULL, attrs BLOB,
    PRIMARY KEY (cluster_id, proc_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS submissions (
    owner TEXT NOT NULL, submission_id TEXT NOT NULL, digest TEXT NOT NULL, answer BLOB NOT NULL,
    recorded REAL NOT NULL, PRIMARY KEY (owner, submission_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster_id INTEGER NOT NULL, proc_id INTEGER NOT NULL,
    owner TEXT NOT NULL, recorded REAL NOT NULL, ad BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS history_recorded ON history (recorded);
CREATE TABLE IF NOT EXISTS factory_progress (
    cluster_id INTEGER PRIMARY KEY, next INTEGER NOT NULL, total INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY, kind INTEGER NOT NULL, owner TEXT NOT NULL, path TEXT NOT NULL, body BLOB NOT NULL);
"""


# The schema's version. 0 is a store with no version (gridbus 0.1.0's, whose tables are those
# above); MIGRATIONS[n] is the SQL that takes a store from version n to n + 1, run in one
# transaction before SCHEMA (whose IF NOT EXISTS then adds any table a version brought).
STORE_VERSION = 1
MIGRATIONS: dict[int, str] = {
    # Version 1: 0.1.0's tables, their rows as they are, and the outbox (made by SCHEMA).
    0: "",
}


class StoreTooNew(NoRestart):
    """The job queue was written by a newer gridbus."""


def pack(obj: Any) -> bytes:
    return wire.encode(obj)


def unpack(blob: bytes | None) -> Any:
    return None if blob is None else wire.decode(blob)


@dataclass
class Batch:
    """Changes to write in one transaction."""

    clusters: dict[int, tuple[str, bytes, bytes | None]] = field(default_factory=dict)  # upserts
    # A late-materialization factory's counters (Next, Total): what changes as its procs are
    # made, a row of two integers, never the factory whose item list may be megabytes.
    factory_progress: dict[int, tuple[int, int]] = field(default_factory=dict)
    cluster_deletes: set[int] = field(default_factory=set)
    procs: dict[tuple[int, int], tuple[int, bytes | None]] = field(default_factory=dict)  # upserts
    proc_deletes: set[tuple[int, int]] = field(default_factory=set)
    history: list[tuple[int, int, str, float, bytes]] = field(default_factory=list)
    submissions: list[tuple[str, str, str, bytes, float]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # Rows of other tables in the same file that must commit with the queue, in order:
    # (SQL, parameter rows) for executemany (the shadows' claim records).
    writes: list[tuple[str, list[tuple[Any, ...]]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.clusters or self.factory_progress or self.cluster_deletes or self.procs
            or self.proc_deletes or self.history or self.submissions or self.meta or self.writes
        )


class Store:
    def __init__(self, path: str | Path, *, synchronous: str = "FULL"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN ... COMMIT) in write().
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before Submit is answered, even across a power cut.
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self._migrate()
        self.db.executescript(SCHEMA)
        # Writes run in a worker thread (commits.py) on `db`; what the event loop reads goes
        # through a connection of its own, which WAL lets read the last commit meanwhile.
        self.reader = self._connect()
        self.writes = 0  # transactions committed (for statistics and tests)
        # Held by a write (and a pruning) and by close: closing the connection a worker thread
        # writes on crashed the process (sqlite3 does not guard it); a close waits for the write.
        self._writing = threading.Lock()

    def _migrate(self) -> None:
        """Bring the file to STORE_VERSION: a new file is numbered; an older one is copied, then
        migrated one version at a time; a newer one is refused."""
        version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
        if version > STORE_VERSION:
            self.db.close()
            raise StoreTooNew(f"the job queue {self.path} has schema version {version}, newer than this gridbus's "
                              f"{STORE_VERSION}: run the gridbus release that wrote it, or restore the backup an "
                              "upgrade left beside it")
        empty = self.db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        if version == STORE_VERSION:
            return
        if not empty:
            backup = self.path.with_name(f"{self.path.name}.v{version}.bak")
            copy = sqlite3.connect(str(backup))
            try:
                self.db.backup(copy)  # SQLite's online backup: a consistent copy, WAL included
            finally:
                copy.close()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for step in range(version, STORE_VERSION):
                if not empty:  # statement by statement: executescript would commit half way
                    for statement in filter(str.strip, MIGRATIONS[step].split(";")):
                        self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {STORE_VERSION}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)

    def close(self) -> None:
        with self._writing:
            self.reader.close()
            self.db.close()

    # ------------------------------------------------------------------ reading
    def meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def clusters(self) -> Iterator[tuple[int, str, bytes, bytes | None]]:
        yield from self.db.execute("SELECT cluster_id, owner, ad, factory FROM clusters ORDER BY cluster_id")

    def factory_progress(self) -> dict[int, tuple[int, int]]:
        return {cid: (n, t) for cid, n, t in self.db.execute("SELECT cluster_id, next, total FROM factory_progress")}

    def procs(self) -> Iterator[tuple[int, int, int, bytes | None]]:
        yield from self.db.execute("SELECT cluster_id, proc_id, status, attrs FROM procs ORDER BY cluster_id, proc_id")

    def max_cluster_in_history(self) -> int:
        row = self.db.execute("SELECT MAX(cluster_id) FROM history").fetchone()
        return int(row[0] or 0)

    def outbox_top(self) -> int:
        """The highest outbox row number in use (0: none)."""
        row = self.db.execute("SELECT MAX(seq) FROM outbox").fetchone()
        return int(row[0] or 0)

    def outbox_rows(self) -> list[tuple[int, int, str, str, bytes]]:
        """Every outbox row (seq, kind, owner, path, body), in order."""
        return list(self.db.execute("SELECT seq, kind, owner, path, body FROM outbox ORDER BY seq"))

    def submission(self, owner: str, submission_id: str) -> tuple[str, Any] | None:
        row = self.reader.execute(
            "SELECT digest, answer FROM submissions WHERE owner = ? AND submission_id = ?", (owner, submission_id)
        ).fetchone()
        return None if row is None else (row[0], unpack(row[1]))

    def history_reader(self, since_seq: int = 0) -> HistoryReader:
        """The history recorded after ``since_seq``, newest first, as of now (see HistoryReader)."""
        return HistoryReader(self._connect(), since_seq)

    def history_seq_of(self, cluster: int, proc: int | None) -> int | None:
        if proc is None:
            row = self.reader.execute("SELECT MAX(seq) FROM history WHERE cluster_id = ?", (cluster,)).fetchone()
        else:
            row = self.reader.execute(
                "SELECT MAX(seq) FROM history WHERE cluster_id = ? AND proc_id = ?", (cluster, proc)
            ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def history_ad(self, cluster: int, proc: int) -> Any:
        row = self.reader.execute(
            "SELECT ad FROM history WHERE cluster_id = ? AND proc_id = ? ORDER BY seq DESC LIMIT 1", (cluster, proc)
        ).fetchone()
        return None if row is None else unpack(row[0])

    # ------------------------------------------------------------------ writing
    def write(self, batch: Batch) -> None:
        """Apply a batch in one transaction; on any error nothing of it is applied."""
        if not batch:
            return
        with self._writing:
            self._write(batch)

    def _write(self, batch: Batch) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if batch.clusters:
                db.executemany(
                    "INSERT OR REPLACE INTO clusters (cluster_id, owner, ad, factory) VALUES (?, ?, ?, ?)",
                    [(cid, *row) for cid, row in batch.clusters.items()],
                )
            if batch.factory_progress:
                db.executemany(
                    "INSERT OR REPLACE INTO factory_progress (cluster_id, next, total) VALUES (?, ?, ?)",
                    [(cid, n, t) for cid, (n, t) in batch.factory_progress.items()],
                )
            if batch.procs:
                db.executemany(
                    "INSERT OR REPLACE INTO procs (cluster_id, proc_id, status, attrs) VALUES (?, ?, ?, ?)",
                    [(c, p, st, attrs) for (c, p), (st, attrs) in batch.procs.items()],
                )
            if batch.proc_deletes:
                db.executemany("DELETE FROM procs WHERE cluster_id = ? AND proc_id = ?", list(batch.proc_deletes))
            if batch.cluster_deletes:
                deletes = [(c,) for c in batch.cluster_deletes]
                db.executemany("DELETE FROM clusters WHERE cluster_id = ?", deletes)
                db.executemany("DELETE FROM factory_progress WHERE cluster_id = ?", deletes)
            if batch.history:
                db.executemany(
                    "INSERT INTO history (cluster_id, proc_id, owner, recorded, ad) VALUES (?, ?, ?, ?, ?)", batch.history
                )
            if batch.submissions:
                db.executemany(
                    "INSERT OR REPLACE INTO submissions (owner, submission_id, digest, answer, recorded) VALUES (?, ?, ?, ?, ?)",
                    batch.submissions,
                )
            if batch.meta:
                db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(batch.meta.items()))
            for sql, rows in batch.writes:
                db.executemany(sql, rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.writes += 1

    def prune_history(self, older_than: float, keep_at_most: int) -> int:
        """Forget history (and submission ids) older than ``older_than``, and beyond the newest N."""
        with self._writing:
            return self._prune_history(older_than, keep_at_most)

    def _prune_history(self, older_than: float, keep_at_most: int) -> int:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            removed = db.execute("DELETE FROM history WHERE recorded < ?", (older_than,)).rowcount
            if keep_at_most >= 0:
                removed += db.execute(
                    "DELETE FROM history WHERE seq <= (SELECT seq FROM history ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                    (keep_at_most,),
                ).rowcount
            # A retried Submit comes within seconds of the first; a day-old id is safe to forget.
            db.execute("DELETE FROM submissions WHERE recorded < ?", (older_than,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return removed



class HistoryReader:
    """A History listing: one read transaction on a connection of its own (a snapshot: jobs
    that finish or are pruned meanwhile change nothing in it), read and decoded a page at a time
    by `page()`, which the caller runs in a worker thread, so a listing of a million rows neither
    blocks the event loop nor sees a half-changed table."""

    def __init__(self, db: sqlite3.Connection, since_seq: int):
        self.db = db
        self._cursor: sqlite3.Cursor | None = None
        self._since = since_seq
        self._closed = False

    def page(self, size: int) -> list[Any]:
        """The next ``size`` ads, decoded; [] at the end (the connection is closed then)."""
        if self._closed:
            return []
        if self._cursor is None:
            self.db.execute("BEGIN")
            self._cursor = self.db.execute(
                "SELECT ad FROM history WHERE seq > ? ORDER BY seq DESC", (self._since,))
        rows = self._cursor.fetchmany(size)
        if not rows:
            self.close()
        return [unpack(blob) for (blob,) in rows]

    def close(self) -> None:
        """Idempotent (the listing's end closes it, and its handler's finally again)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.db.in_transaction:
                self.db.execute("COMMIT")
        finally:
            self.db.close()
