"""Hostile requests against a pool of real daemons, in two floods of the same size (3,000 per agent
each by default, the second drawn with another seed), sent without waiting for answers
(tests/integration/security/fuzzing.py makes them from the schema), every one distinct.

Prints, per agent and flood: requests sent, seconds to publish them, seconds until the agent
answered a normal call again (its backlog worked through); then each daemon's resident memory
before the first flood, after it and after the second, with the goal: after a flood within 2x of
before, and the second flood growing it by no more than a tenth of the first's level (what a
refused message allocated is freed; caches keyed by what callers send are bounded). And whether
the job queue was unchanged. Its own vhost on the machine's broker.

    .venv/bin/python bench/bench_fuzz.py [--per-agent N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GROWTH_BOUND = 2.0  # after a flood, at most this times the RSS before
SECOND_FLOOD_SLACK = 1.10  # the second flood may add a tenth to the first's level (allocator noise)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-agent", type=int, default=3_000, help="requests per agent in each flood")
    parser.add_argument("--distinct", type=int, default=0,
                        help="distinct requests drawn per agent and flood (default: every one of them distinct, "
                             "so caches keyed by what callers send see as many keys as can be)")
    opts = parser.parse_args()
    # (test_fuzz reads it on import: the floods' requests are drawn distinct, not a few hundred resent)
    os.environ["GRIDBUS_FUZZ_DISTINCT"] = str(opts.distinct or opts.per_agent)

    from gridbus.bus import BrokerURL
    from gridbus.mgmt import Management
    from tests.e2e.pool import Pool
    from tests.integration.security import fuzzing
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
        rss = {a: [fuzzing.rss_kb(pool.procs[a].pid) / 1024] for a in AGENTS}
        for flood, seed in ((1, 14), (2, 41)):
            started = time.monotonic()
            figures = fuzz_pool(pool, opts.per_agent, seed=seed)
            total = time.monotonic() - started
            sent = sum(f["sent"] for f in figures.values())
            print(f"flood {flood}: {sent:,} hostile requests to {len(AGENTS)} agents in {total:.1f} s "
                  f"({sent / total:,.0f} requests/s through the pool)")
            print(f"  {'agent':<14} {'sent':>8} {'publish s':>10} {'answered after s':>17}")
            for address, f in figures.items():
                print(f"  {address:<14} {f['sent']:>8,.0f} {f['publish_s']:>10.1f} {f['answered_after_s']:>17.1f}")
                rss[address].append(f["rss_mb"])
        print(f"resident memory (MB): goal after/before <= {GROWTH_BOUND:.0f}x, second flood <= "
              f"{SECOND_FLOOD_SLACK:.2f}x the first's level")
        print(f"  {'agent':<14} {'before':>8} {'flood 1':>8} {'flood 2':>8} {'1/before':>9} {'2/1':>6}  goal")
        met = True
        for address, (b, one, two) in rss.items():
            ok = one <= GROWTH_BOUND * b and two <= GROWTH_BOUND * b and two <= SECOND_FLOOD_SLACK * one
            met &= ok
            print(f"  {address:<14} {b:>8.0f} {one:>8.0f} {two:>8.0f} {one / b:>8.2f}x {two / one:>5.2f}x  "
                  f"{'met' if ok else 'MISSED'}")
        after = sorted(map(str, pool.jobs("schedd@s")))
        alive = all(pool.procs[a].poll() is None for a in AGENTS)
        print(f"  every agent alive and answering: {alive}; job queue unchanged: {before == after}; "
              f"memory goal met by every agent: {met}")
    finally:
        pool.stop()
        mgmt.delete_vhost(vhost)


if __name__ == "__main__":
    main()
