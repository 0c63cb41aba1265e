"""Job events: to `gridbus.events` (``job.<event>.<owner>``) and to each job's user log.

An event is recorded with the change it reports and leaves once that change is committed: what
each commit batch owes the user logs and the bus is written in the batch's own transaction
(outbox.py) and deleted once delivered, so a crash between the commit and the delivery loses
nothing (the restarted schedd delivers it again: at least once). Each event has an EventId, made
when it is recorded, that stays with it through a replay.

Events leave in the order they happen through one pump task, so a handler never waits for the
broker; user-log text for several jobs of one file goes out in one append. What piled up while the
pump waited leaves batched: the events of one routing key (``job.<event>.<owner>``) go in one
message ``{"event", "time", "source", "Owner", "Events": [event bodies]}`` (docs/protocols.md,
"Events"), as long as that keeps every job's events in their order; a lone event keeps the one-event
form. The pump lingers EVENT_LINGER after an event for others to share its message: with jobs
queued ahead on their claims a report call carries a few jobs' starts and ends, and the calls of
a few milliseconds together make one message per routing key instead of one per call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from gridbus.agents.schedd.outbox import EventRow, LogRow, Outbox
from gridbus.agents.schedd.userlogs import UserLogs

log = logging.getLogger("gridbus.schedd.events")

Publish = Callable[[str, str, str, dict[str, Any]], Awaitable[None]]

MAX_BATCH = 500  # events in one message at most
EVENT_LINGER = 0.05  # seconds the pump waits after an event for company (events are notices, not answers;
# at 10 ms a schedd running short jobs on two slots published an event message per five jobs)
PUBLISH_RETRY = 1.0  # seconds before events the broker did not confirm are sent again

Event = tuple[str, str, dict[str, Any]]  # event, owner, body


def batches(items: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Group queued events by routing key (event, owner) without reordering any job's events.

    An event joins the open group of its key only if no later group holds an event of the same
    job or its cluster's submit: what a consumer sees of one job stays in order. A submit (one per
    cluster, with ProcIds) is a group of its own.
    """
    groups: list[tuple[str, str, list[dict[str, Any]]]] = []
    open_group: dict[tuple[str, str], int] = {}
    last_of_job: dict[tuple[Any, Any], int] = {}
    submit_of_cluster: dict[Any, int] = {}
    for event, owner, body in items:
        cluster = body.get("ClusterId")
        if body.get("ProcIds") is not None:
            groups.append((event, owner, [body]))
            submit_of_cluster[cluster] = len(groups) - 1
            continue
        job = (cluster, body.get("ProcId"))
        must_follow = max(last_of_job.get(job, -1), submit_of_cluster.get(cluster, -1))
        idx = open_group.get((event, owner))
        if idx is None or idx < must_follow or len(groups[idx][2]) >= MAX_BATCH:
            groups.append((event, owner, []))
            idx = open_group[(event, owner)] = len(groups) - 1
        groups[idx][2].append(body)
        last_of_job[job] = max(idx, last_of_job.get(job, -1))
    return groups


def user_log_path(ad: dict[str, Any], attr: str = "UserLog") -> str | None:
    """The job's UserLog (or another log attribute) resolved against its Iwd, or None."""
    path = ad.get(attr)
    if not isinstance(path, str) or not path:
        return None
    if not os.path.isabs(path):
        iwd = ad.get("Iwd")
        if not isinstance(iwd, str):
            return None
        path = os.path.join(iwd, path)
    return path


def user_log_paths(ad: dict[str, Any]) -> list[str]:
    """Where a job's events are written: its UserLog, and a DAG node's DAGManNodesLog (the nodes
    log its DAGMan follows) when that is another file."""
    paths = [p for p in (user_log_path(ad), user_log_path(ad, "DAGManNodesLog")) if p]
    return paths if len(paths) < 2 or paths[0] != paths[1] else paths[:1]


class JobEvents:
    def __init__(self, publish: Publish, source_host: str, user_logs: UserLogs, outbox: Outbox | None = None):
        self._publish = publish
        self.host = source_host
        # Bus events whose batch is on disk, in order, each with its outbox row (0: none).
        self._queue: asyncio.Queue[tuple[str, str, dict[str, Any], int]] | None = None
        self._logs: dict[str, list[str]] = {}
        self._owners: dict[str, str] = {}  # user-log path -> the owner whose events go there
        self._events: list[Event] = []  # bus events recorded since the last take
        # What was recorded before each batch was taken, oldest first: delivered once its batch
        # is on disk, so neither a log nor the bus tells of a change a restart would not find.
        self._sealed: list[tuple[list[LogRow], EventRow]] = []
        # The only writer of user logs: the owners' shadows, so a log is written as its owner,
        # never as the schedd, and never on the event loop.
        self.user_logs = user_logs
        # Where what is owed is kept through a crash (None: nowhere; a crash may lose it).
        self.outbox = outbox
        self._unpublished: dict[int, int] = {}  # outbox row -> its events not confirmed yet
        self.published = 0  # events
        self.messages = 0  # messages they went in
        self.replayed = 0  # outbox rows a restart delivered again

    # ------------------------------------------------------------------ recording
    def emit(self, event: str, ad: dict[str, Any], text: str | None, extra: dict[str, Any] | None = None) -> None:
        """Record one job event: ``text`` (user-log text, if any) and a bus event."""
        if text:
            for path in user_log_paths(ad):
                self._logs.setdefault(path, []).append(text)
                self._owners[path] = str(ad.get("Owner", ""))
        owner = str(ad.get("Owner", "unknown"))
        body = {
            "EventId": uuid.uuid4().hex,
            "GlobalJobId": ad.get("GlobalJobId"),
            "ClusterId": ad.get("ClusterId"),
            "ProcId": ad.get("ProcId"),
            "Owner": owner,
            "JobStatus": ad.get("JobStatus"),
            **(extra or {}),
        }
        self._events.append((event, owner, body))

    def emit_cluster(self, event: str, cluster_ad: dict[str, Any], proc_ids: list[int], texts: list[str]) -> None:
        """A cluster's submit: one user-log append of every proc's event, one bus event for the batch."""
        if texts:
            for path in user_log_paths(cluster_ad):
                self._logs.setdefault(path, []).extend(texts)
                self._owners[path] = str(cluster_ad.get("Owner", ""))
        owner = str(cluster_ad.get("Owner", "unknown"))
        body = {
            "EventId": uuid.uuid4().hex,
            "ClusterId": cluster_ad.get("ClusterId"),
            "ProcId": proc_ids[0] if proc_ids else None,
            "ProcIds": proc_ids,
            "Owner": owner,
            "GlobalJobId": None,
        }
        self._events.append((event, owner, body))

    def seal(self) -> None:
        """What was recorded so far belongs to the batch being taken (JobQueue.on_take); with an
        outbox, it is written in that batch's transaction (and delivered rows are deleted there)."""
        logs = [(self._owners.get(path, ""), path, "".join(texts)) for path, texts in self._logs.items()]
        events, self._events = self._events, []
        self._logs, self._owners = {}, {}
        if self.outbox is not None:
            log_rows, event_row = self.outbox.record(logs, events)
        else:
            log_rows, event_row = [(0, *item) for item in logs], (0, events) if events else None
        if log_rows or event_row:
            self._sealed.append((log_rows, event_row or (0, [])))

    def write_logs(self) -> None:
        """Deliver what the batches now on disk recorded: each user log's text in one append, the
        bus events to the pump (JobQueue.on_flush: a batch that failed stays sealed and goes with
        the next one)."""
        sealed, self._sealed = self._sealed, []
        for log_rows, event_row in sealed:
            self._deliver(log_rows, [event_row] if event_row[1] else [])

    def replay(self) -> None:
        """At the start, before anything new: deliver again what a previous run left owed."""
        if self.outbox is None:
            return
        log_rows, event_rows = self.outbox.left_over()
        self.replayed = len(log_rows) + len(event_rows)
        if self.replayed:
            log.warning("delivering again %d user-log append(s) and %d event batch(es) a previous run left "
                        "owed (a log's text already there is not written twice; bus events may come twice)",
                        len(log_rows), len(event_rows))
        self._deliver(log_rows, event_rows, replayed=True)

    def _deliver(self, log_rows: list[LogRow], event_rows: Iterable[EventRow], replayed: bool = False) -> None:
        if log_rows:
            self.user_logs.write(log_rows, replayed=replayed)
        for seq, events in event_rows:
            if seq:
                self._unpublished[seq] = len(events)
            for event, owner, body in events:
                self._enqueue(event, owner, body, seq)

    def _enqueue(self, event: str, owner: str, body: dict[str, Any], seq: int) -> None:
        if self._queue is not None:
            self._queue.put_nowait((event, owner, body, seq))

    def _confirmed(self, seqs: list[int]) -> None:
        done = []
        for seq in seqs:
            if seq and seq in self._unpublished:
                self._unpublished[seq] -= 1
                if self._unpublished[seq] <= 0:
                    del self._unpublished[seq]
                    done.append(seq)
        if done and self.outbox is not None:
            self.outbox.delivered_rows(done)

    # ------------------------------------------------------------------ the pump
    def start(self) -> None:
        self._queue = asyncio.Queue()

    async def pump(self) -> None:
        """Publish in order, each message confirmed by the broker; what is not confirmed is sent
        again (after PUBLISH_RETRY) before anything later, so a job's events never overtake each other."""
        assert self._queue is not None
        queue = self._queue
        pending: list[tuple[str, str, dict[str, Any], int]] = []
        while True:
            if not pending:
                pending.append(await queue.get())
                if EVENT_LINGER > 0:
                    await asyncio.sleep(EVENT_LINGER)
            while not queue.empty():
                pending.append(queue.get_nowait())
            items, pending = pending, []
            seq_of = {id(body): seq for _e, _o, body, seq in items}
            groups = batches([(e, o, b) for e, o, b, _s in items])
            sent = 0
            for n, (event, owner, bodies) in enumerate(groups):
                body = bodies[0] if len(bodies) == 1 else {"Owner": owner, "Events": bodies}
                try:
                    await self._publish("job", event, owner, body)
                except Exception:
                    log.warning("publishing %d job event(s) %s failed; sending them again", len(bodies), event,
                                exc_info=True)
                    # This group and every later one go again, in the same order.
                    again = {id(b) for _e, _o, group in groups[n:] for b in group}
                    pending = [item for item in items if id(item[2]) in again]
                    break
                self.published += len(bodies)
                self.messages += 1
                sent += len(bodies)
                self._confirmed([seq_of[id(b)] for b in bodies])
            for _ in range(sent):
                queue.task_done()
            if pending:
                await asyncio.sleep(PUBLISH_RETRY)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until every recorded bus event is published (graceful stop, tests)."""
        if self._queue is None:
            return
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            log.warning("%d job events were not published in time", self._queue.qsize())
