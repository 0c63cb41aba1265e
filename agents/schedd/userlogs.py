"""The user-log writer: job events' text appended to the jobs' user logs by the owners' shadows
(owner_shadow.py), so a log is written as its owner, never as the schedd, and never on the
schedd's event loop.

Each owner's text goes out in order through a queue and a task of its own, and what queued
behind one append for the same log goes in the next as one text (under load a job's events and
its neighbours' share one round trip to the shadow and one write). An owner whose log
hangs (a hung NFS mount, a FIFO nobody reads) delays only that owner's later log text, never
another owner's, nor any call the schedd answers. A log the owner cannot write (refused by its
shadow) calls ``on_error(owner, path, sentence)``: the schedd holds the jobs that log there.

Each append names the outbox rows it carries (outbox.py); ``on_delivered(rows)`` is told once the
shadow has written them, or refused them for good (the jobs are held: that is their record). An
append the shadow died on (killed, twice in one request) is not refused: it waits RETRY_SECONDS
and goes again, ahead of the owner's later text, so a log's events keep their order (checked
against the log's end first, as below: the shadow may have written it before it died).

Text a previous run owed (``replayed``: the outbox rows a crash left) may be in the log already:
the crash can come between the append and the commit that deletes its row. Those rows are each
log's last appends, in order, so before writing them again the writer reads the log's end and
leaves out the first rows whose text it already ends with. A log is written twice only when
something else wrote to it in between (then HTCondor's readers see the repeat, which they tolerate).

An append can also be cut short: a writer killed (SIGKILL) in the middle of its write() leaves the
first bytes of its text, as the kernel ends a write between two pages for a fatal signal. A log
whose end is not an event's end (``...``) and is the beginning of the text owed is completed
with the rest of that text, not followed by all of it: an event torn in the middle of a log is
where HTCondor's readers stop (ULOG_RD_ERROR), and every event after it would be lost to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable

from gridbus.agent.awaiting import cancel_and_wait
from gridbus.agents.schedd.owner_shadow import OwnerShadows, ShadowDied, ShadowRefused
from gridbus.eventlog import writer

log = logging.getLogger("gridbus.schedd.userlogs")

# HTCondor's HoldReasonCode UnableToInitUserLog: the user log cannot be opened or written.
HOLD_USER_LOG = 22
RETRY_SECONDS = 0.5  # before an append the shadow died on goes again

Delivered = Callable[[list[int]], None]
Entry = tuple[str, str, tuple[int, ...], bool]  # path, text, outbox rows, replayed by a restart


class UserLogs:
    def __init__(self, shadows: OwnerShadows, on_error: Callable[[str, str, str], None],
                 on_delivered: Delivered | None = None):
        self.shadows = shadows
        self.on_error = on_error
        self.on_delivered = on_delivered
        # owner -> (path, text, outbox rows, replayed) in order
        self._pending: dict[str, deque[Entry]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}
        self.errors = 0
        # Logs the schedd writes itself (a spooled job's, in its spool: spooling.Spooling.owns_log).
        self.schedd_owned: Callable[[str], bool] = lambda path: False
        self.retries = 0  # appends written again (their shadow died)
        self.skipped = 0  # replayed appends the log already had
        self.completed = 0  # appends cut short (their writer killed mid-write) completed

    def write(self, texts: Iterable[tuple[int, str, str, str]], *, replayed: bool = False) -> None:
        """Queue (row, owner, path, text) appends (row: the outbox row, 0 for none); each owner's
        are written in this order. ``replayed``: rows a previous run left owed (see above)."""
        for row, owner, path, text in texts:
            self._pending.setdefault(owner, deque()).append((path, text, (row,) if row else (), replayed))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a commit outside the event loop (a tool): the next write takes it
            return
        for owner in self._pending:
            task = self._writers.get(owner)
            if task is None or task.done():
                self._writers[owner] = loop.create_task(self._run(owner), name=f"user logs of {owner}")

    async def _run(self, owner: str) -> None:
        pending = self._pending.get(owner)
        while pending:
            path, text, rows, replayed = pending.popleft()
            parts, all_rows = [text], [rows]
            while pending and pending[0][0] == path and pending[0][3] == replayed:
                _p, more, more_rows, _r = pending.popleft()
                parts.append(more)
                all_rows.append(more_rows)
            try:
                torn = 0  # characters of the text the log ends with already (a write cut short)
                if replayed:
                    there, torn = await self._replayed_there(pending, owner, path, parts)
                    if there:
                        self.skipped += there
                        self._delivered([r for rs in all_rows[:there] for r in rs])
                        parts, all_rows = parts[there:], all_rows[there:]
                        if not parts:
                            continue
                    if torn:
                        self.completed += 1
                        log.warning("user log %s ends with %d characters of a cut write: completing it", path, torn)
                text, rows = "".join(parts)[torn:], tuple(r for rs in all_rows for r in rs)
                if self.schedd_owned(path):
                    await asyncio.get_running_loop().run_in_executor(None, writer.append, path, text)
                else:
                    await self.shadows.append(owner, path, text)
            except ShadowDied as exc:
                self._again(pending, path, parts, all_rows, exc.sentence)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            except OSError as exc:  # (a spooled job's log, written by the schedd)
                self.errors += 1
                self.on_error(owner, path, f"{path}: {exc.strerror}")
            except ShadowRefused as exc:
                self.errors += 1
                log.warning("user log %s: %s", path, exc.sentence)
                try:
                    self.on_error(owner, path, exc.sentence)
                except Exception:
                    log.exception("holding the jobs of user log %s failed", path)
            except Exception as exc:  # not the owner's refusal: the text goes again, as above
                log.exception("writing user log %s as %s failed", path, owner)
                self._again(pending, path, parts, all_rows, str(exc))
                await asyncio.sleep(RETRY_SECONDS)
                continue
            self._delivered([r for rs in all_rows for r in rs])
        if not pending:
            self._pending.pop(owner, None)

    def _delivered(self, rows: list[int]) -> None:
        if rows and self.on_delivered is not None:
            self.on_delivered(rows)

    async def _replayed_there(self, pending: deque[Entry], owner: str, path: str,
                              parts: list[str]) -> tuple[int, int]:
        """How many of ``parts``, replayed text for ``path``, the log has already, and how many
        characters of the next of them it ends with (a write cut short; 0 if none). The log ends
        with the first of ALL the replayed text owed to it, which may be queued apart (the
        owner's other logs' text between): what of the later entries is there too is taken out
        of ``pending`` as delivered (checking only the entries queued together took the log's
        end for text it lacked when another log's text came between, and wrote it again)."""
        later = [e for e in pending if e[0] == path and e[3]]
        there, torn = await self._already_written(owner, path, parts + [e[1] for e in later])
        if there < len(parts):
            return there, torn
        if there > len(parts):
            done = {id(e) for e in later[:there - len(parts)]}
            self.skipped += len(done)
            self._delivered([r for e in later if id(e) in done for r in e[2]])
            kept = [e for e in pending if id(e) not in done]
            pending.clear()
            pending.extend(kept)
        return len(parts), 0  # (a cut write of a later entry is completed when that entry goes)

    async def _already_written(self, owner: str, path: str, parts: list[str]) -> tuple[int, int]:
        """How many of ``parts`` (in order, each whole events) the log at ``path`` already ends
        with, and how many characters of the part after them it ends with besides: those after
        the log's last whole event, when they begin that part (a write cut short)."""
        most = len("".join(parts).encode())
        try:
            if self.schedd_owned(path):
                tail = await asyncio.get_running_loop().run_in_executor(None, _tail, path, most)
            else:
                tail = await self.shadows.read(owner, path, -most, 0, most)
        except ShadowDied:
            raise
        except (ShadowRefused, OSError):
            return 0, 0  # no such log yet, or unreadable: the append says what is wrong
        there = _ends_with(tail, parts)
        if there:
            return there, 0
        head, cut = _split_cut(tail)  # (a log that ends with none of them may end with a cut write)
        if not cut:
            return 0, 0
        there = _ends_with(head, parts)
        return there, len(cut) if there < len(parts) and parts[there].startswith(cut) else 0

    def _again(self, pending: deque[Entry], path: str, parts: list[str], all_rows: list[tuple[int, ...]],
               why: str) -> None:
        """The text goes again, ahead of the owner's later text (the log keeps its order). The
        shadow may have written it before it died: it goes as replayed, so the log's end is read
        first and what is there is not written twice."""
        self.errors += 1
        self.retries += 1
        log.warning("user log %s: %s; writing it again in %.1f s", path, why, RETRY_SECONDS)
        for text, rows in reversed(list(zip(parts, all_rows, strict=True))):
            pending.appendleft((path, text, rows, True))

    async def written(self, owners: Iterable[str] | None = None, timeout: float | None = None) -> bool:
        """Wait until the text queued so far for ``owners`` (all: None) is written; False if that
        took longer than ``timeout``."""
        wanted = set(self._pending) if owners is None else set(owners)
        tasks = [t for o, t in self._writers.items() if o in wanted and not t.done()]
        if not tasks:
            return True
        done, _ = await asyncio.wait([asyncio.shield(t) for t in tasks], timeout=timeout)
        return len(done) == len(tasks)

    async def close(self, timeout: float = 5.0) -> None:
        """At the stop: what is still queued is written (for a bounded time), then the shadows stop."""
        try:
            if not await self.written(timeout=timeout):
                log.warning("user-log text of %s not written at the stop", ", ".join(sorted(self._pending)))
        finally:
            await cancel_and_wait(list(self._writers.values()), log)
            await self.shadows.stop_all()


def _ends_with(tail: str, parts: list[str]) -> int:
    """The most of ``parts`` (the first n, in order) that ``tail`` ends with."""
    return next((n for n in range(len(parts), 0, -1) if tail.endswith("".join(parts[:n]))), 0)


def _split_cut(tail: str) -> tuple[str, str]:
    """A log's end as what ends with its last whole event (an event's last line is ``...``) and
    what follows it: nothing, or the beginning of an event whose write was cut short."""
    if not tail or tail.endswith("\n...\n"):
        return tail, ""
    end = tail.rfind("\n...\n")
    start = end + len("\n...\n") if end >= 0 else (len("...\n") if tail.startswith("...\n") else 0)
    return tail[:start], tail[start:]


def _tail(path: str, size: int) -> str:
    """The last ``size`` bytes of a log the schedd writes itself (a spooled job's), as text."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode(errors="replace")
