"""Benchmark of the schedd's job queue over the real broker.

Figures: the submit rate of N procs in clusters of 1,000 (Submit answered after each commit), the
time of a totals query (condor_q -totals) and of a full listing over N jobs (through the console,
ClassAds built), the restart reload time, and the memory per idle job. The peer is HTCondor's quoted figure:
condor_q over 100,000 jobs took 22 s on HTCondor 8.3 (HTCondor Week 2015's "What's new in HTCondor"). Goals: totals < 0.5 s, full
listing < 5 s, reload < 5 s, <= 2 KiB per idle job.

    .venv/bin/python bench/bench_schedd.py            # 100,000 jobs
    .venv/bin/python bench/bench_schedd.py --quick    # 10,000 jobs
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridbus.agent.threaded import AgentThread  # noqa: E402
from gridbus.agents.schedd.agent import Schedd  # noqa: E402
from gridbus.agents.schedd.jobqueue import JobQueue  # noqa: E402
from gridbus.agents.schedd.settings import ScheddSettings  # noqa: E402
from gridbus.bus import BrokerURL  # noqa: E402
from gridbus.classad import ExprTree  # noqa: E402
from gridbus.console import QueryOpt, Session  # noqa: E402
from gridbus.console import Schedd as ScheddClient  # noqa: E402
from gridbus.mgmt import Management  # noqa: E402

HTCONDOR_CONDOR_Q_100K = 22.0  # seconds, HTCondor Week 2015 ("~22 seconds per condor_q" over 100k jobs)
CLUSTER = 1000


def job_ad() -> dict:
    return {"Cmd": "/bin/sleep", "Args": "60", "Requirements": ExprTree("TARGET.Memory >= RequestMemory"),
            "JobUniverse": 5, "Iwd": "/tmp", "RequestMemory": 256, "JobBatchName": "bench"}


def run(quick: bool = False) -> dict:
    n = 10_000 if quick else 100_000
    url = BrokerURL(os.environ.get("GRIDBUS_TEST_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/")
    mgmt = Management.for_broker(url)
    vhost = f"gridbus-bench-schedd-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, url.user, ".*", ".*", ".*")
    spool = Path(tempfile.mkdtemp(prefix="bench-schedd-"))
    amqp = url.with_vhost(vhost).url
    figures: dict = {"jobs": n}
    try:
        agent = Schedd("bench", amqp, settings=ScheddSettings(spool=spool, update_interval=300.0))
        with AgentThread(agent), Session(amqp, timeout=120) as session:
            start = time.perf_counter()
            for i in range(n // CLUSTER):
                r = session.call("schedd@bench", "Submit",
                                 {"Ad": job_ad(), "Count": CLUSTER, "SubmissionId": f"bench-{i}"})
                r.check("Submit")
            elapsed = time.perf_counter() - start
            figures["submit_seconds"] = elapsed
            figures["submit_procs_per_s"] = n / elapsed

            client = ScheddClient("schedd@bench", session=session, timeout=120)
            start = time.perf_counter()
            totals = client.query(opts=QueryOpt.SummaryOnly)
            figures["totals_query_s"] = time.perf_counter() - start
            assert totals[-1]["Jobs"] == n, totals[-1]

            start = time.perf_counter()
            ads = client.query()
            figures["full_listing_s"] = time.perf_counter() - start
            assert len(ads) == n
            figures["full_listing_attrs_per_job"] = len(ads[0])
            del ads

            start = time.perf_counter()
            raw = session.call("schedd@bench", "Query", {"Projection": ["ClusterId", "ProcId", "JobStatus", "Owner"]})
            figures["projected_listing_s"] = time.perf_counter() - start
            assert len(raw.Jobs) == n
            del raw
        # Restart: reload the queue from SQLite (what a restarted schedd does before serving).
        gc.collect()
        start = time.perf_counter()
        q = JobQueue(spool / "job_queue.sqlite3", "bench")
        figures["reload_s"] = time.perf_counter() - start
        assert len(q) == n
        q.store.close()
        del q
        gc.collect()
        tracemalloc.start()
        q = JobQueue(spool / "job_queue.sqlite3", "bench")
        current, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        figures["bytes_per_idle_job"] = current / n
        q.store.close()
    finally:
        mgmt.delete_vhost(vhost)
        for f in spool.iterdir():
            f.unlink()
        spool.rmdir()
    # The peer: HTCondor's condor_q over 100,000 jobs (quoted), scaled to this run's size.
    peer = HTCONDOR_CONDOR_Q_100K * n / 100_000
    figures["peer_condor_q_s"] = peer
    figures["full_listing_vs_condor_q"] = peer / figures["full_listing_s"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 jobs instead of 100,000")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    f = run(quick=args.quick)
    if args.json:
        print(json.dumps(f, indent=2))
        return
    n = f["jobs"]
    print(f"schedd job queue, {n:,} jobs in clusters of {CLUSTER:,}")
    print(f"  submit:            {f['submit_procs_per_s']:>10,.0f} procs/s ({f['submit_seconds']:.2f} s)")
    print(f"  totals query:      {f['totals_query_s']:>10.3f} s   (goal < 0.5 s)")
    print(f"  full listing:      {f['full_listing_s']:>10.3f} s   (goal < 5 s; {f['full_listing_attrs_per_job']} attributes a job)")
    print(f"  projected listing: {f['projected_listing_s']:>10.3f} s   (4 attributes)")
    print(f"  restart reload:    {f['reload_s']:>10.3f} s   (goal < 5 s)")
    print(f"  memory per job:    {f['bytes_per_idle_job']:>10,.0f} B   (goal <= 2048 B)")
    print(f"  peer: condor_q over {n:,} jobs (quoted: 22 s per 100,000): {f['peer_condor_q_s']:.1f} s; "
          f"full listing is {f['full_listing_vs_condor_q']:.1f}x faster")


if __name__ == "__main__":
    main()
