"""What durable job events cost: pool throughput with the schedd's event outbox
(SCHEDD_DURABLE_EVENTS true, the default: what each commit owes the user logs and gridbus.events
is written in its transaction and deleted once delivered) against the same pool without it (false:
the events a crash catches between the commit and the delivery are lost), in the same run.

Each round runs both, in alternating order, on bench_pool's pool (product defaults, FULL sync, one
startd of N static slots, one Submit of /bin/true jobs with a user log, timed to the last
terminated event in the log); the medians and their ratio are printed, with the schedd's cpu per job.

    .venv/bin/python bench/bench_durable_events.py [--jobs N] [--slots N] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_pool import gridbus_rate  # noqa: E402  (bench/ is on sys.path: run_all, or this script's own dir)


def measure(jobs: int, slots: int, rounds: int) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {"durable": [], "not durable": []}
    for r in range(rounds):
        order = ["durable", "not durable"] if r % 2 == 0 else ["not durable", "durable"]
        for name in order:
            env = {"GRIDBUS_SCHEDD_DURABLE_EVENTS": "true" if name == "durable" else "false"}
            out = gridbus_rate(jobs, slots, schedd_env=env)
            assert out["completed_ok"] == jobs, out
            results[name].append(out)
            print(f"  round {r + 1} {name:12s} {out['rate']:8.1f} jobs/s  schedd {out['cpu_ms_per_job'].get('schedd')} "
                  f"ms cpu/job", flush=True)
    return results


def run(quick: bool = False, jobs: int = 10_000, slots: int = 8, rounds: int = 3) -> dict:
    if quick:
        jobs, rounds = 2_000, 1
    print(f"durable job events: {jobs} /bin/true jobs, {slots} slots, {rounds} round(s) each")
    results = measure(jobs, slots, rounds)
    med = {k: statistics.median(o["rate"] for o in v) for k, v in results.items()}
    cpu = {k: statistics.median(o["cpu_ms_per_job"].get("schedd", 0.0) for o in v) for k, v in results.items()}
    ratio = med["durable"] / med["not durable"]
    print(f"with the outbox {med['durable']:.1f} jobs/s, without {med['not durable']:.1f} jobs/s: "
          f"ratio {ratio:.3f} ({(1 - ratio) * 100:.1f}% cost); "
          f"schedd cpu {cpu['durable']:.3f} against {cpu['not durable']:.3f} ms/job")
    return {"jobs": jobs, "slots": slots, "rounds": rounds,
            "durable_jobs_per_s": med["durable"], "not_durable_jobs_per_s": med["not durable"], "ratio": ratio,
            "durable_rates": [o["rate"] for o in results["durable"]],
            "not_durable_rates": [o["rate"] for o in results["not durable"]],
            "schedd_cpu_ms_per_job": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    run(jobs=a.jobs, slots=a.slots, rounds=a.rounds)


if __name__ == "__main__":
    main()
