"""The DAGMan job's submit description, as condor_submit_dag writes ``<dag>.condor.sub``.

The DAGMan job is a scheduler-universe job: the schedd runs ``python -m gridbus.dagman`` on the
submit host as the DAG's owner, in the directory it was submitted from. Its arguments are
condor_dagman's (-Dag, -Lockfile, -MaxIdle, ...); its log is ``<dag>.dagman.log`` and its stdout and
stderr ``<dag>.lib.out`` and ``<dag>.lib.err``. It leaves the queue when DAGMan exits 0 to 2 (done,
failed, aborted) and is started again after a crash (a signal), which puts DAGMan in recovery.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridbus.dag import parse_file
from gridbus.jobargs import join_v2
from gridbus.submit import Submit

# condor_submit_dag's options that become DAGMan arguments: option -> (argument, takes a value).
_ARGUMENTS = {
    "maxidle": ("-MaxIdle", True), "maxjobs": ("-MaxJobs", True), "maxpre": ("-MaxPre", True),
    "maxpost": ("-MaxPost", True), "force": ("-Force", False), "dorecov": ("-DoRecovery", False),
    "dorecovery": ("-DoRecovery", False), "usedagdir": ("-UseDagDir", False),
}
# The environment DAGMan needs to reach the pool and find gridbus.
_ENV_PREFIXES = ("GRIDBUS_", "PYTHON", "PATH", "HOME", "USER", "LOGNAME", "VIRTUAL_ENV")


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() not in ("", "0", "false", "no", "none")


def dagman_submit(dag_file: str, options: Mapping[str, Any] | None = None,
                  cwd: str | os.PathLike[str] | None = None) -> Submit:
    """The Submit for the DAGMan job of ``dag_file`` (htcondor2's Submit.from_dag options:
    maxidle, maxjobs, maxpre, maxpost, force, notification, dorecov, ...)."""
    opts = {str(k).lower(): v for k, v in (options or {}).items()}
    base = Path(cwd) if cwd is not None else Path.cwd()
    dag = parse_file(base / dag_file)  # a DAG that cannot run is refused here, not in the queue
    args = ["-p", "0", "-f", "-l", ".", "-Lockfile", f"{dag_file}.lock", "-AutoRescue", "1",
            "-DoRescueFrom", "0", "-Dag", dag_file]
    for name, (flag, valued) in _ARGUMENTS.items():
        if name not in opts:
            continue
        if valued:
            args += [flag, str(int(opts[name]))]
        elif _truthy(opts[name]):
            args.append(flag)
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    sub = Submit({
        "universe": "scheduler",
        "executable": sys.executable,
        "arguments": join_v2(["-m", "gridbus.dagman", *args]).replace('"', '""').join('""'),
        "environment": join_v2([f"{k}={v}" for k, v in sorted(env.items())]).replace('"', '""').join('""'),
        "log": f"{dag_file}.dagman.log",
        "output": f"{dag_file}.lib.out",
        "error": f"{dag_file}.lib.err",
        "on_exit_remove": "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))",
        # condor_rm of the DAGMan job signals SIGUSR1: DAGMan removes its nodes and writes a rescue
        # DAG (the schedd removes them too: jobs whose DAGManJobId is its cluster).
        "MY.RemoveKillSig": '"SIGUSR1"',
    })
    if cwd is not None:
        sub.cwd = str(cwd)
    if opts.get("notification"):
        sub["notification"] = str(opts["notification"])
    for name, value in dag.job_attrs.items():
        sub[f"MY.{name}"] = value
    if opts.get("append"):
        for line in str(opts["append"]).splitlines():
            key, eq, value = line.partition("=")
            if eq:
                sub[key.strip()] = value.strip()
    return sub


def write_submit_file(dag_file: str, options: Mapping[str, Any] | None = None) -> Path:
    """Write ``<dag>.condor.sub`` (condor_submit_dag -no_submit) and return its path."""
    sub = dagman_submit(dag_file, options)
    path = Path(f"{dag_file}.condor.sub")
    path.write_text(str(sub) + "\nqueue\n")
    return path
