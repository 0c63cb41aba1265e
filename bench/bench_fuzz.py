"""Hostile requests against a pool of real daemons: 200,000 by default (40,000 per agent), sent
without waiting for answers (tests/integration/security/fuzzing.py makes them from the schema).

Prints, per agent: requests sent, seconds to publish them, seconds until the agent answered a
normal call again (its backlog worked through), requests per second it got through, and its
resident memory afterwards; and whether the job queue was unchanged. Its own vhost on the
machine's broker.

    .venv/bin/python bench/bench_fuzz.py [--per-agent N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-agent", type=int, default=40_000)
    opts = parser.parse_args()

    from gridbus.bus import BrokerURL
    from gridbus.mgmt import Management
    from tests.e2e.pool import Pool
    from tests.integration.security.test_fuzz import AGENTS, fuzz_pool, start_targets

    broker = BrokerURL("amqp://guest:guest@127.0.0.1:5672/")
    mgmt = Management.for_broker(broker)
    vhost = f"gridbus-bench-fuzz-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, "guest", ".*", ".*", ".*")
    pool = Pool(broker.with_vhost(vhost).url, Path(tempfile.mkdtemp(prefix="gridbus-bench-fuzz-")))
    try:
        start_targets(pool)
        before = sorted(map(str, pool.jobs("schedd@s")))
        started = time.monotonic()
        figures = fuzz_pool(pool, opts.per_agent)
        total = time.monotonic() - started
        after = sorted(map(str, pool.jobs("schedd@s")))
        sent = sum(f["sent"] for f in figures.values())
        print(f"hostile requests: {sent:,} to {len(AGENTS)} agents in {total:.1f} s "
              f"({sent / total:,.0f} requests/s through the pool)")
        print(f"  {'agent':<14} {'sent':>8} {'publish s':>10} {'answered after s':>17} {'RSS MB':>8}")
        for address, f in figures.items():
            print(f"  {address:<14} {f['sent']:>8,.0f} {f['publish_s']:>10.1f} {f['answered_after_s']:>17.1f} "
                  f"{f['rss_mb']:>8.0f}")
        alive = all(pool.procs[a].poll() is None for a in AGENTS)
        print(f"  every agent alive and answering: {alive}; job queue unchanged: {before == after}")
    finally:
        pool.stop()
        mgmt.delete_vhost(vhost)


if __name__ == "__main__":
    main()
