"""What the web console and /metrics cost the pool: jobs per second with and without the web
daemon, on the same pool, in the same run.

One pool (a collector, a negotiator, a schedd, one startd of SLOTS static slots; the product's
default settings, as bench_pool runs it) runs clusters of /bin/true jobs, timed from the Submit to
the last job's terminated event in the user log. The runs alternate (without, with, with,
without, ...) so a drift of the shared machine weighs on both sides alike. In a "with" run the
web daemon runs (`python -m gridbus.console.web`, as the master starts it for WEB) and is used as
it would be: Prometheus scrapes /metrics every SCRAPE_INTERVAL seconds (three times as often as
the usual 15 s), and one signed-in person keeps the queue page open: a stream (/api/stream)
read as the browser reads it, and the page's data (/api/queue, a Query as that user) fetched
again each time the stream says the queue changed. Goal: the pool's rate with the web daemon at
least 98% of its rate without (a cost under 2%), on the medians.

On a machine shared with other work the rates swing by more than the cost measured, so the cpu
is counted too: the web daemon's cpu per job against the pool's own (its daemons and their
children, the jobs) in the same runs. Where the pool is cpu-bound, that share is what the web
daemon takes from its throughput; where it is not, the web daemon runs on an idle cpu.

    .venv/bin/python bench/bench_web.py [--quick] [--rounds N] [--jobs N]
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_pool import _cpu_seconds, _TerminatedCounter, _vhost, product_defaults  # noqa: E402


def _cpu_with_children(pid: int) -> float:
    """User + system cpu of a process and of its children it has waited for (a startd's jobs)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

SLOTS = 4
SCRAPE_INTERVAL = 5.0  # Prometheus's usual interval is 15 s
GOAL = 0.98  # the pool's rate with the web daemon over its rate without, at least


class ConsoleLoad:
    """A Prometheus scraper and one person's open queue page, on threads, until stop()."""

    def __init__(self, web_url: str, user: str, password: str, parts: str = "scrape,page"):
        self.url = web_url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        body = json.dumps({"user": user, "password": password}).encode()
        request = urllib.request.Request(f"{web_url}/api/login", body, {"Content-Type": "application/json"})
        self.opener.open(request, timeout=30).read()
        self.stopping = threading.Event()
        self.queue_changed = threading.Event()
        self.scrapes = self.page_fetches = self.changes = 0
        self.errors: list[str] = []
        wanted = [self._scrape] if "scrape" in parts else []
        wanted += [self._stream, self._page] if "page" in parts else []
        self.threads = [threading.Thread(target=f, daemon=True, name=f.__name__.strip("_")) for f in wanted]
        for t in self.threads:
            t.start()

    def _get(self, path: str) -> bytes:
        with self.opener.open(f"{self.url}{path}", timeout=60) as r:
            return r.read()

    def _scrape(self) -> None:
        while not self.stopping.wait(SCRAPE_INTERVAL):
            try:
                self._get("/metrics")
                self.scrapes += 1
            except Exception as exc:
                self.errors.append(f"scrape: {exc!r}")

    def _stream(self) -> None:
        try:
            with self.opener.open(f"{self.url}/api/stream", timeout=3600) as r:
                for line in r:
                    if self.stopping.is_set():
                        return
                    if line.startswith(b"data:") and b"queue" in line:
                        self.changes += 1
                        self.queue_changed.set()
        except Exception as exc:
            if not self.stopping.is_set():
                self.errors.append(f"stream: {exc!r}")

    def _page(self) -> None:
        self.queue_changed.set()  # the page is drawn once when opened
        while not self.stopping.is_set():
            if not self.queue_changed.wait(0.5):
                continue
            self.queue_changed.clear()
            try:
                self._get("/api/queue")
                self.page_fetches += 1
            except Exception as exc:
                self.errors.append(f"page: {exc!r}")

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            if t.name != "stream":
                t.join(5)


def one_run(pool: Any, jobs: int, log: Path, cpu: dict[str, list[float]] | None = None) -> float:
    """Jobs per second of one cluster of ``jobs``; ``cpu``: each daemon's cpu ms per job is added."""
    from tests.e2e.pool import wait_for

    cpu0 = {a: _cpu_with_children(p.pid) for a, p in pool.procs.items()}
    terminated = _TerminatedCounter(log)
    before = terminated.count()
    started = time.monotonic()
    cluster = pool.submit("schedd@s", jobs, log=log)
    wait_for(f"{jobs} jobs to terminate", lambda: terminated.count() >= before + jobs, timeout=900, interval=0.01)
    elapsed = time.monotonic() - started
    if cpu is not None:
        for address, proc in pool.procs.items():
            cpu.setdefault(address.split("@")[0], []).append((_cpu_with_children(proc.pid) - cpu0[address]) / jobs * 1000)

    def left() -> bool:
        args = {"Constraint": f"ClusterId == {cluster}", "Projection": ["ProcId"], "Limit": 1}
        return not pool.call("schedd@s", "Query", args).outArgs.get("Jobs", [])

    wait_for(f"{jobs} jobs to leave the queue", left, timeout=120, interval=0.1)  # (not timed)
    return jobs / elapsed


def start_web(pool: Any) -> tuple[Any, str]:
    from tests.e2e.pool import wait_for

    address_file = pool.local_dir("web@w") / "log" / ".web_address"
    if address_file.exists():
        address_file.unlink()
    proc = pool.start("web", "w", module="gridbus.console.web", GRIDBUS_WEB_ADDRESS="127.0.0.1:0")
    url = wait_for("the web daemon's address", lambda: address_file.is_file() and address_file.read_text().strip(), 60)
    return proc, url


def stop_web(pool: Any, proc: Any) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    pool.procs.pop("web@w", None)


def run(quick: bool = False, rounds: int | None = None, jobs: int | None = None, uses: str = "scrape,page") -> dict:
    from gridbus.bus import BrokerURL
    from tests.e2e.pool import Pool

    rounds = rounds or (2 if quick else 4)
    jobs = jobs or (500 if quick else 2000)
    mgmt, vhost, url = _vhost("web")
    broker = BrokerURL(url)
    rates: dict[str, list[float]] = {"without": [], "with": []}
    web_cpu: list[float] = []
    cpu: dict[str, dict[str, list[float]]] = {"without": {}, "with": {}}
    load_figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        pool = Pool(url, Path(tmp), **product_defaults())
        try:
            pool.start("collector", "c")
            pool.start("negotiator", "n")
            pool.start("schedd", "s")
            pool.start("startd", "a", GRIDBUS_NUM_CPUS=str(SLOTS), GRIDBUS_NUM_SLOTS=str(SLOTS), GRIDBUS_MEMORY="8192")
            pool.wait_slots(SLOTS, timeout=60)
            # (a request sent before the schedd declared its queue, at its first start, is lost)
            pool.wait_serving("collector@c", "negotiator@n", "schedd@s", timeout=60)
            log = Path(tmp) / "bench.log"
            one_run(pool, min(jobs, 200), log)  # warm-up: the first claims, the job queue's files
            for r in range(rounds):
                for mode in (("without", "with") if r % 2 == 0 else ("with", "without")):
                    if mode == "without":
                        rates[mode].append(one_run(pool, jobs, log, cpu[mode]))
                        continue
                    proc, web_url = start_web(pool)
                    load = ConsoleLoad(web_url, broker.user, broker.password, uses)
                    time.sleep(1.0)  # the page drawn, the first scrape made
                    cpu0 = _cpu_seconds(proc.pid)
                    rates[mode].append(one_run(pool, jobs, log, cpu[mode]))
                    web_cpu.append(_cpu_seconds(proc.pid) - cpu0)
                    load.stop()
                    load_figures.append({"scrapes": load.scrapes, "stream_changes": load.changes,
                                         "page_fetches": load.page_fetches, "errors": load.errors[:3]})
                    stop_web(pool, proc)
        finally:
            pool.stop()
            mgmt.delete_vhost(vhost)
    without, with_web = statistics.median(rates["without"]), statistics.median(rates["with"])
    ratio = with_web / without
    medians = {mode: {d: round(statistics.median(v), 3) for d, v in by.items()} for mode, by in cpu.items()}
    pool_cpu = sum(v for d, v in medians["without"].items() if d != "web")
    web_share = statistics.median(web_cpu) / jobs * 1000 / pool_cpu
    return {
        "jobs_per_run": jobs, "rounds": rounds, "slots": SLOTS,
        "rate_without_web": round(without, 1), "rate_with_web": round(with_web, 1),
        "ratio": round(ratio, 4), "cost_percent": round(100 * (1 - ratio), 2), "goal_met": ratio >= GOAL,
        "rates_without": [round(x, 1) for x in rates["without"]], "rates_with": [round(x, 1) for x in rates["with"]],
        "web_cpu_ms_per_job": round(statistics.median(web_cpu) / jobs * 1000, 3),
        "cpu_ms_per_job": medians,
        "pool_cpu_ms_per_job": round(pool_cpu, 3),
        "web_cpu_share_percent": round(100 * web_share, 2),
        "console_load": load_figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--load", default="scrape,page",
                        help="what uses the console in the runs with it: scrape, page, both (default) or none")
    args = parser.parse_args()
    out = run(args.quick, args.rounds, args.jobs, args.load)
    for key, value in out.items():
        print(f"{key:>22}: {value}")
    print(f"the pool with the web console runs at {out['ratio']:.3f} of its rate without "
          f"({out['cost_percent']:.2f}% cost; goal: under {100 * (1 - GOAL):.0f}%); the web daemon's cpu is "
          f"{out['web_cpu_share_percent']:.2f}% of the pool's own per job")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
