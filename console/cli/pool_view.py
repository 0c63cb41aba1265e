"""Pool subcommands: status (condor_status), userprio (condor_userprio), drain (condor_drain) and
analyze (condor_q -better-analyze)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from gridbus.console.cli import formats, gpus_view


def cmd_status(args: argparse.Namespace) -> int:
    from gridbus.console import AdType, Collector

    ad_type = {"startd": AdType.Startd, "schedd": AdType.Schedd, "submitters": AdType.Submitter,
               "negotiator": AdType.Negotiator, "collector": AdType.Collector, "master": AdType.Master,
               "any": AdType.Any}[args.type]
    constraint = args.constraint or "true"
    if args.avail:  # condor_status -avail: the slots no one has claimed
        constraint = f'({constraint}) && State == "Unclaimed"'
    elif args.claimed:  # condor_status -claimed (and -run): the claimed slots, with who holds them
        constraint = f'({constraint}) && State == "Claimed"'
    if args.targets:
        names = " || ".join(f"Machine == {formats.quote(t)} || Name == {formats.quote(t)}" for t in args.targets)
        constraint = f"({constraint}) && ({names})"
    if args.gpus and ad_type == AdType.Startd:  # condor_status -gpus: the slots with GPUs
        constraint = f"({constraint}) && ({gpus_view.CONSTRAINT})"
    with Collector() as collector:
        ads = list(collector.query(ad_type, constraint, formats.af_projection(args) or None))
    chosen = formats.chosen_form(args, ads)
    if chosen is not None:
        sys.stdout.write(chosen)
    elif not ads:
        pass  # as condor_status: no ad, no table (not a header over zeros)
    elif ad_type != AdType.Startd:
        print(f"{'Name':<40} {'MyType':<12} {'MyAddress'}")
        for ad in sorted(ads, key=lambda a: str(formats.get(a, "Name", ""))):
            print(f"{str(formats.get(ad, 'Name', '?')):<40} {str(formats.get(ad, 'MyType', '?')):<12} {formats.get(ad, 'MyAddress', '')}")
    elif args.gpus:
        sys.stdout.write(formats.status_totals(ads) if args.total else gpus_view.gpus_table(ads))
    elif args.claimed:
        sys.stdout.write(formats.status_run_totals(ads) if args.total else formats.status_run_table(ads))
    elif args.total:
        sys.stdout.write(formats.status_totals(ads))
    else:
        sys.stdout.write(formats.status_table(ads))
    return 0


def cmd_userprio(args: argparse.Namespace) -> int:
    from gridbus.console.negotiator import Negotiator

    with Negotiator(args.url, timeout=10.0) as negotiator:
        if args.setprio:
            user, value = args.setprio[0], _number(args.setprio[1], "-setprio")
            negotiator.setPriority(user, value)
            print(f"The priority of {user} was set to {value:g}")
            return 0
        if args.setfactor:
            user, value = args.setfactor[0], _number(args.setfactor[1], "-setfactor")
            negotiator.setFactor(user, value)
            print(f"The priority factor of {user} was set to {value:g}")
            return 0
        rows = negotiator.getPriorities()
    if args.json:
        sys.stdout.write(formats.json_form(rows))
        return 0
    groups = [r for r in rows if r.get("IsAccountingGroup")]
    rows = [r for r in rows if not r.get("IsAccountingGroup")]
    print(f"{'User Name':<30} {'Effective Priority':>18} {'Priority Factor':>15} {'In Use':>7} {'Usage (wghted-hrs)':>19}")
    print(f"{'-' * 30} {'-' * 18} {'-' * 15} {'-' * 7} {'-' * 19}")
    for r in rows:
        print(
            f"{str(r.get('Name', '?')):<30} {float(r.get('EffectivePriority', 0)):>18.2f} "
            f"{float(r.get('PriorityFactor', 1)):>15.2f} {int(r.get('ResourcesUsed', 0)):>7} "
            f"{float(r.get('AccumulatedUsage', 0)) / 3600:>19.2f}"
        )
    print(f"{'-' * 30} {'-' * 18} {'-' * 15} {'-' * 7} {'-' * 19}")
    print(f"{'Number of users: ' + str(len(rows)):<30}")
    if groups:
        print()
        sys.stdout.write(_quota_table(groups))
    return 0


def _quota_table(groups: list[dict[str, Any]]) -> str:
    """The groups as condor_userprio -quotas shows them, with the slot weight each uses."""
    rule = f"{'-' * 24} {'-' * 9} {'-' * 9} {'-' * 7} {'-' * 9} {'-' * 9} {'-' * 10}\n"
    out = [f"{'Group':<24} {'Effective':>9} {'Config':>9} {'Use':<7} {'Subtree':>9} {'In Use':>9} {'Requested':>10}\n",
           f"{'Name':<24} {'Quota':>9} {'Quota':>9} {'Surplus':<7} {'Quota':>9} {'':>9} {'Resources':>10}\n", rule]
    for g in groups:
        surplus = "yes" if g.get("AcceptSurplus") else "no"
        out.append(
            f"{str(g.get('Name', '?')):<24} {float(g.get('EffectiveQuota', 0)):>9.2f} "
            f"{float(g.get('ConfigQuota', 0)):>9.2f} {surplus:<7} {float(g.get('SubtreeQuota', 0)):>9.2f} "
            f"{float(g.get('ResourcesUsed', 0)):>9.2f} {float(g.get('Requested', 0)):>10.0f}\n"
        )
    out.append(rule)
    out.append(f"{'Number of groups: ' + str(len(groups)):<50}ByQuota\n")
    return "".join(out)


def _number(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{option} takes a number, not {text!r}") from None


def cmd_drain(args: argparse.Namespace) -> int:
    from gridbus.console import AdType, Collector
    from gridbus.console.startd import Startd

    with Collector() as collector:
        ads = collector.query(AdType.Startd, f"Machine == {formats.quote(args.machine)}", ["Machine", "MyAddress"])
    if not ads:
        raise LookupError(f"no machine named {args.machine} in the pool")
    with Startd(ads[0]) as startd:
        if args.cancel:
            startd.cancelDrainJobs(args.request_id)
            print(f"Sent request to cancel draining on {args.machine}")
            return 0
        request = startd.drainJobs(args.how_fast, "resume" if args.resume_on_completion else "nothing", args.reason)
    print(f"Sent request to drain {args.machine} (request id {request})")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from gridbus.console import Schedd
    from gridbus.console.cli.analyze import better_analyze
    from gridbus.console.negotiator import Negotiator

    if not re.fullmatch(r"\d+\.\d+", args.job):
        raise ValueError(f"{args.job!r} is not a job id (cluster.proc)")
    with Schedd() as schedd:
        job = schedd.get_ad(args.job)
        with Negotiator(session=schedd.session) as negotiator:
            out = negotiator.analyze(dict(job))
    sys.stdout.write(better_analyze(job, out))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="show the pool's slots and daemons (condor_status)")
    p.add_argument("targets", nargs="*", metavar="MACHINE", help="only these machines or slots")
    p.add_argument("-constraint", "--constraint", metavar="EXPR")
    formats.add_output_options(p)
    p.add_argument("-total", "-totals", "--total", dest="total", action="store_true", help="only the totals table")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("-avail", "--avail", action="store_true", help="only the slots that are not claimed (Unclaimed)")
    shown.add_argument("-claimed", "--claimed", "-run", "--run", dest="claimed", action="store_true",
                       help="only the claimed slots, with the user and the submit machine holding each")
    p.add_argument("-gpus", "--gpus", action="store_true",
                   help="the slots with GPUs: their free GPUs, the devices' memory and names (condor_status -gpus)")
    kinds = p.add_mutually_exclusive_group()
    for kind in ("schedd", "submitters", "negotiator", "collector", "master", "any"):
        kinds.add_argument(f"-{kind}", f"--{kind}", dest="type", action="store_const", const=kind)
    p.set_defaults(handler=cmd_status, type="startd")

    p = sub.add_parser("userprio", help="user priorities (condor_userprio)")
    p.add_argument("-setprio", "--setprio", nargs=2, metavar=("USER", "VALUE"))
    p.add_argument("-setfactor", "--setfactor", nargs=2, metavar=("USER", "VALUE"))
    p.add_argument("-json", "--json", action="store_true")
    p.set_defaults(handler=cmd_userprio)

    p = sub.add_parser("drain", help="drain a machine (condor_drain)")
    p.add_argument("machine", metavar="MACHINE")
    p.add_argument("-how-fast", "--how-fast", dest="how_fast", choices=["graceful", "quick", "fast"], default="graceful")
    p.add_argument("-resume-on-completion", "--resume-on-completion", dest="resume_on_completion", action="store_true")
    p.add_argument("-reason", "--reason", metavar="TEXT")
    p.add_argument("-cancel", "--cancel", action="store_true", help="stop draining")
    p.add_argument("-request-id", "--request-id", dest="request_id", metavar="ID")
    p.set_defaults(handler=cmd_drain)

    p = sub.add_parser("analyze", help="why a job does not run (condor_q -better-analyze)")
    p.add_argument("job", metavar="CLUSTER.PROC")
    p.set_defaults(handler=cmd_analyze)
