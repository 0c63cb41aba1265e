"""The pool as the web daemon sees it: the newest public ad of every daemon, kept from gridbus.ads,
and the recent events of each job, kept from gridbus.events; and who wants to hear of a change.

As HTCondor's gangliad reads the collector, the web daemon reads the bus: it binds a queue of its
own to the ads exchange (and to the job events of the owners whose jobs a page shows), so its
pages and /metrics cost the pool nothing more than one more consumer of messages already
published. The picture is plain data (no I/O): the agent
feeds it messages, the metrics and the pages read it.

Topics name what changed, so a page hears only of what it shows: ``slots`` (Machine ads),
``daemons`` (any daemon's ad), ``users`` (Submitter and Negotiator ads), ``queue`` (Submitter and
Scheduler ads, job events); ``job:<schedd>/<cluster>.<proc>`` (that job's events).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

# The events kept per job, and the jobs kept (least recently changed forgotten first): a console
# shows a job's recent history; the user log keeps all of it.
EVENTS_PER_JOB = 50
JOBS_KEPT = 20_000

# The MyTypes whose ads the web daemon binds (never ``private.*``: claim ids stay between the
# startd, the negotiator and the schedd).
AD_TYPES = ("Machine", "Scheduler", "Submitter", "Negotiator", "Collector", "Master", "Web")


def topics_of_ad(mytype: str) -> tuple[str, ...]:
    if mytype == "Machine":
        return ("slots", "daemons")
    if mytype == "Submitter":
        return ("users", "queue")
    if mytype == "Negotiator":
        return ("users", "daemons")
    if mytype == "Scheduler":
        return ("queue", "daemons")
    return ("daemons",)


def job_key(schedd: str, cluster: Any, proc: Any) -> str:
    return f"{schedd}/{cluster}.{proc}"


class Picture:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.ads: dict[str, dict[str, dict[str, Any]]] = {}  # MyType -> Name -> ad
        self.received: dict[tuple[str, str], float] = {}  # (MyType, Name) -> when its ad came
        self.events: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self.seen_event_ids: deque[str] = deque(maxlen=10_000)  # at-least-once: a repeat is dropped
        self._seen: set[str] = set()
        self.listeners: list[Callable[[set[str]], None]] = []
        self.messages = 0  # ad and event messages taken

    # ------------------------------------------------------------------ what comes in
    def take_ads(self, ads: Iterable[dict[str, Any]]) -> set[str]:
        """Ads published on gridbus.ads (one message's ``ads``); returns the topics changed."""
        changed: set[str] = set()
        now = self.clock()
        for ad in ads:
            if not isinstance(ad, dict):
                continue
            mytype, name = str(ad.get("MyType", "")), ad.get("Name")
            if not mytype or name is None or mytype.lower().startswith("private"):
                continue
            if "ClaimId" in ad or "Capability" in ad:
                continue  # (a private ad never reaches this queue; if one did, it is not kept)
            self.ads.setdefault(mytype, {})[str(name)] = ad
            self.received[(mytype, str(name))] = now
            changed.update(topics_of_ad(mytype))
        self.messages += 1
        self._tell(changed)
        return changed

    def take_invalidation(self, mytype: str, names: Iterable[str]) -> set[str]:
        known = self.ads.get(str(mytype), {})
        gone = [n for n in names if known.pop(str(n), None) is not None]
        for n in gone:
            self.received.pop((str(mytype), str(n)), None)
        self.messages += 1
        changed = set(topics_of_ad(str(mytype))) if gone else set()
        self._tell(changed)
        return changed

    def take_event(self, body: dict[str, Any]) -> set[str]:
        """One message of gridbus.events: a lone event, or a batch (``Events``)."""
        self.messages += 1
        if not isinstance(body, dict):
            return set()
        if str(body.get("event", "")) and "Events" not in body and "ClusterId" not in body:
            return set()  # a daemon event: the ads say the rest
        source = str(body.get("source", ""))
        common = {k: body[k] for k in ("event", "time", "source", "Owner") if k in body}
        bodies = body["Events"] if isinstance(body.get("Events"), list) else [body]
        changed: set[str] = set()
        for one in bodies:
            if not isinstance(one, dict):
                continue
            event = {**common, **one}
            eid = event.get("EventId")
            if isinstance(eid, str):
                if eid in self._seen:
                    continue
                if len(self.seen_event_ids) == self.seen_event_ids.maxlen:
                    self._seen.discard(self.seen_event_ids[0])
                self.seen_event_ids.append(eid)
                self._seen.add(eid)
            listed = event.get("ProcIds")
            procs = listed if isinstance(listed, list) else [event.get("ProcId")]
            for proc in procs:
                key = job_key(source, event.get("ClusterId"), proc)
                self._remember(key, {**event, "ProcId": proc})
                changed.add(f"job:{key}")
            changed.add("queue")
        self._tell(changed)
        return changed

    def _remember(self, key: str, event: dict[str, Any]) -> None:
        kept = self.events.get(key)
        if kept is None:
            kept = self.events[key] = deque(maxlen=EVENTS_PER_JOB)
            while len(self.events) > JOBS_KEPT:
                self.events.popitem(last=False)
        else:
            self.events.move_to_end(key)
        kept.append(event)

    def _tell(self, changed: set[str]) -> None:
        if changed:
            for listener in list(self.listeners):
                listener(changed)

    # ------------------------------------------------------------------ what goes out
    def of_type(self, mytype: str) -> list[dict[str, Any]]:
        return sorted(self.ads.get(mytype, {}).values(), key=lambda ad: str(ad.get("Name")))

    def job_events(self, schedd: str, cluster: int, proc: int) -> list[dict[str, Any]]:
        return list(self.events.get(job_key(schedd, cluster, proc), ()))

    def age(self, mytype: str, name: str) -> float | None:
        """Seconds since the ad of (MyType, Name) came, or None."""
        when = self.received.get((mytype, name))
        return None if when is None else max(0.0, self.clock() - when)

    def daemons(self) -> list[dict[str, Any]]:
        """One row per daemon: its address, type, duty cycle, request counters and the age of its
        ad. A startd is known by its first slot's ad (which carries its counters)."""
        rows: dict[str, dict[str, Any]] = {}
        for mytype, by_name in self.ads.items():
            if mytype == "Submitter":
                continue
            for name, ad in by_name.items():
                address = str(ad.get("MyAddress", ""))
                # (a startd's slots share its address; the one with the counters wins)
                if not address or (address in rows and "RequestsServed" not in ad):
                    continue
                rows[address] = {
                    "Address": address, "MyType": "Startd" if mytype == "Machine" else mytype,
                    "Machine": ad.get("Machine", ""), "DaemonStartTime": ad.get("DaemonStartTime"),
                    "DutyCycle": ad.get("DaemonCoreDutyCycle"), "RequestsServed": ad.get("RequestsServed"),
                    "RequestsFailed": ad.get("RequestsFailed"), "BrokerReconnects": ad.get("BrokerReconnects"),
                    "AdAge": self.age(mytype, name), "Lifetime": ad.get("ClassAdLifetime"),
                }
        return sorted(rows.values(), key=lambda r: r["Address"])
