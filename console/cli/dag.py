"""`gridbus submit_dag` (condor_submit_dag) and the `-dag` view of `gridbus q`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from gridbus.console.cli import formats


def cmd_submit_dag(args: argparse.Namespace) -> int:
    from gridbus.console.schedd import Schedd
    from gridbus.submit import Submit

    dag_file = args.dag
    sub_file = Path(f"{dag_file}.condor.sub")
    rescue = any(Path(dag_file).parent.glob(Path(dag_file).name + ".rescue[0-9][0-9][0-9]"))
    if sub_file.exists() and not args.force and not rescue:
        # A rescue DAG means a resubmission of a failed DAG: its files are rewritten (HTCondor's rule).
        raise FileExistsError(f"{sub_file} exists: use -f (-force) to overwrite it and the DAG's other files")
    if args.force:
        # -force: DAGMan's files of an earlier run are replaced, its rescue DAGs set aside (.old),
        # and the original DAG runs from the start.
        for p in Path(dag_file).parent.glob(Path(dag_file).name + ".rescue[0-9][0-9][0-9]"):
            p.rename(p.with_name(p.name + ".old"))
        for suffix in (".nodes.log", ".dagman.log", ".lock"):
            Path(f"{dag_file}{suffix}").unlink(missing_ok=True)
    options: dict[str, Any] = {}
    for name in ("maxidle", "maxjobs", "maxpre", "maxpost"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.notification:
        options["notification"] = args.notification
    if args.dorecovery:
        options["dorecov"] = True
    if args.append:
        options["append"] = "\n".join(args.append)
    sub = Submit.from_dag(dag_file, options)
    sub_file.write_text(str(sub))  # str() ends with its queue statement
    if args.no_submit:
        print(f"File for submitting this DAG to HTCondor: {sub_file}")
        return 0
    result = Schedd(args.name or None).submit(sub)
    print("-----------------------------------------------------------------------")
    print(f"File for submitting this DAG to HTCondor           : {sub_file}")
    print(f"Log of DAGMan debugging messages                 : {dag_file}.dagman.out")
    print(f"Log of HTCondor library output                   : {dag_file}.lib.out")
    print(f"Log of HTCondor library error messages           : {dag_file}.lib.err")
    print(f"Log of the life of condor_dagman itself          : {dag_file}.dagman.log")
    print()
    print("Submitting job(s).")
    print(f"1 job(s) submitted to cluster {result.cluster()}.")
    print("-----------------------------------------------------------------------")
    return 0


def dag_table(ads: list[Any]) -> str:
    """condor_q -dag -nobatch: each DAGMan job, then its nodes indented under it by DAGNodeName."""
    by_dag: dict[Any, list[Any]] = {}
    top: list[Any] = []
    for ad in ads:
        parent = formats.get(ad, "DAGManJobId")
        (by_dag.setdefault(parent, []) if parent is not None else top).append(ad)
    rows = [" ID         OWNER          SUBMITTED    ST  CMD"]

    def add(ad: Any, depth: int) -> None:
        job = f"{formats.get(ad, 'ClusterId')}.{formats.get(ad, 'ProcId')}"
        node = formats.get(ad, "DAGNodeName")
        cmd = f"|-{node}" if node is not None else os.path.basename(str(formats.get(ad, "Cmd", "")))
        status = "XIRXCHE"[int(formats.get(ad, "JobStatus", 0) or 0) % 7] if formats.get(ad, "JobStatus") else "?"
        rows.append(f"{job:<11} {str(formats.get(ad, 'Owner', '?')):<14} {formats.submitted(formats.get(ad, 'QDate')):<12} "
                    f"{status:<3} {'  ' * depth}{cmd}")
        for child in by_dag.pop(formats.get(ad, "ClusterId"), []):
            add(child, depth + 1)

    for ad in top:
        add(ad, 0)
    for orphans in by_dag.values():  # nodes whose DAGMan job is not in the listing
        for ad in orphans:
            add(ad, 1)
    return "\n".join(rows) + "\n"


def register(sub: Any) -> None:
    p = sub.add_parser("submit_dag", help="submit a DAG of jobs, run by DAGMan (condor_submit_dag)")
    p.add_argument("dag", metavar="DAG_FILE")
    p.add_argument("-maxidle", "--maxidle", type=int, metavar="N", help="at most N idle node jobs (default 1000)")
    p.add_argument("-maxjobs", "--maxjobs", type=int, metavar="N", help="at most N node clusters in the queue (0: no limit)")
    p.add_argument("-maxpre", "--maxpre", type=int, metavar="N", help="at most N PRE scripts at once (default 20)")
    p.add_argument("-maxpost", "--maxpost", type=int, metavar="N", help="at most N POST scripts at once (default 20)")
    p.add_argument("-f", "-force", "--force", dest="force", action="store_true",
                   help="overwrite the files of an earlier run; set its rescue DAGs aside and run from the start")
    p.add_argument("-notification", "--notification", metavar="WHEN", help="never, always, complete or error")
    p.add_argument("-a", "-append", "--append", action="append", metavar="LINE",
                   help="a submit command added to the DAGMan job's submit description")
    p.add_argument("-DoRecovery", "-dorecovery", dest="dorecovery", action="store_true",
                   help="start in recovery mode (read the nodes log)")
    p.add_argument("-no_submit", "--no-submit", dest="no_submit", action="store_true",
                   help="write <dag>.condor.sub, submit nothing")
    p.add_argument("-name", "--name", metavar="SCHEDD", help="the schedd to submit to")
    p.set_defaults(handler=cmd_submit_dag)


