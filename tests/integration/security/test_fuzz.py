"""Fuzz every agent of a pool with hostile requests from the schema (fuzzing.py): 20,000 each, sent
without waiting for answers; afterwards every agent answers a normal call, no agent's RSS passed
the bound below, and the job queue is what it was."""

from __future__ import annotations

import os
import time

import pytest

from gridbus.classad import ExprTree
from tests.e2e.pool import Pool
from tests.integration.security import fuzzing

pytestmark = pytest.mark.broker

PER_AGENT = int(os.environ.get("GRIDBUS_FUZZ_PER_AGENT", "20000"))
DISTINCT = int(os.environ.get("GRIDBUS_FUZZ_DISTINCT", "400"))  # distinct requests drawn per agent; the rest are sent again, in another order
RSS_BOUND_MB = 400  # no agent's resident memory may pass this after the fuzz
AGENTS = {"collector@c": "collector", "negotiator@n": "negotiator", "schedd@s": "schedd",
          "startd@a": "startd", "master@m": "master"}
NORMAL = {"collector": ("Query", {"AdTypes": ["Collector"], "Limit": 1}), "negotiator": ("GetLimits", {}),
          "schedd": ("Query", {"Constraint": "true"}), "startd": ("GetSlots", {}),
          "master": ("RemoteParam", {"Names": ["UPDATE_INTERVAL"]})}


def fuzz_pool(pool: Pool, per_agent: int, seed: int = 14) -> dict[str, dict[str, float]]:
    """Send ``per_agent`` hostile requests to each agent of ``pool``; return figures per agent."""
    corpora = {a: fuzzing.corpus(kind, min(DISTINCT, per_agent), seed) for a, kind in AGENTS.items()}
    monsters = fuzzing.monsters()
    figures: dict[str, dict[str, float]] = {}
    sender = fuzzing.Sender(pool.url)
    try:
        started = time.monotonic()
        for address, reqs in corpora.items():
            t0 = time.monotonic()
            n = 0
            while n < per_agent:
                for req in reqs:
                    if n >= per_agent:
                        break
                    sender.send(address, req)
                    n += 1
                    if n % 5000 == 0:  # a few of the monsters among the rest
                        for m in monsters:
                            sender.send(address, m)
                            n += 1
            figures[address] = {"sent": n, "publish_s": time.monotonic() - t0}
        s = pool.console()
        for address, kind in AGENTS.items():
            method, args = NORMAL[kind]
            waited = fuzzing.wait_answering(
                lambda a=address, m=method, x=args: s.call(a, m, x, timeout=10).check(m), 600)
            figures[address]["answered_after_s"] = time.monotonic() - started
            figures[address]["waited_s"] = waited
            figures[address]["rss_mb"] = fuzzing.rss_kb(pool.procs[address].pid) / 1024
    finally:
        sender.close()
    return figures


def test_agents_survive_hostile_requests_and_keep_their_state(make_pool):
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "a", GRIDBUS_NUM_CPUS="2", GRIDBUS_NUM_SLOTS="2", GRIDBUS_MEMORY="1024")
    pool.start("master", "m", GRIDBUS_DAEMON_LIST="MASTER")
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
    pool.wait_slots(2)
    s = pool.console()
    ad = {"Cmd": "/bin/true", "Iwd": "/tmp", "JobUniverse": 5, "Requirements": ExprTree("false"),
          "RequestCpus": 1, "RequestMemory": 16}
    s.call("schedd@s", "Submit", {"Ad": ad, "Count": 3}).check("Submit")
    attrs = ["ClusterId", "ProcId", "JobStatus", "Owner", "Cmd", "Requirements", "HoldReason"]
    before = sorted(map(str, pool.jobs("schedd@s", "true", attrs)))

    figures = fuzz_pool(pool, PER_AGENT)

    for address, f in figures.items():
        assert f["sent"] >= PER_AGENT
        assert pool.procs[address].poll() is None, f"{address} died"
        assert f["rss_mb"] < RSS_BOUND_MB, f"{address}: {f['rss_mb']:.0f} MB resident after the fuzz"
    assert sorted(map(str, pool.jobs("schedd@s", "true", attrs))) == before
    # A bound the fuzz hit is still answered with a sentence naming it, quoting a prefix only.
    r = s.call("collector@c", "Query", {"Constraint": fuzzing.HOSTILE_EXPRESSIONS[1]}, timeout=20)
    assert r.status == 4 and "match budget" in r.text and len(r.text) < 400, r.text
    print({a: {k: round(v, 1) for k, v in f.items()} for a, f in figures.items()})
