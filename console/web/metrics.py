"""/metrics: the pool's figures in Prometheus's text format, made from the ads at scrape time.

Every figure comes from an ad the daemons already publish (the web daemon holds the newest of
each, `picture.Picture`), so a scrape costs the pool nothing: no daemon is asked anything, and a
pool nobody scrapes pays only for the ads it publishes anyway. Names follow Prometheus's
conventions (``gridbus_`` prefix, base units, ``_total`` for counters, ``_seconds``, ``_bytes``);
labels are bounded: ``daemon`` is a daemon's address (one per daemon of the pool), ``owner`` a
submitter's name (one per user with jobs), ``state`` and ``activity`` HTCondor's fixed sets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from gridbus.console.web.picture import Picture

# Submitter ad attribute -> the job state it counts (HTCondor's condor_q -totals words).
SUBMITTER_STATES = {"IdleJobs": "idle", "RunningJobs": "running", "HeldJobs": "held"}
# Scheduler ad cumulative counters -> metric name.
SCHEDD_COUNTERS = {
    "JobsSubmittedCum": ("gridbus_schedd_jobs_submitted_total", "jobs submitted since the schedd started"),
    "JobsStartedCum": ("gridbus_schedd_jobs_started_total", "job starts since the schedd started"),
    "JobsCompletedCum": ("gridbus_schedd_jobs_completed_total", "jobs completed since the schedd started"),
    "JobsExitedCum": ("gridbus_schedd_jobs_exited_total", "job exits (completed or not) since the schedd started"),
}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class PoolCollector(Collector):
    """A prometheus_client collector over a Picture (registered once; read at every scrape)."""

    def __init__(self, picture: Picture):
        self.picture = picture

    def collect(self) -> Iterator[Metric]:
        yield from self._jobs()
        yield from self._slots()
        yield from self._negotiation()
        yield from self._daemons()
        yield from self._transfers()

    # ------------------------------------------------------------------ jobs
    def _jobs(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("gridbus_jobs", "jobs in the queues by state and owner (Submitter ads)",
                                 labels=["state", "owner"])
        totals: dict[tuple[str, str], float] = {}
        for ad in self.picture.of_type("Submitter"):
            owner = str(ad.get("Owner") or str(ad.get("Name", "")).split("@")[0])
            for attr, state in SUBMITTER_STATES.items():
                value = _num(ad.get(attr))
                if value is not None:
                    totals[(state, owner)] = totals.get((state, owner), 0.0) + value
        for (state, owner), value in sorted(totals.items()):
            jobs.add_metric([state, owner], value)
        yield jobs
        for attr, (name, doc) in SCHEDD_COUNTERS.items():
            family = CounterMetricFamily(name.removesuffix("_total"), doc, labels=["daemon"])
            for ad in self.picture.of_type("Scheduler"):
                value = _num(ad.get(attr))
                if value is not None:
                    family.add_metric([str(ad.get("MyAddress", ad.get("Name")))], value)
            yield family

    # ------------------------------------------------------------------ slots
    def _slots(self) -> Iterator[Metric]:
        slots = GaugeMetricFamily("gridbus_slots", "slots by state and activity (Machine ads; a partitionable "
                                  "slot counts once, its dynamic slots each)", labels=["state", "activity"])
        cpus = GaugeMetricFamily("gridbus_slot_cpus", "cpus of the slots by state (a partitionable slot's "
                                 "are its unclaimed rest)", labels=["state"])
        by_state: Counter[tuple[str, str]] = Counter()
        cpus_by_state: dict[str, float] = {}
        for ad in self.picture.of_type("Machine"):
            state, activity = str(ad.get("State", "Unknown")), str(ad.get("Activity", "Unknown"))
            by_state[(state, activity)] += 1
            cpus_by_state[state] = cpus_by_state.get(state, 0.0) + (_num(ad.get("Cpus")) or 0)
        for labels, value in sorted(by_state.items()):
            slots.add_metric(list(labels), value)
        for state, total in sorted(cpus_by_state.items()):
            cpus.add_metric([state], total)
        yield slots
        yield cpus

    # ------------------------------------------------------------------ negotiation
    def _negotiation(self) -> Iterator[Metric]:
        duration = GaugeMetricFamily("gridbus_negotiation_cycle_duration_seconds",
                                     "length of the last negotiation cycle", labels=["daemon"])
        last = GaugeMetricFamily("gridbus_negotiation_cycle_matches",
                                 "matches made in the last negotiation cycle", labels=["daemon"])
        cycles = CounterMetricFamily("gridbus_negotiation_cycles", "negotiation cycles run", labels=["daemon"])
        matches = CounterMetricFamily("gridbus_negotiation_matches", "matches made", labels=["daemon"])
        for ad in self.picture.of_type("Negotiator"):
            who = [str(ad.get("MyAddress", ad.get("Name")))]
            for family, attr in ((duration, "LastNegotiationCycleDuration0"), (last, "LastNegotiationCycleMatches0"),
                                 (cycles, "NegotiationCycles"), (matches, "TotalMatches")):
                value = _num(ad.get(attr))
                if value is not None:
                    family.add_metric(who, value)
        yield from (duration, last, cycles, matches)

    # ------------------------------------------------------------------ daemons
    def _daemon_ads(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(address, ad) of each daemon: its own ad, a startd's first slot's (its counters)."""
        for mytype, by_name in self.picture.ads.items():
            if mytype == "Submitter":
                continue
            for ad in by_name.values():
                if "RequestsServed" in ad and ad.get("MyAddress"):
                    yield str(ad["MyAddress"]), ad

    def _daemons(self) -> Iterator[Metric]:
        duty = GaugeMetricFamily("gridbus_daemon_duty_cycle_ratio", "share of time the daemon's event loop was "
                                 "busy (DaemonCoreDutyCycle)", labels=["daemon"])
        latency = SummaryMetricFamily("gridbus_rpc_request_duration_seconds", "time the daemon took to "
                                      "answer method calls", labels=["daemon"])
        errors = CounterMetricFamily("gridbus_rpc_errors", "method calls answered with an error", labels=["daemon"])
        inflight = GaugeMetricFamily("gridbus_rpc_requests_in_flight", "method calls being served", labels=["daemon"])
        reconnects = CounterMetricFamily("gridbus_broker_reconnects", "times the daemon reconnected to the broker",
                                         labels=["daemon"])
        up = GaugeMetricFamily("gridbus_daemon_ad_age_seconds", "seconds since the daemon's ad came", labels=["daemon"])
        for address, ad in sorted(self._daemon_ads(), key=lambda pair: pair[0]):
            who = [address]
            if (d := _num(ad.get("DaemonCoreDutyCycle"))) is not None:
                duty.add_metric(who, d)
            served, failed = _num(ad.get("RequestsServed")) or 0, _num(ad.get("RequestsFailed")) or 0
            latency.add_metric(who, count_value=int(served + failed), sum_value=_num(ad.get("RequestsRuntime")) or 0.0)
            errors.add_metric(who, failed)
            inflight.add_metric(who, _num(ad.get("RequestsInFlight")) or 0)
            reconnects.add_metric(who, _num(ad.get("BrokerReconnects")) or 0)
            age = self.picture.age(str(ad.get("MyType")), str(ad.get("Name")))
            if age is not None:
                up.add_metric(who, age)
        yield from (duty, latency, errors, inflight, reconnects, up)

    # ------------------------------------------------------------------ transfers
    def _transfers(self) -> Iterator[Metric]:
        inflight = GaugeMetricFamily("gridbus_transfers_in_flight", "sandbox transfers under way", labels=["daemon"])
        moved = CounterMetricFamily("gridbus_transfer_bytes", "sandbox bytes moved", labels=["daemon", "direction"])
        for address, ad in sorted(self._daemon_ads(), key=lambda pair: pair[0]):
            if "TransfersInFlight" not in ad:
                continue
            inflight.add_metric([address], _num(ad.get("TransfersInFlight")) or 0)
            moved.add_metric([address, "in"], _num(ad.get("TransferInputBytes")) or 0)
            moved.add_metric([address, "out"], _num(ad.get("TransferOutputBytes")) or 0)
        yield inflight
        yield moved
