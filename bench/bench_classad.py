"""ClassAd evaluation speed: a typical job Requirements against a typical machine ad.

Prints evaluations per second for gridbus (compiled fast path on plain dicts, on ClassAds, and
the classad2-style ExprTree.eval) and for HTCondor's classad2 called from Python, in the same run,
with the ratio. ``run(quick)`` returns the figures for bench/run_all.py.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

JOB_REQUIREMENTS = (
    '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && '
    "(TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && "
    "((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))"
)
JOB = {"MyType": "Job", "RequestCpus": 1, "RequestDisk": 43, "RequestMemory": 128,
       "FileSystemDomain": "vm", "Owner": "alice", "ClusterId": 1, "ProcId": 0}
MACHINE = {"MyType": "Machine", "Name": "slot1@node7", "Arch": "X86_64", "OpSys": "LINUX", "Disk": 10_000_000,
           "Memory": 8192, "Cpus": 4, "FileSystemDomain": "node7", "HasFileTransfer": True,
           "State": "Unclaimed", "Activity": "Idle", "LoadAvg": 0.1, "KeyboardIdle": 1000}


def _rate(fn: Any, seconds: float) -> float:
    n = 0
    batch = 200
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def run(quick: bool = False) -> dict:
    import gridbus.classad as ours

    seconds = 0.5 if quick else 3.0
    compiled = ours.compile(JOB_REQUIREMENTS)
    assert compiled.test(JOB, MACHINE)
    job_ad, machine_ad = ours.ClassAd(JOB), ours.ClassAd(MACHINE)
    expr = ours.ExprTree(JOB_REQUIREMENTS)
    figures: dict[str, Any] = {
        "gridbus_compiled_dict_evals_per_s": _rate(lambda: compiled.test(JOB, MACHINE), seconds),
        "gridbus_compiled_classad_evals_per_s": _rate(lambda: compiled.test(job_ad, machine_ad), seconds),
        "gridbus_exprtree_eval_per_s": _rate(lambda: expr.eval(job_ad, machine_ad), seconds),
    }
    # Hostile expressions (issue 14): with an attribute computed once per evaluation the doubling
    # chain is linear (it was 2**levels additions), and regexp stops at its match budget.
    chain = "[" + "; ".join(["a0=1"] + [f"a{i}=a{i-1}+a{i-1}" for i in range(1, 31)]) + "].a30 > 0"
    t0 = time.perf_counter()
    assert ours.compile(chain).test({})
    figures["hostile_doubling_30_levels_ms"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    ours.compile('regexp("(a|aa)+$", "' + "a" * 60 + '!")').test({})
    figures["hostile_regexp_ms"] = (time.perf_counter() - t0) * 1000
    try:
        # htcondor2 must be imported before classad2 to get the daemons' semantics.
        importlib.import_module("htcondor2")
        classad2 = importlib.import_module("classad2")
    except ImportError:
        figures["classad2_evals_per_s"] = None
        figures["ratio_gridbus_over_classad2"] = None
        return figures
    tjob, tmachine = classad2.ClassAd(JOB), classad2.ClassAd(MACHINE)
    texpr = classad2.ExprTree(JOB_REQUIREMENTS)
    assert texpr.eval(tjob, tmachine) is True
    theirs = _rate(lambda: texpr.eval(tjob, tmachine), seconds)
    figures["classad2_evals_per_s"] = theirs
    figures["ratio_gridbus_over_classad2"] = figures["gridbus_compiled_dict_evals_per_s"] / theirs
    figures["ratio_exprtree_over_classad2"] = figures["gridbus_exprtree_eval_per_s"] / theirs
    return figures


def main() -> None:
    figures = run()
    print("ClassAd evaluation: job Requirements (7 clauses) against a machine ad")
    for key, value in figures.items():
        print(f"  {key:40s} {value:,.2f}" if isinstance(value, float) else f"  {key:40s} {value}")


if __name__ == "__main__":
    main()
