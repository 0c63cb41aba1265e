"""The DAGMan job's submit commands, as condor_submit_dag writes them to ``<dag>.condor.sub``.

The DAGMan job is a scheduler-universe job: the schedd runs ``python -m gridbus.console.dagman``
(`DAGMAN_MODULE`) on the submit host as the DAG's owner, in the directory it was submitted from.
Its arguments are condor_dagman's (-Dag, -Lockfile, -MaxIdle, ...); its log is
``<dag>.dagman.log`` and its stdout and stderr ``<dag>.lib.out`` and ``<dag>.lib.err``. It leaves the
queue when DAGMan exits 0 to 2 (done, failed, aborted) and is started again after a crash (a
signal), which puts DAGMan in recovery.

The commands are a plain mapping, not a `Submit`: `Submit.from_dag` (core) and DAGMan's own
submission of a SUBDAG (a client) both make their description from it, and the DAG layer needs
nothing of the submit layer's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridbus.dag.parser import parse_file
from gridbus.errors import HTCondorTypeError, HTCondorValueError
from gridbus.jobargs import join_v2

# The program the DAGMan job runs (``python -m``): DAGMan is a client of the schedd and lives on
# the client side. DAGMan looks for it in a process's command line to tell a live predecessor.
DAGMAN_MODULE = "gridbus.console.dagman"
# Where earlier versions had it: a DAGMan job queued by one of them names it in its Arguments,
# and a schedd started again after an upgrade runs that job (`current_dagman_argv`).
FORMER_DAGMAN_MODULES = ("gridbus.dagman",)


def current_dagman_argv(argv: list[str]) -> list[str]:
    """``argv`` with a former DAGMan module (``-m gridbus.dagman``) named as it is now."""
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] in FORMER_DAGMAN_MODULES:
            return [*argv[:i + 1], DAGMAN_MODULE, *argv[i + 2:]]
    return argv


def is_dagman_cmdline(cmdline: bytes) -> bool:
    """Whether a process's /proc command line is a DAGMan's, of this version or an earlier one."""
    words = cmdline.split(b"\0")
    return any(m.encode() in words for m in (DAGMAN_MODULE, *FORMER_DAGMAN_MODULES))

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


def _checked(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options by lower-case name, refused as htcondor2's from_dag refuses them."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise HTCondorTypeError("options must be a dict")
    out: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise HTCondorTypeError("options keys must be strings")
        if not key:
            raise HTCondorValueError("options key is empty")
        if not isinstance(value, int | bool | str):
            raise HTCondorTypeError(f"option {key}: values must be int, bool or str, not {type(value).__name__}")
        out[key.lower()] = value
    return out


def dagman_job_commands(dag_file: str | os.PathLike[str], options: Mapping[str, Any] | None = None,
                        cwd: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The submit commands of the DAGMan job of ``dag_file``, in condor_submit_dag's order
    (htcondor2's Submit.from_dag options: maxidle, maxjobs, maxpre, maxpost, force, notification,
    dorecov, usedagdir, append). ``cwd`` is the directory ``dag_file`` is relative to (default: this
    process's). A DAG that cannot run is refused here (`DagError`), not in the queue."""
    if not isinstance(dag_file, str | os.PathLike):
        raise HTCondorTypeError(f"the DAG file must be a path, not {type(dag_file).__name__}")
    dag_file = os.fspath(dag_file)
    if not dag_file:
        raise HTCondorValueError("the DAG file's name is empty")
    opts = _checked(options)
    base = Path(cwd) if cwd is not None else Path.cwd()
    dag = parse_file(base / dag_file)
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
    commands = {
        "universe": "scheduler",
        "executable": sys.executable,
        "arguments": join_v2(["-m", DAGMAN_MODULE, *args]).replace('"', '""').join('""'),
        "environment": join_v2([f"{k}={v}" for k, v in sorted(env.items())]).replace('"', '""').join('""'),
        "log": f"{dag_file}.dagman.log",
        "output": f"{dag_file}.lib.out",
        "error": f"{dag_file}.lib.err",
        "on_exit_remove": "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))",
        # condor_rm of the DAGMan job signals SIGUSR1: DAGMan removes its nodes and writes a rescue
        # DAG (the schedd removes them too: jobs whose DAGManJobId is its cluster).
        "MY.RemoveKillSig": '"SIGUSR1"',
    }
    if opts.get("notification"):
        commands["notification"] = str(opts["notification"])
    for name, value in dag.job_attrs.items():
        commands[f"MY.{name}"] = value
    if opts.get("append"):
        for line in str(opts["append"]).splitlines():
            key, eq, value = line.partition("=")
            if eq:
                commands[key.strip()] = value.strip()
    return commands
