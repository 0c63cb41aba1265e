"""The collector agent: consumes every ad on gridbus.ads, answers Query and Locate.

(One module over 500 lines: the ingest path and the queries over the same tables read together.)

Ingest is the hot path. The collector handles each message of its ads queue synchronously: decode,
then one dict update per ad, no await per ad; acknowledgements go in batches (one frame for up
to 250 messages), which keeps the broker's flow control without a round trip per message. A message that does not decode, or an ad
without MyType or Name, is refused, counted and logged (at most one log line a second), and the
collector serves on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from functools import partial
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from gridbus import bus, protocol, wire
from gridbus.agent import Agent, Call, method
from gridbus.agent.pacing import Pacer
from gridbus.agents.collector.query import (
    always,
    compile_constraint,
    constraint_text,
    is_trivially_true,
    name_lookup,
    projector,
    select,
)
from gridbus.agents.collector.stats import Rate
from gridbus.agents.collector.store import AdStore, BadAd, Outcome
from gridbus.status import MethodError, Status, forbidden, invalid

# HTCondor's CLASSAD_LIFETIME: what an ad lives when it does not say (seconds).
DEFAULT_CLASSAD_LIFETIME = 900.0
# Ads per partial answer of a streamed Query: big enough to amortise a message, small enough
# that a console never receives a giant one.
QUERY_CHUNK = 500
# Above this many candidate ads a constraint is tested in slices (gridbus/agent/pacing.py).
PACED_SCAN = 2000
# The ads queue keeps at most this many undelivered messages, or bytes (drop-head): while the
# collector is behind, the backlog waits in the broker and only the newest updates matter.
ADS_QUEUE_MAX = 20_000
ADS_QUEUE_MAX_BYTES = 256 * 1024 * 1024
# Ad messages delivered but not yet acknowledged. They are acknowledged together (multiple=True)
# every ADS_ACK_EVERY messages or ADS_ACK_DELAY seconds, so a busy collector holds at most this
# many in memory and the broker, not the collector's heap, absorbs a flood.
ADS_PREFETCH = 1000
ADS_ACK_EVERY = 250
ADS_ACK_DELAY = 0.05
# Seconds of ingest between two returns to the event loop. A delivery of ADS_PREFETCH messages
# arrives in one read of the socket; handled in that one turn of the loop it took 8-12 s in a
# 200,000-slot claim storm, and every Query (the negotiator's, a console's) waited behind it.
INGEST_SLICE = 0.05
# A sender whose messages were lost is asked to advertise everything again at most this often: a
# whole round of a 10,000-slot startd is 8 MB, and one round makes good every loss before it.
READVERTISE_HOLDOFF = 10.0
# ... and only once the ads queue holds fewer messages than this: asked while the queue still
# overflows, the senders' whole rounds would add to the flood and be dropped in their turn.
READVERTISE_BACKLOG = 1000
# Senders whose message sequence is followed (oldest forgotten first past this many).
MAX_SENDERS = 100_000

# Application status of Locate when no such daemon has advertised.
NOT_FOUND = Status.USER + 1

# DaemonType (htcondor2 names) -> MyType of the ad that daemon advertises.
DAEMON_AD_TYPES = {
    "schedd": "Scheduler",
    "scheduler": "Scheduler",
    "startd": "Machine",
    "machine": "Machine",
    "collector": "Collector",
    "negotiator": "Negotiator",
    "master": "Master",
    "daemonmaster": "Master",
    "submitter": "Submitter",
    "generic": "Generic",
}


def _with_secrets(entry: Any, project: Any = None) -> dict[str, Any]:
    """A stored ad merged with its private attributes (a new dict; the stored one is shared),
    projected when ``project`` is given."""
    ad = {**entry.ad, **entry.private} if entry.private else entry.ad
    return project(ad) if project else ad


def _put_bounded(table: dict[str, Any], key: str, value: Any) -> None:
    """``table[key] = value``, forgetting the oldest key past MAX_SENDERS: made-up senders in a
    flood of messages must not grow the collector without end."""
    if key not in table and len(table) >= MAX_SENDERS:
        del table[next(iter(table))]
    table[key] = value


def ads_queue_name(name: str) -> str:
    """The collector's own queue on gridbus.ads (one per collector: each keeps the whole picture)."""
    return f"gridbus.collector.{name}"


class Collector(Agent):
    kind = "collector"
    classes = ("collector",)
    my_type = "Collector"

    def __init__(
        self,
        name: str | None = None,
        url: str | None = None,
        *,
        private_readers: Iterable[str] | None = None,
        classad_lifetime: float = DEFAULT_CLASSAD_LIFETIME,
        query_chunk: int = QUERY_CHUNK,
        update_interval: float = 900.0,  # HTCondor's COLLECTOR_UPDATE_INTERVAL
        **kw: Any,
    ):
        super().__init__(name, url, update_interval=update_interval, **kw)
        readers = [r for r in (private_readers or ()) if r]
        self.private_readers: set[str] = set(readers) or {self.url.user}
        if query_chunk < 1:
            raise ValueError(f"query_chunk must be at least 1, got {query_chunk}")
        self.query_chunk = query_chunk
        self.store = AdStore(classad_lifetime)
        self.update_rate = Rate()
        self.query_rate = Rate()
        self.rejected = 0
        self.messages = 0
        self._reject_log_at = 0.0
        self._rejects_unlogged = 0
        self._unacked: AbstractIncomingMessage | None = None
        self._unacked_count = 0
        self._inbox: deque[AbstractIncomingMessage] = deque()  # delivered, not yet ingested
        self._inbox_filled = asyncio.Event()
        self.ingest_log = logging.getLogger("gridbus.collector.ingest")
        # Per sender (its address): (its DaemonStartTime, the highest message ``seq`` seen). A
        # number skipped is messages the ads queue dropped (drop-head, under a flood): counted as
        # UpdatesLost, and the sender is asked to advertise again (Advertise).
        self._senders: dict[str, tuple[int, int]] = {}
        self._readvertise_asked: dict[str, float] = {}
        self._readvertise_wanted: dict[str, None] = {}  # senders to ask (an ordered set)
        self.updates_lost = 0
        self._refusals_said: set[str] = set()
        self.readvertise_asked = 0

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        assert self._connection is not None
        # A channel of its own, so the ad stream never queues behind method replies.
        channel = await self._connection.channel(publisher_confirms=False)
        await channel.set_qos(prefetch_count=ADS_PREFETCH)
        queue = await channel.declare_queue(
            ads_queue_name(self.name),
            exclusive=True,
            arguments={
                "x-max-length": ADS_QUEUE_MAX,
                "x-max-length-bytes": ADS_QUEUE_MAX_BYTES,
                "x-overflow": "drop-head",
            },
        )
        await queue.bind(bus.ADS, "#")
        await queue.consume(self._on_ads)
        self.connection.watch(queue.name)

    async def on_start(self) -> None:
        self.spawn(self._expire_loop(), "expire")
        self.spawn(self._ingest_loop(), "ingest ads")
        self.spawn(self._ack_loop(), "ack-ads")
        self.spawn(self._readvertise_loop(), "ask to advertise again")
        # Ads published before this collector's queue was bound went nowhere: ask every agent to
        # advertise now rather than at its next interval (the queue is bound in setup()).
        try:
            await self.client.notify(bus.BROADCAST_KEY, "Advertise")
        except Exception:  # the periodic updates still come
            self.log.warning("could not ask the agents to advertise", exc_info=True)

    async def _expire_loop(self) -> None:
        last_sample = 0.0
        while True:
            now = time.time()
            try:
                gone = self.store.expire(now)
            except Exception:  # a bug here must not end expiry for good
                self.log.exception("expiring ads failed")
                gone = []
            if gone:
                self.log.info("expired %d ad(s), e.g. %s %s", len(gone), *gone[0])
            if time.monotonic() - last_sample >= 1.0:
                self.update_rate.sample()
                self.query_rate.sample()
                last_sample = time.monotonic()
            nxt = self.store.next_expiry()
            # Sleep until the next deadline (never more than a second: rates are sampled too).
            delay = 1.0 if nxt is None else min(max(nxt - time.time(), 0.02), 1.0)
            await asyncio.sleep(delay)

    def apply_config(self, cfg: Any, names: Iterable[str] | None = None) -> None:
        """Take the collector's knobs from ``cfg`` (all of them, or just ``names``)."""
        every = names is None
        names = set(names or ())
        if every or "COLLECTOR_PRIVATE_READERS" in names:
            readers = [r for r in cfg.get("COLLECTOR_PRIVATE_READERS") if r]
            self.private_readers = set(readers) or {self.url.user}
        if every or names & {"CLASSAD_LIFETIME", "UPDATE_INTERVAL"}:
            self.store.default_lifetime = float(cfg.get("CLASSAD_LIFETIME")) or 3 * float(cfg.get("UPDATE_INTERVAL"))
        if every or "COLLECTOR_UPDATE_INTERVAL" in names:
            self.update_interval = float(cfg.get("COLLECTOR_UPDATE_INTERVAL"))
            self.lifetime = 3 * self.update_interval

    async def reconfig(self) -> list[str]:
        # The base applies UPDATE_INTERVAL to the agent's own ad; the collector's own ad follows
        # COLLECTOR_UPDATE_INTERVAL instead, and UPDATE_INTERVAL only sets the default lifetime.
        interval, lifetime = self.update_interval, self.lifetime
        changed = await super().reconfig()
        self.update_interval, self.lifetime = interval, lifetime
        self.apply_config(self.config, changed)
        if changed:
            self.log.info("reconfigured: %s", ", ".join(changed))
            self.ads_changed()
        return changed

    # ------------------------------------------------------------------ ingest
    async def _on_ads(self, message: AbstractIncomingMessage) -> None:
        self._inbox.append(message)
        self._inbox_filled.set()

    async def _ingest_loop(self) -> None:
        """Ingest the delivered ad messages in order, in slices of INGEST_SLICE seconds with the
        loop's other work between them; each is acknowledged once ingested."""
        while True:
            await self._inbox_filled.wait()
            self._inbox_filled.clear()
            slice_start = time.monotonic()
            while self._inbox:
                message = self._inbox.popleft()
                refused = protocol.refusal(message.headers, message.app_id or "")
                if refused is None:
                    self.ingest(message.body, message.content_type, message.type, message.routing_key or "")
                else:
                    self.refuse_ad(refused)
                self._unacked = message
                self._unacked_count += 1
                if self._unacked_count >= ADS_ACK_EVERY:
                    await self._ack_ads()
                if time.monotonic() - slice_start >= INGEST_SLICE:
                    await asyncio.sleep(0)
                    slice_start = time.monotonic()

    async def _ack_ads(self) -> None:
        """Acknowledge every ad message handled so far, in one frame."""
        message, self._unacked, self._unacked_count = self._unacked, None, 0
        if message is not None:
            try:
                await message.ack(multiple=True)
            except Exception:  # the channel went away: its deliveries come again after reconnecting
                self.log.warning("could not acknowledge ad messages", exc_info=True)

    async def _ack_loop(self) -> None:
        while True:
            await asyncio.sleep(ADS_ACK_DELAY)
            if self._unacked is not None:
                await self._ack_ads()

    def refuse_ad(self, sentence: str) -> None:
        """An ad message of a protocol version this collector does not take: counted in
        UpdatesRejected, and said in the log once per sentence (a sender repeats itself)."""
        self.rejected += 1
        if sentence not in self._refusals_said:
            self._refusals_said.add(sentence)
            self.log.warning("%s", sentence)

    def ingest(self, body: bytes, content_type: str | None, mtype: str | None, routing_key: str) -> int:
        """Handle one message from gridbus.ads; return how many ads it stored. Never raises."""
        self.messages += 1
        try:
            payload = wire.decode(body, content_type)
        except wire.DecodeError as exc:
            self._refuse(f"undecodable message on {routing_key!r}: {exc}")
            return 0
        try:
            self._follow_sequence(payload, routing_key)
            if mtype == bus.T_INVALIDATE:
                self._invalidate_message(payload, routing_key)
                return 0
            return self._ads_message(payload, routing_key.startswith("private."), routing_key)
        except Exception as exc:  # a bug must not stop the ad stream
            self._refuse(f"message on {routing_key!r} failed: {type(exc).__name__}: {exc}")
            self.log.debug("ingest failure", exc_info=True)
            return 0

    def _follow_sequence(self, payload: Any, routing_key: str) -> None:
        """Count the messages lost before this one from its sender, and mark the sender to be
        asked to advertise again (`due_readvertisements`)."""
        if not isinstance(payload, dict):
            return
        sender, start, seq = payload.get("from"), payload.get("start"), payload.get("seq")
        if not (isinstance(sender, str) and type(start) is int and type(seq) is int):
            return  # not from an advertiser (a tool publishing ads by hand)
        name = sender.partition("@")[2]
        if not name or not routing_key.endswith("." + name.replace(".", "_")):
            return  # a sender must publish under its own name; another's is not followed
        last = self._senders.get(sender)
        if last is not None and (start, seq) <= last:
            return  # a late or repeated message (or one of an earlier start)
        _put_bounded(self._senders, sender, (start, seq))
        if last is None or last[0] != start or seq == last[1] + 1:
            return
        lost = seq - last[1] - 1
        self.updates_lost += lost
        if sender not in self._readvertise_wanted:
            _put_bounded(self._readvertise_wanted, sender, None)
            self.ingest_log.warning("%d ad message(s) from %s lost (the ads queue dropped its oldest); it is "
                                    "asked to advertise again once the queue has drained", lost, sender)

    def due_readvertisements(self, backlog: int | None, now: float) -> list[str]:
        """The senders to ask to advertise again now: none while the ads queue holds
        READVERTISE_BACKLOG messages or more (or its length is unknown), and each at most once
        per READVERTISE_HOLDOFF (one asked sooner stays wanted)."""
        if backlog is None or backlog >= READVERTISE_BACKLOG:
            return []
        due = []
        for sender in list(self._readvertise_wanted):
            if now - self._readvertise_asked.get(sender, -READVERTISE_HOLDOFF) < READVERTISE_HOLDOFF:
                continue
            del self._readvertise_wanted[sender]
            _put_bounded(self._readvertise_asked, sender, now)
            due.append(sender)
        self.readvertise_asked += len(due)
        return due

    async def _readvertise_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if not self._readvertise_wanted:
                continue
            backlog = await self.connection.queue_length(ads_queue_name(self.name))
            for sender in self.due_readvertisements(backlog, time.monotonic()):
                await self._ask_readvertise(sender)

    async def _ask_readvertise(self, address: str) -> None:
        try:
            await self.client.notify(address, "Advertise")
        except Exception:  # the broker is away: the sender's next full round makes good
            self.log.warning("could not ask %s to advertise again", address, exc_info=True)

    def _ads_message(self, payload: Any, private: bool, routing_key: str) -> int:
        ads = payload.get("ads") if isinstance(payload, dict) else None
        if not isinstance(ads, list):
            self._refuse(f"ad message on {routing_key!r} is not a map with an 'ads' list")
            return 0
        now = time.time()
        stored = 0
        store = self.store
        for ad in ads:
            try:
                if private:
                    stored += store.update_private(ad, now)
                elif store.update(ad, now) != Outcome.OUT_OF_ORDER:
                    stored += 1
            except BadAd as exc:
                self._refuse(f"refused an ad on {routing_key!r}: {exc}")
        self.update_rate.add(stored)
        return stored

    def _invalidate_message(self, payload: Any, routing_key: str) -> None:
        if not isinstance(payload, dict) or not isinstance(payload.get("mytype"), str):
            self._refuse(f"invalidation on {routing_key!r} names no 'mytype'")
            return
        mytype = payload["mytype"]
        names = payload.get("names")
        if names is not None:
            if not isinstance(names, list):
                self._refuse(f"invalidation on {routing_key!r}: 'names' must be a list")
                return
            for name in names:
                if isinstance(name, str):
                    self.store.remove(mytype, name)
        constraint = payload.get("constraint")
        if constraint is not None:
            try:
                predicate = compile_constraint(constraint_text(constraint))
            except MethodError as exc:
                self._refuse(f"invalidation on {routing_key!r}: {exc.text}")
                return
            self.store.remove_where(mytype, predicate)

    def _refuse(self, why: str) -> None:
        """Count a refused message or ad; log it, but at most one line a second under a flood."""
        self.rejected += 1
        now = time.monotonic()
        if now - self._reject_log_at >= 1.0:
            more = f" ({self._rejects_unlogged} more refused since the last report)" if self._rejects_unlogged else ""
            self.ingest_log.warning("%s%s", why, more)
            self._reject_log_at = now
            self._rejects_unlogged = 0
        else:
            self._rejects_unlogged += 1

    # ------------------------------------------------------------------ the collector's own ad
    def collector_statistics(self) -> dict[str, Any]:
        s = self.store.stats
        return {
            "AdsHeld": len(self.store),
            "UpdatesTotal": s.updates,
            "UpdatesOutOfOrder": s.out_of_order,
            "UpdatesLost": self.updates_lost,
            "ReadvertisementsAsked": self.readvertise_asked,
            "UpdatesRejected": self.rejected,
            "UpdatesPerSecond": round(self.update_rate.per_second(), 3),
            "QueriesTotal": self.query_rate.total,
            "QueriesPerSecond": round(self.query_rate.per_second(), 3),
            "AdsExpired": s.expired,
            "AdsInvalidated": s.invalidated,
        }

    def object_statistics(self) -> dict[str, Any]:
        return {**super().object_statistics(), **self.collector_statistics()}

    def daemon_ad(self) -> dict[str, Any]:
        ad = {**super().daemon_ad(), **self.collector_statistics()}
        for mytype, count in self.store.counts().items():
            ad[f"{mytype}Ads"] = count  # MachineAds, SchedulerAds, SubmitterAds, ...
        return ad

    # ------------------------------------------------------------------ methods
    def may_read_private(self, user: str | None) -> bool:
        return bool(user) and user in self.private_readers

    @method("collector")
    def Query(
        self, call: Call, AdTypes: list, Constraint: Any, Projection: list, Limit: int, Private: bool
    ) -> Any:
        # Not `async def`: the matches are found here, then the answer is a coroutine when it fits
        # in one message (one reply, the common small-table case) or an async generator streaming
        # chunks (the framework sends one partial message per yield, then a final one).
        self.query_rate.add()
        types = _ad_types(AdTypes)
        if Private and not self.may_read_private(call.user):
            raise forbidden(
                f"{call.user or 'an anonymous caller'} may not read private ads (claim ids): only "
                f"{', '.join(sorted(self.private_readers))} may (COLLECTOR_PRIVATE_READERS)"
            )
        text = constraint_text(Constraint)
        predicate = compile_constraint(text)
        project = projector(Projection)
        entries = self._candidates(types, text)
        shape: Any = project  # what each answered item becomes
        if Private and predicate is always:
            # Every ad with its secrets (the negotiator's query): the entries are chosen here and
            # each merged into one dict a chunk at a time while the answer streams, so the ads
            # queue is read between chunks. Merging 200,000 first kept the collector from its ads
            # for seconds, long enough on a busy machine for its queue to overflow.
            matches: list[Any] = list(select(entries, always, Limit))
            shape = partial(_with_secrets, project=project)
        else:
            ads: Iterable[dict[str, Any]] = (_with_secrets(e) for e in entries) if Private else (e.ad for e in entries)
            if predicate is not always:
                ads = list(ads)  # references: the store replaces an ad's dict on update, never changes one
                if len(ads) > PACED_SCAN:
                    return self._answer_paced(ads, predicate, Limit, project)
            matches = list(select(ads, predicate, Limit))
        if len(matches) <= self.query_chunk:
            return self._answer_whole([shape(a) for a in matches] if shape else matches)
        return self._answer_chunks(matches, shape)

    async def _answer_paced(self, ads: list[dict[str, Any]], predicate: Any, limit: int,
                            project: Any) -> AsyncIterator[dict[str, Any]]:
        """The caller's constraint over many ads, in slices (gridbus/agent/pacing.py): the
        collector goes on ingesting and answering between them, and a scan past its budget ends
        with a sentence."""
        pacer, matches = Pacer(), []
        for ad in ads:
            if pacer.due():
                await pacer.pause()
            if predicate(ad):
                matches.append(ad)
                if len(matches) == limit:
                    break
        async for part in self._answer_chunks(matches, project):
            yield part

    @staticmethod
    async def _answer_whole(ads: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Ads": ads}

    async def _answer_chunks(self, matches: list[Any], shape: Any) -> AsyncIterator[dict[str, Any]]:
        """``matches`` in chunks, each item made an ad by ``shape`` (a projection, the merge with
        its secrets) as its chunk goes out."""
        size = self.query_chunk
        for i in range(0, max(len(matches), 1), size):  # an empty answer is still one part
            chunk = matches[i : i + size]
            yield {"Ads": [shape(a) for a in chunk] if shape else chunk}

    def _candidates(self, types: list[str] | None, text: str) -> Iterable[Any]:
        if not is_trivially_true(text):
            by_name = name_lookup(text)
            if by_name is not None:
                # Name index: the constraint is still tested on each candidate (case rules,
                # =?= exactness), so the index only narrows, never decides.
                return self.store.by_name(by_name[0], types)
        return self.store.entries(types)

    @method("collector")
    async def Locate(self, call: Call, DaemonType: str, Name: str) -> dict[str, Any]:
        if not DaemonType.strip():
            raise invalid("Locate: DaemonType must name a daemon type (Schedd, Startd, Collector, Negotiator, Master)")
        mytype = DAEMON_AD_TYPES.get(DaemonType.strip().lower(), DaemonType.strip())
        entry = None
        if Name:
            found = self.store.by_name(Name, [mytype])
            entry = found[0] if found else None
            if entry is None and mytype == "Machine":
                entry = self._startd_by_host(Name)
        else:
            entry = next(iter(self.store.entries([mytype])), None)
        if entry is None:
            what = f"named {Name!r}" if Name else "at all"
            raise MethodError(
                NOT_FOUND,
                f"{self.address} holds no {mytype} ad {what} (the daemon is down or has not advertised yet)",
            )
        return {"Ad": entry.ad}

    def _startd_by_host(self, name: str) -> Any:
        """A startd is also found by its host (`Machine`) or its agent address `startd@<name>`."""
        lname = name.lower()
        for entry in self.store.entries(["Machine"]):
            ad = entry.ad
            if str(ad.get("Machine", "")).lower() == lname or str(ad.get("MyAddress", "")).lower() == f"startd@{lname}":
                return entry
        return None

    @method("collector")
    async def Invalidate(self, call: Call, AdType: str, Names: list, Constraint: Any) -> dict[str, Any]:
        if not AdType.strip():
            raise invalid("Invalidate: AdType must name the MyType of the ads to forget")
        count = 0
        for name in Names:
            if not isinstance(name, str):
                raise invalid(f"Invalidate: Names must be strings, got {name!r}")
        for name in Names:
            count += self.store.remove(AdType, name)
        text = constraint_text(Constraint)
        if text.lower() not in ("false", "(false)", "0"):
            count += self.store.remove_where(AdType, compile_constraint(text))
        self.log.info("%s invalidated %d %s ad(s)", call.user, count, AdType)
        return {"Count": count}


def _ad_types(raw: list) -> list[str] | None:
    """The asked MyTypes, or None for any."""
    types = []
    for t in raw:
        if not isinstance(t, str) or not t.strip():
            raise invalid(f"Query: AdTypes must list MyType names (strings), got {t!r}")
        # Daemon names (Startd, Schedd) are accepted for their ad types (Machine, Scheduler).
        types.append(DAEMON_AD_TYPES.get(t.strip().lower(), t.strip()))
    if any(t.lower() == "any" for t in types):
        return None
    return types or None

