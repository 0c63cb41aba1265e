"""The starter's fast spawn against subprocess.Popen (its peer), in the same run.

The starter in process starts /bin/true one job after another as the startd does
(``start_async``, on an event loop on a thread that is not the main one, as in the startd), each
way: the fast spawn (vfork; the job joins its cgroups and takes its account in the child before
its exec, agents/startd/_spawn.c) and Popen (STARTER_FAST_SPAWN false: a fork of the whole
process for a job under another account; on v1 the forking thread moving into the job's groups
and back). Each for a job of root's and one run as nobody, with a cgroup per job and without.
The process first grows to about a startd's anonymous resident memory (``--rss``, MiB; a startd
of the pool benchmark holds about 44 at two slots), because what a fork costs grows with it. Printed: jobs per second,
the starter's own cpu per job, and the ratio of the fast spawn over Popen.

Run as root: ``.venv/bin/python bench/bench_spawn.py [--jobs N] [--rss MIB]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridbus.agents.startd import cgroups, spawn  # noqa: E402
from gridbus.agents.startd.accounts import RunAsPolicy  # noqa: E402
from gridbus.agents.startd.starter import Starter  # noqa: E402

POLICY = RunAsPolicy(unprivileged_user="nobody", allow_root_jobs=True)


def _rss_mib() -> float:
    """This process's anonymous resident memory (what a fork copies the page tables of)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def rate(jobs: int, *, fast: bool, owner: str, hierarchy: cgroups.Hierarchy | None) -> tuple[float, float]:
    """(jobs per second, the starter's cpu ms per job) for ``jobs`` serial starts."""
    out: list[tuple[float, float]] = []

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            starter = Starter(os.path.join(tmp, "execute"), POLICY, on_exit=lambda j: None, cgroup=hierarchy,
                              fast_spawn=fast)
            ad = {"Cmd": "/bin/true", "Owner": owner}
            try:
                job = await starter.start_async("warm", ad, "slot1@bench", {}, 256)
                await job.done
                cpu0, t0 = time.process_time(), time.perf_counter()
                for i in range(jobs):
                    job = await starter.start_async(f"c{i}", ad, "slot1@bench", {}, 256)
                    await job.done
                elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            finally:
                await starter.shutdown()
            out.append((jobs / elapsed, cpu / jobs * 1000))

    # On a thread of its own, as the startd's loop (a v1 job's groups may not be joined by the
    # main thread: see cgroups.JobCgroup.thread_joined).
    thread = threading.Thread(target=lambda: asyncio.run(main()))
    thread.start()
    thread.join()
    return out[0]


def run(jobs: int = 1000, rss_mib: int = 45) -> dict[str, object]:
    ballast: list[str] = []
    while _rss_mib() < rss_mib:
        ballast.extend(str(i) * 4 for i in range(20_000))
    hierarchy: cgroups.Hierarchy | None = None
    try:
        hierarchy = cgroups.probe(f"gridbus-bench/spawn-{uuid.uuid4().hex[:8]}")
        hierarchy.setup()
    except cgroups.CgroupError as exc:
        print(f"(no cgroups: {exc})")
    figures: dict[str, object] = {"rss_mib": round(_rss_mib()), "fast_spawn_built": spawn.AVAILABLE}
    try:
        for label, group in (("cgroups", hierarchy), ("no cgroups", None)):
            if label == "cgroups" and group is None:
                continue
            for owner, who in (("root", "root"), ("no-such-user-bench", "nobody")):
                popen = rate(jobs, fast=False, owner=owner, hierarchy=group)
                fast = rate(jobs, fast=True, owner=owner, hierarchy=group) if spawn.AVAILABLE else None
                key = f"{who}, {label}"
                figures[f"popen jobs/s, cpu ms/job ({key})"] = f"{popen[0]:.0f}, {popen[1]:.3f}"
                if fast is not None:
                    figures[f"fast  jobs/s, cpu ms/job ({key})"] = f"{fast[0]:.0f}, {fast[1]:.3f}"
                    figures[f"ratio fast / popen, jobs/s ({key})"] = round(fast[0] / popen[0], 2)
    finally:
        if hierarchy is not None:
            hierarchy.remove_base()
    del ballast
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rss", type=int, default=45, help="MiB of anonymous memory the process grows to first (a startd's)")
    args = parser.parse_args()
    for key, value in run(args.jobs, args.rss).items():
        print(f"{key:48} {value}")
