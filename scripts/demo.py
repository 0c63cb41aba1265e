"""`make demo`: from a fresh clone to jobs running, in one command.

Makes sure the broker runs, starts the personal pool (`gridbus pool up --detach`), submits a small
demo cluster with the htcondor2-style API, follows it to completion with a progress display, then
shows `gridbus q`, the jobs' history and their output. The pool stays up afterwards (stop it with
`gridbus pool down`), unless --down is given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
GRIDBUS = str(BIN / "gridbus")

# Job states by HTCondor's JobStatus codes.
IDLE, RUNNING, REMOVED, COMPLETED, HELD = 1, 2, 3, 4, 5


def gridbus(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([GRIDBUS, *args], text=True, capture_output=True)
    if check and done.returncode != 0:
        sys.exit(f"demo: `gridbus {' '.join(args)}` failed:\n{done.stdout}{done.stderr}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=8, help="procs in the demo cluster (default 8)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the cluster (default 300)")
    parser.add_argument("--down", action="store_true", help="stop the personal pool at the end")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gridbus.config import Config
    from gridbus.console import Schedd, Submit
    from gridbus.console.cli.pool import unprivileged_account

    console = Console()
    cfg = Config.load()
    url = cfg.url()
    os.environ["GRIDBUS_URL"] = url
    # Started by root, `pool up` runs the jobs as nobody (never as root), and says so.
    unprivileged = unprivileged_account(cfg) is not None
    console.print(f"[bold]1.[/] starting the personal pool on {url.split('@')[-1]}")
    up = gridbus("pool", "up", "--detach")
    console.out(up.stdout.strip(), highlight=False)

    demo_dir = cfg.path_of("LOCAL_DIR") / "demo" / time.strftime("%Y%m%d-%H%M%S")
    demo_dir.mkdir(parents=True, exist_ok=True)
    if unprivileged:
        demo_dir.chmod(0o1777)  # the jobs, running as nobody, write their output here
    sub = Submit({
        "executable": "/bin/sh",
        "arguments": "\"-c 'sleep 1; echo hello from job $(Process) of cluster $(Cluster) on `uname -n`'\"",
        "output": f"{demo_dir}/out.$(Process)",
        "error": f"{demo_dir}/err.$(Process)",
        "log": f"{demo_dir}/demo.log",
        "request_cpus": "1",
        "request_memory": "32",
        "request_disk": "1024",
    })
    console.print(f"[bold]2.[/] submitting a demo cluster of {args.jobs} jobs (output in {demo_dir})")
    with Schedd() as schedd:
        result = schedd.submit(sub, count=args.jobs)
        cluster = result.cluster()
        console.print(f"{args.jobs} job(s) submitted to cluster {cluster}.")

        console.print("[bold]3.[/] following the cluster to completion")
        deadline = time.monotonic() + args.timeout
        columns = (TextColumn("cluster {task.fields[cluster]}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[states]}"), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task("jobs", total=args.jobs, cluster=cluster, states="")
            while True:
                ads = schedd.query(f"ClusterId == {cluster}", ["ProcId", "JobStatus", "HoldReason"])
                counts = {s: sum(1 for a in ads if a.get("JobStatus") == s) for s in (IDLE, RUNNING, COMPLETED, HELD)}
                done = args.jobs - len(ads) + counts[COMPLETED]  # completed jobs leave the queue
                progress.update(task, completed=done,
                                states=f"{counts[IDLE]} idle, {counts[RUNNING]} running, {counts[HELD]} held")
                if counts[HELD]:
                    reason = next(a.get("HoldReason") for a in ads if a.get("JobStatus") == HELD)
                    sys.exit(f"demo: a job was held: {reason}")
                if done >= args.jobs:
                    break
                if time.monotonic() > deadline:
                    sys.exit(f"demo: the cluster did not finish within {args.timeout:.0f} s; "
                             f"see `gridbus q -better-analyze {cluster}` and the logs in {cfg.path_of('LOG')}")
                time.sleep(0.5)

    console.print("[bold]4.[/] the queue ([cyan]gridbus q[/]): the demo's jobs have left it")
    console.out(gridbus("q", check=False).stdout.rstrip(), highlight=False)
    console.print(f"[bold]5.[/] the results ([cyan]gridbus history {cluster}[/] and the jobs' output)")
    console.out(gridbus("history", str(cluster), check=False).stdout.rstrip(), highlight=False)
    missing = []
    for proc in range(args.jobs):
        out = demo_dir / f"out.{proc}"
        text = out.read_text().strip() if out.exists() else ""
        if not text:
            missing.append(proc)
        console.print(f"  {out.name}: {text or '(empty)'}")
    if missing:
        sys.exit(f"demo: jobs {missing} completed without output; see {demo_dir}")
    console.print(f"[bold green]all {args.jobs} jobs completed.[/]")
    if args.down:
        console.out(gridbus("pool", "down").stdout.rstrip(), highlight=False)
    else:
        console.print("The pool is still up: try `gridbus status`, `gridbus q`, the management UI on "
                      "http://localhost:15672, and `gridbus pool down` to stop it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
