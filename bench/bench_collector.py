"""Collector benchmark: ingest rate, small-table queries per second, a 1,000-ad constraint query.

Setup: a collector process (``python -m gridbus.agents.collector``) on a vhost of its own; a load
generator process publishes Machine ads (500 per message, as a startd or a simulator does) until
100,000 are held, then keeps publishing rounds of updates. Figures:

- ingest: ads per second the collector absorbs, sustained over whole rounds of 100,000 updates
  (measured from the collector's own UpdatesTotal counter, not from what was sent);
- small-table queries/s: sequential Query calls for the Scheduler ads (20 of them) from one
  console, with the 100,000 Machine ads held; and the total of four such consoles at once;
- constraint query: wall time of one Query whose constraint selects 1,000 of the 100,000 Machine
  ads, the whole streamed answer received and decoded (median of 5).

Peers, quoted from HTCondor: 167 ads/s is the baseline advertisement rate of a 10,000-node pool
(the study of advertisement traffic in a Condor pool) and 24.4 small-table queries/s is HTCondor's collector with 100,000 machine ads after
its no-fork change (HTCondor Week 2015's "What's new in HTCondor"). Run: ``.venv/bin/python bench/bench_collector.py [--quick]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

HTCONDOR_INGEST = 167.0  # ads/s, the study of advertisement traffic in a Condor pool: 10K 4-core nodes, one ad each per 5 minutes
HTCONDOR_SMALL_QPS = 24.4  # queries/s, HTCondor Week 2015's "What's new in HTCondor": HTCondor collector with 100k machine ads
GOAL_INGEST = 10_000.0
GOAL_QPS = 250.0
GOAL_QUERY_S = 0.5
BATCH = 500
SELECTED = 1_000


def machine_ad(i: int, groups: int) -> dict[str, Any]:
    """A Machine ad with the attributes a real startd sends most (about 40)."""
    node, slot = divmod(i, 8)
    host = f"node{node}.bench.pool"
    return {
        "MyType": "Machine", "TargetType": "Job", "Name": f"slot{slot + 1}@{host}", "Machine": host,
        "MyAddress": f"startd@{host}", "SlotID": slot + 1, "SlotType": "Static", "PartitionableSlot": False,
        "Cpus": 1 + i % 4, "Memory": 2048 * (1 + i % 8), "Disk": 10_000_000 + i, "TotalCpus": 8,
        "TotalMemory": 65536, "TotalDisk": 800_000_000, "TotalSlots": 8, "DetectedCpus": 8,
        "DetectedMemory": 65536, "Arch": "X86_64", "OpSys": "LINUX", "OpSysAndVer": "AlmaLinux9",
        "State": ("Unclaimed", "Claimed")[i % 2], "Activity": ("Idle", "Busy")[i % 2],
        "EnteredCurrentState": 1_700_000_000 + i, "EnteredCurrentActivity": 1_700_000_000 + i,
        "LoadAvg": (i % 100) / 100.0, "CondorLoadAvg": 0.0, "TotalLoadAvg": 0.5, "KeyboardIdle": 3600 + i,
        "ConsoleIdle": 3600 + i, "UidDomain": "bench.pool", "FileSystemDomain": "bench.pool",
        "HasFileTransfer": True, "Start": True, "Rank": 0.0, "CurrentRank": 0.0,
        "CondorVersion": "$CondorVersion: 25.14.1 $", "CondorPlatform": "$CondorPlatform: x86_64 $",
        "StartdIpAddr": f"<10.{node // 65536 % 256}.{node // 256 % 256}.{node % 256}:9618>",
        "BenchGroup": i % groups,  # `BenchGroup == 7` selects exactly 1,000 ads
        "UpdateSequenceNumber": 1, "DaemonStartTime": 1_700_000_000, "ClassAdLifetime": 3600,
    }


def marker(k: int) -> dict[str, Any]:
    """The ad sent after round ``k``: once the collector holds it, it has absorbed the round
    (one queue, delivered in order)."""
    return {"MyType": "BenchMarker", "Name": f"round{k}", "DaemonStartTime": 1, "UpdateSequenceNumber": k}


def generate(url: str, n: int, rounds: int, ready: Any) -> None:
    """The load generator (another process): ``rounds`` rounds of ``n`` ads, 500 per message."""
    import pika

    from gridbus import bus, wire

    groups = max(1, n // SELECTED)
    bodies = [
        wire.encode({"ads": [machine_ad(i, groups) for i in range(start, min(n, start + BATCH))]})
        for start in range(0, n, BATCH)
    ]
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    props = pika.BasicProperties(content_type=wire.MSGPACK, type=bus.T_AD)
    ready.set()
    for k in range(rounds):
        for body in bodies:  # the same updates again: the collector does the same work per ad
            ch.basic_publish(bus.ADS, "machine.bench", body, props)
        ch.basic_publish(bus.ADS, "benchmarker.bench", wire.encode({"ads": [marker(k)]}), props)
    conn.close()


def query_client(url: str, address: str, span: float, start: Any, out: Any) -> None:
    """One console process asking for the Scheduler ads, one query after the other."""
    from gridbus.console.session import Session

    with Session(url, timeout=30) as session:
        args = {"AdTypes": ["Scheduler"], "Constraint": "true"}
        session.call(address, "Query", args)  # connected and warm before the clock starts
        start.wait(60)
        count, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < span:
            r = session.call(address, "Query", args)
            if r.status != 0 or len(r.Ads) != 20:
                raise RuntimeError(f"small-table query failed: {r.text}")
            count += 1
        out.put(count / (time.monotonic() - t0))


def _rounds_seen(session: Any, address: str, rounds: int, timeout: float) -> list[float]:
    """When each round's marker was first held (monotonic times), polling every 10 ms."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    args = {"AdTypes": ["BenchMarker"], "Projection": ["Name"]}
    while len(seen) < rounds:
        r = session.call(address, "Query", args, timeout=timeout)
        now = time.monotonic()
        for ad in r.outArgs.get("Ads", []):
            seen.setdefault(int(ad["Name"].removeprefix("round")), now)
        if now > deadline:
            raise RuntimeError(f"the collector absorbed {len(seen)} of {rounds} rounds within {timeout} s")
        time.sleep(0.01)
    return [seen[k] for k in range(rounds)]


def run(quick: bool = False) -> dict[str, Any]:
    from gridbus import bus, wire
    from gridbus.bus import BrokerURL
    from gridbus.console.session import Session
    from gridbus.mgmt import Management

    n = 20_000 if quick else 100_000
    rounds = 1 if quick else 2  # measured rounds, after the one that fills the table
    base = BrokerURL(os.environ.get("GRIDBUS_URL") or bus.DEFAULT_URL)
    mgmt = Management.for_broker(base)
    vhost = f"gridbus-bench-collector-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, base.user, ".*", ".*", ".*")
    url = base.with_vhost(vhost).url
    name = "bench"
    address = f"collector@{name}"
    env = {**os.environ, "GRIDBUS_COLLECTOR_UPDATE_INTERVAL": "2"}
    collector = subprocess.Popen(
        [sys.executable, "-m", "gridbus.agents.collector", "--name", name, "--url", url],
        env=env, stderr=subprocess.DEVNULL,
    )
    results: dict[str, Any] = {"ads_held": n}
    try:
        import pika

        # Declare the exchanges as every agent does, so the console can publish before the
        # collector is up (publishing to a missing exchange closes the channel).
        conn = pika.BlockingConnection(pika.URLParameters(url))
        for exchange, kind in bus.EXCHANGES:
            conn.channel().exchange_declare(exchange, kind, durable=True)
        conn.close()
        with Session(url, timeout=60) as session:
            deadline = time.monotonic() + 30
            while not session.query(address, "collector", {}, timeout=1):
                if time.monotonic() > deadline or collector.poll() is not None:
                    raise RuntimeError("the collector did not start")

            ctx = multiprocessing.get_context("spawn")
            ready = ctx.Event()
            gen = ctx.Process(target=generate, args=(url, n, 1 + rounds, ready))
            gen.start()
            if not ready.wait(120):
                raise RuntimeError("the load generator did not get ready")
            start = time.monotonic()
            seen = _rounds_seen(session, address, 1 + rounds, 300)
            gen.join(60)
            results["fill_ads_per_s"] = round(n / (seen[0] - start))
            results["ingest_ads_per_s"] = round(n * rounds / (seen[-1] - seen[0]))

            # Small table: Scheduler ads beside the machine ads.
            conn = pika.BlockingConnection(pika.URLParameters(url))
            schedds = [{"MyType": "Scheduler", "Name": f"schedd{i}@bench", "MyAddress": f"schedd@schedd{i}",
                        "TotalIdleJobs": i, "DaemonStartTime": 1, "UpdateSequenceNumber": 1, "ClassAdLifetime": 3600}
                       for i in range(20)]
            conn.channel().basic_publish(bus.ADS, "scheduler.bench", wire.encode({"ads": schedds}),
                                         pika.BasicProperties(content_type=wire.MSGPACK, type=bus.T_AD))
            conn.close()
            args = {"AdTypes": ["Scheduler"], "Constraint": "true"}
            deadline = time.monotonic() + 10
            while len(session.call(address, "Query", args).Ads) < 20:
                if time.monotonic() > deadline:
                    raise RuntimeError("the Scheduler ads did not arrive")
            count, t0 = 0, time.monotonic()
            span = 2.0 if quick else 5.0
            while time.monotonic() - t0 < span:
                r = session.call(address, "Query", args)
                assert r.status == 0 and len(r.Ads) == 20, r.text
                count += 1
            results["small_table_qps"] = round(count / (time.monotonic() - t0), 1)
            # The same from several consoles at once: what the collector serves, not one client.
            clients = 4
            start_event, out = ctx.Event(), ctx.Queue()
            procs = [ctx.Process(target=query_client, args=(url, address, span, start_event, out)) for _ in range(clients)]
            for proc in procs:
                proc.start()
            time.sleep(1.0 if quick else 2.0)  # let them connect (spawned interpreters)
            start_event.set()
            rates = [out.get(timeout=120) for _ in procs]
            for proc in procs:
                proc.join(30)
            results["small_table_qps_4_clients"] = round(sum(rates), 1)

            # The constraint query that selects 1,000 machine ads.
            times = []
            selected = n // max(1, n // SELECTED)
            for _ in range(5):
                t0 = time.monotonic()
                r = session.call(address, "Query", {"AdTypes": ["Machine"], "Constraint": "BenchGroup == 7"})
                times.append(time.monotonic() - t0)
                assert r.status == 0 and len(r.Ads) == selected, (r.text, len(r.outArgs.get("Ads", [])))
            results["constraint_query_s"] = round(statistics.median(times), 4)
            results["constraint_query_ads"] = selected
            t0 = time.monotonic()
            r = session.call(address, "Query", {"AdTypes": ["Machine"], "Constraint": 'Name == "slot3@node77.bench.pool"'})
            results["name_query_s"] = round(time.monotonic() - t0, 4)
            assert len(r.Ads) == 1
    finally:
        collector.terminate()
        try:
            collector.wait(15)
        except subprocess.TimeoutExpired:
            collector.kill()
            collector.wait()
        mgmt.delete_vhost(vhost)
    results.update(
        htcondor_ingest_ads_per_s=HTCONDOR_INGEST,
        ingest_ratio=round(results["ingest_ads_per_s"] / HTCONDOR_INGEST, 1),
        htcondor_small_table_qps=HTCONDOR_SMALL_QPS,
        small_table_ratio=round(results["small_table_qps"] / HTCONDOR_SMALL_QPS, 1),
    )
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="20,000 ads instead of 100,000, shorter spans")
    r = run(p.parse_args().quick)
    held = f"{r['ads_held']:,} Machine ads held"
    print(f"collector benchmark ({held}; load generator in another process)")
    print(f"  {'figure':<34} {'gridbus':>10} {'htcondor':>8} {'ratio':>7} {'goal':>8}")
    print(f"  {'ingest, ads/s (sustained)':<34} {r['ingest_ads_per_s']:>10,} {HTCONDOR_INGEST:>8} "
          f"{r['ingest_ratio']:>6}x {GOAL_INGEST:>8,.0f}")
    print(f"  {'ingest while filling, ads/s':<34} {r['fill_ads_per_s']:>10,}")
    print(f"  {'small-table queries/s':<34} {r['small_table_qps']:>10} {HTCONDOR_SMALL_QPS:>8} "
          f"{r['small_table_ratio']:>6}x {GOAL_QPS:>8}")
    print(f"  {'small-table queries/s, 4 consoles':<34} {r['small_table_qps_4_clients']:>10} {HTCONDOR_SMALL_QPS:>8} "
          f"{round(r['small_table_qps_4_clients'] / HTCONDOR_SMALL_QPS, 1):>6}x {GOAL_QPS:>8}")
    print(f"  {'query selecting 1,000 ads, s':<34} {r['constraint_query_s']:>10} {'-':>8} {'':>7} {GOAL_QUERY_S:>8}")
    print(f"  {'query by Name (index), s':<34} {r['name_query_s']:>10}")


if __name__ == "__main__":
    main()
