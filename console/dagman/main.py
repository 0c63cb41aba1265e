"""DAGMan's program: condor_dagman's command line, the lock file, rescue DAGs and recovery, and the
schedd it submits node jobs to.

Started by the schedd as a scheduler-universe job (``CONDOR_ID`` in its environment names the
job), it reads the DAG, takes the newest ``<dag>.rescueNNN`` unless -Force, and runs the engine.
A lock file ``<dag>.lock`` lives while it runs: finding one at start (DAGMan was killed, and the
schedd started its job again) or -DoRecovery puts it in recovery, which rebuilds the nodes' states
from ``<dag>.nodes.log`` instead of truncating it. SIGUSR1 (the DAGMan job removed) removes the
node jobs and writes a rescue DAG (condor_rm's RemoveKillSig); SIGTERM just ends it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from gridbus.console.dagman.engine import DEFAULTS, Engine, Submitter, newest_rescue_number
from gridbus.console.dagman.noderun import NodeRun
from gridbus.console.schedd import JobAction, Schedd
from gridbus.dag import SUBDAG, DagError, apply_rescue, parse_file
from gridbus.dag.dagmanjob import DAGMAN_MODULE, dagman_job_commands, is_dagman_cmdline
from gridbus.submit import Submit


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ScheddSubmitter(Submitter):
    """Submits node jobs through the console's Schedd API, so each node's submit file is expanded
    client-side with its VARS as macros, as condor_submit -a would."""

    def __init__(self, schedd: Schedd):
        self.schedd = schedd

    def submit(self, run: NodeRun, engine: Engine) -> tuple[int, int]:
        node = run.node
        cwd = engine.node_dir(node)
        if node.kind == SUBDAG:
            sub = Submit(dagman_job_commands(node.submit_file, {"force": False}, cwd=cwd))
        else:
            sub = Submit((cwd / node.submit_file).read_text())
            sub.submit_file = node.submit_file  # $(SUBMIT_FILE), as the DAG names it
        macros = {"JOB": node.name, "RETRY": str(run.retries_used)}
        for name, value in node.vars.items():
            for m, v in macros.items():
                value = value.replace(f"$({m})", v)
            sub[name] = value
        sub["MY.DAGManJobId"] = str(engine.dagman_id)
        sub["MY.DAGNodeName"] = _quote(node.name)
        sub["MY.DAGManNodesLog"] = _quote(str(engine.nodes_log))
        sub["MY.LogNotes"] = _quote(f"DAG Node: {node.name}")
        sub["MY.DAGParentNodeNames"] = _quote(",".join(node.parents))
        if node.priority:
            sub["priority"] = str(node.priority)
        sub.cwd = str(cwd)
        if "initialdir" not in sub:
            sub["initialdir"] = str(cwd)  # a description using $(Cluster) is expanded by the schedd
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # VARS are macros, not commands: no "unknown command" noise
            result = self.schedd.submit(sub)
        return result.cluster(), result.num_procs()

    def remove(self, clusters: list[int], reason: str) -> None:
        self.schedd.act(JobAction.Remove, [str(c) for c in clusters], reason)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=DAGMAN_MODULE, prefix_chars="-",
                                description="Run a DAG of jobs (condor_dagman).")
    p.add_argument("-Dag", "-dag", dest="dag", required=True)
    p.add_argument("-MaxIdle", "-maxidle", dest="maxidle", type=int)
    p.add_argument("-MaxJobs", "-maxjobs", dest="maxjobs", type=int)
    p.add_argument("-MaxPre", "-maxpre", dest="maxpre", type=int)
    p.add_argument("-MaxPost", "-maxpost", dest="maxpost", type=int)
    p.add_argument("-Lockfile", "-lockfile", dest="lockfile")
    p.add_argument("-DoRecovery", "-dorecovery", dest="recovery", action="store_true")
    p.add_argument("-Force", "-force", dest="force", action="store_true")
    p.add_argument("-AutoRescue", dest="autorescue", type=int, default=1)
    p.add_argument("-DoRescueFrom", dest="rescuefrom", type=int, default=0)
    p.add_argument("-UseDagDir", dest="usedagdir", action="store_true")
    # Accepted for condor_dagman compatibility; nothing to do with them here.
    p.add_argument("-p", dest="_p")
    p.add_argument("-f", dest="_f", action="store_true")
    p.add_argument("-l", dest="_l")
    return p


def read_config(path: Path) -> dict[str, Any]:
    """A DAG's CONFIG file: ``NAME = value`` lines (DAGMan's knobs)."""
    out: dict[str, Any] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        out[name.strip().upper()] = _value(value.strip())
    return out


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def options_for(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    """HTCondor's defaults, then GRIDBUS_DAGMAN_* in the environment, then the DAG's CONFIG file,
    then the command line."""
    opts = dict(DEFAULTS)
    for name in DEFAULTS:
        env = os.environ.get("GRIDBUS_" + name)
        if env is not None:
            opts[name] = _value(env)
    opts.update({k: v for k, v in config.items() if k in DEFAULTS})
    for flag, name in (("maxidle", "DAGMAN_MAX_JOBS_IDLE"), ("maxjobs", "DAGMAN_MAX_JOBS_SUBMITTED"),
                       ("maxpre", "DAGMAN_MAX_PRE_SCRIPTS"), ("maxpost", "DAGMAN_MAX_POST_SCRIPTS")):
        value = getattr(args, flag)
        if value is not None:
            opts[name] = value
    return opts


class _Stop(Exception):
    pass


def main(argv: list[str] | None = None, submitter: Submitter | None = None) -> int:
    args = build_parser().parse_args(argv)
    dag_file = Path(args.dag)
    if args.usedagdir:
        os.chdir(dag_file.parent or ".")
        dag_file = Path(dag_file.name)
    dag_file = dag_file.absolute()
    job_id = os.environ.get("CONDOR_ID", "0.0")
    dagman_id = int(job_id.split(".")[0] or 0)
    try:
        dag = parse_file(dag_file)
    except DagError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    config = read_config(dag_file.parent / dag.config) if dag.config else {}
    opts = options_for(args, config)
    lock = Path(args.lockfile).absolute() if args.lockfile else Path(f"{dag_file}.lock")
    _wait_for_predecessor(lock)
    recovery = args.recovery or lock.exists()
    rescue = newest_rescue_number(dag_file) if not args.force and args.autorescue else 0
    if args.rescuefrom:
        rescue = args.rescuefrom
    if rescue and not recovery:
        apply_rescue(dag, Path(f"{dag_file}.rescue{rescue:03d}"))
    nodes_log = Path(f"{dag_file}.nodes.log")
    if not recovery and nodes_log.exists():
        nodes_log.write_text("")  # a fresh run starts a fresh nodes log (recovery reads the old one)
    lock.write_text(f"{job_id} {os.getpid()} {time.time():.0f}\n")
    if submitter is None:
        submitter = ScheddSubmitter(Schedd(os.environ.get("GRIDBUS_SCHEDD") or None))
    engine = Engine(dag, dag_file, submitter, dagman_id=dagman_id, options=opts, recovery=recovery)
    if rescue and not recovery:
        engine.out.write(f"Using rescue DAG file {dag_file.name}.rescue{rescue:03d}")

    stop = {"asked": False}

    def on_term(signum: int, frame: Any) -> None:
        stop["asked"] = True

    # condor_rm sends DAGMan SIGUSR1 (its RemoveKillSig): remove the nodes, write a rescue DAG.
    # SIGTERM (a hold, the schedd shutting down) ends it as is: it comes back in recovery.
    signal.signal(signal.SIGUSR1, on_term)
    engine.start()
    interval = float(opts["DAGMAN_USER_LOG_SCAN_INTERVAL"])
    while not engine.finished():
        if stop["asked"]:
            engine.out.write("Received a signal to stop: removing the node jobs")
            engine.remove_all()
            break
        if not engine.step():
            _wait_for_news(engine, interval, stop)
    code = engine.finish()
    lock.unlink(missing_ok=True)
    return code


def _wait_for_news(engine: Engine, interval: float, stop: dict[str, bool]) -> None:
    """Sleep until the nodes log grows, a script ends, a deferral is due or the scan interval is
    over: cheap stat() polls keep a small DAG responsive without re-reading the log every time."""
    deadline = time.monotonic() + interval
    try:
        size = engine.nodes_log.stat().st_size
    except OSError:
        size = -1
    while time.monotonic() < deadline and not stop["asked"]:
        time.sleep(0.05)
        try:
            if engine.nodes_log.stat().st_size != size:
                return
        except OSError:
            pass
        if any(r.script is not None and r.script.poll() is not None for r in engine.runs.values()):
            return


def _wait_for_predecessor(lock: Path) -> None:
    """A DAGMan of this DAG that is still alive (its schedd restarted and started the job again
    while the old process lived on) is left to finish first: two DAGMans on one DAG would submit
    nodes twice. The new one then recovers from the nodes log."""
    try:
        pid = int(lock.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return
    if pid == os.getpid():
        return
    while True:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return  # gone
        if not is_dagman_cmdline(cmdline):
            return  # the pid was reused by another program
        time.sleep(1.0)
