"""The web daemon's picture of the pool (ads, invalidations, job events) and the Prometheus
figures made from it, without a broker."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gridbus.agents.master.agent import daemon_module
from gridbus.config import Config
from gridbus.console.web.agent import parse_address
from gridbus.console.web.metrics import PoolCollector
from gridbus.console.web.picture import EVENTS_PER_JOB, Picture
from gridbus.console.web.server import log_history
from gridbus.eventlog import writer


def pool_ads() -> list[dict]:
    return [
        {"MyType": "Machine", "Name": "slot1@n1", "MyAddress": "startd@n1", "State": "Claimed", "Activity": "Busy",
         "Cpus": 1, "DaemonCoreDutyCycle": 0.25, "RequestsServed": 10, "RequestsFailed": 2, "RequestsRuntime": 0.5,
         "RequestsInFlight": 1, "BrokerReconnects": 1, "TransfersInFlight": 1, "TransferInputBytes": 4096,
         "TransferOutputBytes": 100},
        {"MyType": "Machine", "Name": "slot2@n1", "MyAddress": "startd@n1", "State": "Unclaimed", "Activity": "Idle",
         "Cpus": 1, "DaemonCoreDutyCycle": 0.25},
        {"MyType": "Submitter", "Name": "alice@s", "Owner": "alice", "IdleJobs": 3, "RunningJobs": 1, "HeldJobs": 0},
        {"MyType": "Submitter", "Name": "bob@s", "Owner": "bob", "IdleJobs": 0, "RunningJobs": 0, "HeldJobs": 2},
        {"MyType": "Scheduler", "Name": "s", "MyAddress": "schedd@s", "JobsCompletedCum": 7, "JobsSubmittedCum": 13,
         "JobsStartedCum": 9, "JobsExitedCum": 8, "RequestsServed": 40, "RequestsFailed": 0, "RequestsRuntime": 2.0,
         "DaemonCoreDutyCycle": 0.1},
        {"MyType": "Negotiator", "Name": "n", "MyAddress": "negotiator@n", "NegotiationCycles": 5, "TotalMatches": 9,
         "LastNegotiationCycleDuration0": 0.031, "LastNegotiationCycleMatches0": 2, "RequestsServed": 3,
         "DaemonCoreDutyCycle": 0.05},
    ]


def samples(picture: Picture) -> dict[tuple[str, frozenset], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PoolCollector(picture))
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_from_the_ads():
    picture = Picture(clock=lambda: 100.0)
    picture.take_ads(pool_ads())
    got = samples(picture)
    assert got[("gridbus_jobs", frozenset({("state", "idle"), ("owner", "alice")}))] == 3
    assert got[("gridbus_jobs", frozenset({("state", "held"), ("owner", "bob")}))] == 2
    assert got[("gridbus_slots", frozenset({("state", "Claimed"), ("activity", "Busy")}))] == 1
    assert got[("gridbus_slot_cpus", frozenset({("state", "Unclaimed")}))] == 1
    assert got[("gridbus_schedd_jobs_completed_total", frozenset({("daemon", "schedd@s")}))] == 7
    assert got[("gridbus_negotiation_cycle_duration_seconds", frozenset({("daemon", "negotiator@n")}))] == 0.031
    assert got[("gridbus_negotiation_matches_total", frozenset({("daemon", "negotiator@n")}))] == 9
    startd = frozenset({("daemon", "startd@n1")})
    # The startd is one daemon (its first slot's ad carries its counters), not one per slot.
    assert got[("gridbus_rpc_request_duration_seconds_count", startd)] == 12
    assert got[("gridbus_rpc_request_duration_seconds_sum", startd)] == 0.5
    assert got[("gridbus_rpc_errors_total", startd)] == 2
    assert got[("gridbus_broker_reconnects_total", startd)] == 1
    assert got[("gridbus_daemon_duty_cycle_ratio", startd)] == 0.25
    assert got[("gridbus_transfers_in_flight", startd)] == 1
    assert got[("gridbus_transfer_bytes_total", startd | {("direction", "in")})] == 4096
    assert sum(1 for (name, labels) in got if name == "gridbus_daemon_duty_cycle_ratio") == 3


def test_metric_names_follow_prometheus_conventions():
    picture = Picture()
    picture.take_ads(pool_ads())
    for name, labels in samples(picture):
        assert name.startswith("gridbus_") and name == name.lower(), name
        assert set(dict(labels)) <= {"daemon", "owner", "state", "activity", "direction", "quantile"}, name


def test_invalidation_and_private_ads():
    picture = Picture()
    heard: list[set[str]] = []
    picture.listeners.append(heard.append)
    picture.take_ads(pool_ads())
    assert {"slots", "queue", "users", "daemons"} <= heard[-1]
    picture.take_invalidation("Machine", ["slot2@n1", "never-seen"])
    assert [ad["Name"] for ad in picture.of_type("Machine")] == ["slot1@n1"]
    assert heard[-1] == {"slots", "daemons"}
    picture.take_ads([{"MyType": "Machine", "Name": "slot3@n1", "ClaimId": "secret"}])
    assert [ad["Name"] for ad in picture.of_type("Machine")] == ["slot1@n1"]


def test_job_events_lone_batched_and_repeated():
    picture = Picture()
    heard: list[set[str]] = []
    picture.listeners.append(heard.append)
    picture.take_event({"event": "submit", "time": 1.0, "source": "schedd@s", "ClusterId": 4, "ProcIds": [0, 1],
                        "Owner": "alice", "EventId": "a"})
    assert heard[-1] == {"queue", "job:schedd@s/4.0", "job:schedd@s/4.1"}
    batch = {"event": "execute", "time": 2.0, "source": "schedd@s", "Owner": "alice",
             "Events": [{"ClusterId": 4, "ProcId": 0, "EventId": "b"}, {"ClusterId": 4, "ProcId": 1, "EventId": "c"}]}
    picture.take_event(batch)
    picture.take_event(batch)  # delivered again (at least once): dropped by EventId
    assert [e["event"] for e in picture.job_events("schedd@s", 4, 0)] == ["submit", "execute"]
    assert [e["event"] for e in picture.job_events("schedd@s", 4, 1)] == ["submit", "execute"]
    # A daemon event changes no job.
    assert picture.take_event({"event": "start", "source": "startd@n1", "address": "startd@n1"}) == set()
    for i in range(EVENTS_PER_JOB + 5):
        picture.take_event({"event": "image_size", "source": "schedd@s", "ClusterId": 4, "ProcId": 0,
                            "EventId": f"i{i}"})
    assert len(picture.job_events("schedd@s", 4, 0)) == EVENTS_PER_JOB


def test_daemon_rows():
    picture = Picture(clock=lambda: 50.0)
    picture.take_ads(pool_ads())
    rows = {r["Address"]: r for r in picture.daemons()}
    assert sorted(rows) == ["negotiator@n", "schedd@s", "startd@n1"]
    assert rows["startd@n1"]["MyType"] == "Startd" and rows["startd@n1"]["RequestsServed"] == 10


def test_web_address_and_the_masters_module():
    assert parse_address("127.0.0.1:9680") == ("127.0.0.1", 9680)
    assert parse_address("[::1]:0") == ("::1", 0)
    for bad in ("9680", "host:port", "h:70000"):
        with pytest.raises(ValueError, match="WEB_ADDRESS"):
            parse_address(bad)
    cfg = Config.load(None, env={})
    assert daemon_module(cfg, "WEB") == "gridbus.console.web"
    assert daemon_module(cfg, "SCHEDD") == "gridbus.agents.schedd"
    assert "WEB" in cfg.get("DAEMON_LIST")


def test_core_does_not_import_the_web_console():
    import ast
    from pathlib import Path

    core = Path(__file__).resolve().parents[3] / "gridbus"
    for path in core.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n.startswith("gridbus.console.web") for n in names), f"{path} imports the web console"


def test_a_jobs_history_is_its_own_events_from_its_user_log_once_each():
    t = 1796000000
    text = "".join([
        writer.submit(7, 0, t, "schedd@host"),
        writer.submit(7, 1, t, "schedd@host"),
        writer.execute(7, 0, t + 1, "startd@node", "slot1@node"),
        writer.execute(7, 0, t + 1, "startd@node", "slot1@node"),  # written again after a crash
        writer.terminated(7, 1, t + 2, exit_code=0),
        writer.terminated(7, 0, t + 3, exit_code=0),
        "005 (007.000.000) 2026-11-29 1",  # a torn last write
    ])
    assert log_history(text, 7, 0) == [{"event": "submit", "time": t}, {"event": "execute", "time": t + 1},
                                       {"event": "job_terminated", "time": t + 3}]
    assert [e["event"] for e in log_history(text, 7, 1)] == ["submit", "job_terminated"]
    assert log_history("", 7, 0) == []
