"""Job subcommands: submit, q, rm, hold, release, suspend, continue, vacate_job, edit, history, wait
(condor_submit, condor_q, ...).

(One module over 500 lines: the job commands share their options, constraints and answers.)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from typing import Any

from gridbus.classad.values import is_number
from gridbus.console.cli import formats

_JOB_ID = re.compile(r"^\d+(\.\d+)?$")


def _schedd(args: argparse.Namespace) -> Any:
    from gridbus.console import Schedd

    name = getattr(args, "name", None)
    return Schedd(name) if name else Schedd()


def _me(args: argparse.Namespace) -> str:
    from gridbus.bus import BrokerURL

    return BrokerURL(args.url).user


def selection(targets: list[str], constraint: str | None, everyone: bool = False) -> str | None:
    """A constraint from job ids (`c`, `c.p`), owner names and -constraint, as condor_q/condor_rm read them."""
    clauses: list[str] = []
    for t in targets:
        if _JOB_ID.match(t):
            c, _, p = t.partition(".")
            clauses.append(f"(ClusterId == {int(c)} && ProcId == {int(p)})" if p else f"ClusterId == {int(c)}")
        elif re.fullmatch(r"[A-Za-z0-9_.@-]+", t):
            clauses.append(f"Owner == {formats.quote(t)}")
        else:
            raise ValueError(f"{t!r} is neither a job id (cluster or cluster.proc) nor a user name")
    parts = []
    if clauses:
        parts.append("(" + " || ".join(clauses) + ")")
    if constraint:
        parts.append(f"({constraint})")
    if parts:
        return " && ".join(parts)
    return "true" if everyone else None


# ------------------------------------------------------------------ submit
def cmd_submit(args: argparse.Namespace) -> int:
    from gridbus.submit import Submit, SubmitError, UnusedMacroWarning

    path = args.file
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as exc:
        raise OSError(f"cannot read the submit file {path}: {exc.strerror}") from None
    for extra in args.append or []:
        # -append lines go before the queue statement, as condor_submit -a does.
        text = _insert_before_queue(text, extra)
    where = "" if path == "-" else f"{path}: "
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sub = Submit(text)
            if path != "-":
                sub.submit_file = path  # $(SUBMIT_FILE)
            if args.queue:
                sub.setQArgs(args.queue)
            if args.batch_name:
                sub["batch_name"] = args.batch_name
            sub.setSubmitMethod(0, allow_reserved_values=True)  # condor_submit
            if args.dry_run is not None:
                built = sub.build()
        except SubmitError as exc:
            raise SubmitError(f"{where}{exc}") from None
    for w in caught:
        if args.unused and issubclass(w.category, UnusedMacroWarning):
            continue  # condor_submit -unused: no word of lines left unused
        print(f"WARNING: {where}{w.message}", file=sys.stderr)
    if args.dry_run is not None:
        # condor_submit -dry-run FILE: the job ads to FILE ('-': standard output), nothing submitted.
        jobs = built.jobs()
        ads = formats.long_form(jobs)
        print("Dry-Run job(s)" + "." * min(len(jobs), 80))
        print(f"{len(jobs)} job(s) dry-run to cluster {built.cluster_ad.get('ClusterId', 1)}.")
        if args.dry_run == "-":
            sys.stdout.write(ads)
        else:
            try:
                with open(args.dry_run, "w", encoding="utf-8") as out:
                    out.write(ads)
            except OSError as exc:
                raise OSError(f"cannot write the dry-run file {args.dry_run}: {exc.strerror}") from None
        return 0
    schedd = _schedd(args)
    try:
        result = schedd.submit(sub, spool=args.spool)
    except SubmitError as exc:  # (the jobs are built here: their errors name the file too)
        raise SubmitError(f"{where}{exc}") from None
    cluster, first, n = result.cluster(), result.first_proc(), result.num_procs()
    if args.terse:
        print(f"{cluster}.{first} - {cluster}.{first + n - 1}")
    else:
        print("Submitting job(s)" + "." * min(n, 80))
        print(f"{n} job(s) submitted to cluster {cluster}.")
    if args.spool:
        # condor_submit -spool: the input goes to the schedd's spool now; `gridbus transfer_data`
        # fetches the output later, from wherever.
        if not args.terse:
            print(f"Spooling data files for {n} job(s).")
        schedd.spool(result)
    return 0


def cmd_transfer_data(args: argparse.Namespace) -> int:
    """condor_transfer_data: the output of completed spooled jobs, into their submit directories."""
    if args.all:
        spec: Any = f'Owner == "{_me(args)}"'
    elif args.constraint:
        spec = args.constraint
    elif args.ids:
        spec = list(args.ids)
    else:
        print("transfer_data: name jobs (CLUSTER[.PROC]), or give -constraint or -all", file=sys.stderr)
        return 2
    _schedd(args).retrieve(spec)
    print("Fetched the output of the completed spooled jobs.")
    return 0


def _insert_before_queue(text: str, line: str) -> str:
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if re.match(r"^\s*queue(\s|$)", ln, re.I):
            return "\n".join([*lines[:i], line, *lines[i:]]) + "\n"
    return text.rstrip("\n") + "\n" + line + "\n"


def _wait_in_queue(args: argparse.Namespace, job_id: str) -> int:
    """`gridbus wait CLUSTER[.PROC]` without a user log: until the jobs have left the schedd's queue.

    A submit file without `log =` (the most common first one) has no log to follow, so the schedd is
    asked instead. Jobs that are all held never finish by themselves: that is said, with the hold
    reason, and the exit status is 1."""
    c, _, p = job_id.partition(".")
    constraint = f"ClusterId == {int(c)}" + (f" && ProcId == {int(p)}" if p else "")
    schedd = _schedd(args)
    deadline = None if args.wait is None else time.monotonic() + args.wait
    seen = 0
    while True:
        ads = list(schedd.query(constraint, ["ProcId", "JobStatus", "HoldReason"]))
        seen = max(seen, len(ads))
        if not ads:
            break
        held = [a for a in ads if formats.get(a, "JobStatus") == 5]
        if len(held) == len(ads):
            print(f"{len(held)} job(s) of {job_id} are held and will not finish by themselves: "
                  f"{formats.get(held[0], 'HoldReason', '?')}")
            return 1
        if deadline is not None and time.monotonic() >= deadline:
            print(f"Time expired: {len(ads)} job(s) of {job_id} still in the queue.")
            return 1
        time.sleep(0.5)  # polling interval of the queue, not a wait for a condition in a test
    if not seen and not schedd.history(constraint, ["ProcId"], match=1):
        raise LookupError(f"no job {job_id} in the queue or the history of {_schedd_address(schedd)}")
    print("All jobs done.")
    return 0


# ------------------------------------------------------------------ q
def cmd_q(args: argparse.Namespace) -> int:
    if not args.global_:
        return _q_one(_schedd(args), args)
    # condor_q -global: every schedd the collector knows, each under its own banner and totals.
    from gridbus.console import Collector, DaemonType, Schedd

    ads = sorted(Collector().locateAll(DaemonType.Schedd), key=lambda ad: str(ad.get("Name", "")))
    if not ads:
        print("All queues are empty (no schedd is advertised)")
        return 0
    rc = 0
    for ad in ads:
        rc = max(rc, _q_one(Schedd(ad), args, banner=True))
    return rc


def _q_one(schedd: Any, args: argparse.Namespace, banner: bool = False) -> int:
    me = _me(args)
    constraint = selection(args.targets, args.constraint)
    everyone_mode = args.allusers or bool(args.targets)
    if constraint is None:
        constraint = "true" if everyone_mode else f"Owner == {formats.quote(me)}"
    if args.run:
        constraint = f"({constraint}) && JobStatus == 2"
    if args.hold:
        constraint = f"({constraint}) && JobStatus == 5"
    projection = formats.af_projection(args)
    if args.totals and not args.af and not args.format:
        projection = ["Owner", "JobStatus"]
    if args.autocluster:
        return _autocluster(schedd, constraint, args)
    if args.analyze:
        return _analyze(schedd, constraint, args)
    if args.totals and formats.chosen_form(args, []) is None:
        return _totals_only(schedd, constraint, me, banner)
    ads = list(schedd.query(constraint=constraint, projection=projection, limit=args.limit))
    chosen = formats.chosen_form(args, ads)
    if chosen is not None:
        sys.stdout.write(chosen)
        return 0
    out = sys.stdout
    if banner or not args.totals:
        out.write(formats.schedd_banner(_schedd_name(schedd), _schedd_address(schedd)))
    if not args.totals:
        if args.dag:
            from gridbus.console.cli.dag import dag_table

            out.write(dag_table(ads))
        elif args.run:
            out.write(formats.run_table(ads))
        elif args.hold:
            out.write(formats.hold_table(ads))
        elif args.nobatch:
            out.write(formats.nobatch_table(ads))
        else:
            out.write(formats.batch_table(ads))
    # The user's and the whole queue's totals are the schedd's counts (SummaryOnly), never a
    # download of every job in the queue.
    owners, everyone = _summaries(schedd, "true")
    out.write(f"\nTotal for query: {formats.totals(ads)}\n")
    out.write(f"Total for {me}: {formats.summary_totals(owners.get(me))}\n")
    out.write(f"Total for all users: {formats.summary_totals(everyone)}\n")
    return 0


def _analyze(schedd: Any, constraint: str, args: argparse.Namespace) -> int:
    """condor_q -better-analyze: each selected idle job, analyzed by the negotiator against the
    collector's Machine ads (-machine: only that slot or machine)."""
    from gridbus.console.cli.analyze import better_analyze
    from gridbus.console.negotiator import Negotiator

    jobs = list(schedd.query(constraint=f"({constraint}) && JobStatus == 1", projection=[], limit=args.limit))
    sys.stdout.write(formats.schedd_banner(_schedd_name(schedd), _schedd_address(schedd)))
    if not jobs:
        print("No idle jobs match: -better-analyze explains why an idle job does not run.")
        return 0
    with Negotiator(session=schedd.session) as negotiator:
        for job in jobs:
            answer = negotiator.analyze(dict(job), machine=args.machine)
            sys.stdout.write(better_analyze(job, answer) + "\n")
    return 0


def _summaries(schedd: Any, constraint: str) -> tuple[dict[str, Any], Any]:
    """The schedd's Summary ads of the jobs that pass ``constraint``: per owner, and the total."""
    from gridbus.console.schedd import QueryOpt

    ads = list(schedd.query(constraint=constraint, opts=QueryOpt.SummaryOnly))
    owners = {str(formats.get(a, "Owner")): a for a in ads if formats.get(a, "Owner") is not None}
    return owners, next((a for a in ads if formats.get(a, "Owner") is None), None)


def _totals_only(schedd: Any, constraint: str, me: str, banner: bool) -> int:
    """q -totals from the schedd's Summary ads (counts kept per owner), not from every job's ad:
    one small answer however long the queue."""
    owners, everyone = _summaries(schedd, "true")
    if constraint == "true":
        chosen = everyone
    elif constraint == f"Owner == {formats.quote(me)}":
        chosen = owners.get(me)
    else:
        chosen = _summaries(schedd, constraint)[1]
    out = sys.stdout
    if banner:
        out.write(formats.schedd_banner(_schedd_name(schedd), _schedd_address(schedd)))
    out.write(f"\nTotal for query: {formats.summary_totals(chosen)}\n")
    out.write(f"Total for {me}: {formats.summary_totals(owners.get(me))}\n")
    out.write(f"Total for all users: {formats.summary_totals(everyone)}\n")
    return 0


def _schedd_name(schedd: Any) -> str:
    for attr in ("name", "Name"):
        value = getattr(schedd, attr, None)
        if isinstance(value, str) and value:
            return value
    address = _schedd_address(schedd)
    return address.split("@", 1)[-1]


def _schedd_address(schedd: Any) -> str:
    value = getattr(schedd, "address", None)
    return value if isinstance(value, str) and value else "schedd"


def _autocluster(schedd: Any, constraint: str, args: argparse.Namespace) -> int:
    """condor_q -autocluster: the schedd's own autoclusters (idle jobs that match alike), one row each.

    The grouping is the schedd's (Query with the AutoCluster option), the same the negotiator is
    offered, so the ids here are the ones GetResourceRequests and the match log name."""
    from gridbus.console.schedd import QueryOpt

    groups = list(schedd.query(constraint=constraint, limit=args.limit, opts=QueryOpt.AutoCluster))
    if args.long or args.json:
        sys.stdout.write(formats.json_form(groups) if args.json else formats.long_form(groups))
        return 0
    print(" AUTO_ID  COUNT OWNER    CPUS  MEMORY     DISK REQUIREMENTS")
    for ad in groups:
        print(
            f"{formats.get(ad, 'AutoClusterId', '?')!s:>8} {formats.get(ad, 'JobCount', 0)!s:>6} "
            f"{str(formats.get(ad, 'Owner', '?')):<8} {formats.plain(formats.get(ad, 'RequestCpus')):>4} "
            f"{formats.plain(formats.get(ad, 'RequestMemory')):>7} {formats.plain(formats.get(ad, 'RequestDisk')):>8} "
            f"{formats.plain(formats.get(ad, 'Requirements'))}"
        )
    print(f"\n{len(groups)} autoclusters; {sum(int(formats.get(ad, 'JobCount', 0) or 0) for ad in groups)} idle jobs")
    return 0


# ------------------------------------------------------------------ rm / hold / release
_VERB = {"rm": ("Remove", "marked for removal"), "hold": ("Hold", "held"), "release": ("Release", "released"),
         "suspend": ("Suspend", "suspended"), "continue": ("Continue", "continued"),
         "vacate_job": ("Vacate", "vacated")}  # (-fast: "fast-vacated", below)
# What condor_rm and its siblings say of a job the action was not done to, by the result's count.
_BAD_STATUS = {"release": "not held to be released", "vacate_job": "not running to be vacated",
               "suspend": "not running to be suspended", "continue": "not running to be continued"}
_ALREADY_DONE = {"hold": "already held", "rm": "already marked for removal", "suspend": "already suspended",
                 "continue": "already running"}


def _not_done(command: str, verb: str, job: str, result: Any) -> str:
    """HTCondor's sentence for job ``job`` (cluster.proc) that ``verb`` was not done to."""
    def n(total: str) -> int:
        return int(formats.get(result, total, 0) or 0)

    if n("TotalNotFound"):
        return f"Job {job} not found"
    if n("TotalPermissionDenied"):
        return f"Permission denied to {verb} job {job}"
    if not (n("TotalBadStatus") or n("TotalAlreadyDone")):
        return f"No result found for job {job}"
    phrase = _BAD_STATUS.get(command) if n("TotalBadStatus") else _ALREADY_DONE.get(command)
    if phrase and verb == "fast-vacate":
        phrase = "not running to be fast-vacated"
    return f"Job {job} {phrase}" if phrase else f"Invalid result for job {job}"  # (as condor_hold of a finished job)


def cmd_act(args: argparse.Namespace) -> int:
    from gridbus.console import JobAction

    action_name, done = _VERB[args.command]
    verb = action_name.lower()
    if getattr(args, "fast", False):
        action_name, done, verb = "VacateFast", "fast-vacated", "fast-vacate"  # condor_vacate_job -fast: SIGKILL
    if not args.targets and not args.constraint and not args.all:
        raise ValueError(f"say which jobs: job ids, user names, -constraint EXPR or -all (see gridbus {args.command} -h)")
    schedd = _schedd(args)
    failed = False
    # (job spec, the job id when it names one job, which jobs in condor_rm's words: " in cluster 5")
    specs: list[tuple[Any, str | None, str]] = []
    if args.all or args.constraint:
        constraint = selection(args.targets, args.constraint, everyone=True) if args.constraint else "true"
        if args.all and not args.constraint:
            constraint = f"Owner == {formats.quote(_me(args))}"
        specs.append((constraint, None, "" if args.all else f" matching constraint ({args.constraint})"))
    else:
        for t in args.targets:
            if _JOB_ID.match(t):
                specs.append((t, t if "." in t else None, f" in cluster {t}"))
            else:
                specs.append((selection([t], None), None, f' of user "{t}"'))
    for spec, job, which in specs:
        result = schedd.act(getattr(JobAction, action_name), spec, reason=args.reason)
        ok = int(formats.get(result, "TotalSuccess", 0) or 0)
        denied = int(formats.get(result, "TotalPermissionDenied", 0) or 0)
        if ok:
            # condor_rm's words: "Job 5.0 marked for removal", "All jobs in cluster 5 have been held".
            print(f"Job {job} {done}" if job else f"All jobs{which} have been {done}")
        if (args.all or args.constraint) and ok:
            denied = 0  # a constraint acts on the jobs one may act on: others' are not an error, as for condor_hold
        if denied or not ok:
            failed = True
            print(_not_done(args.command, verb, job, result) if job else f"Couldn't find/{verb} all jobs{which}",
                  file=sys.stderr)
    return 1 if failed else 0


# ------------------------------------------------------------------ edit
def cmd_edit(args: argparse.Namespace) -> int:
    schedd = _schedd(args)
    if args.constraint:
        spec: Any = selection(args.targets, args.constraint, everyone=True)
    elif len(args.targets) == 1 and _JOB_ID.match(args.targets[0]):
        spec = args.targets[0]
    elif args.targets:
        spec = selection(args.targets, None)
    else:
        raise ValueError("say which jobs to edit: a job id, a user name or -constraint EXPR")
    count = schedd.edit(spec, args.attr, args.value)
    n = count if isinstance(count, int) else formats.get(count, "TotalChangedAds", "the")
    print(f'Set attribute "{args.attr}" for {n} matching jobs.')
    return 0


# ------------------------------------------------------------------ history
HISTORY_HEADER = " ID     OWNER          SUBMITTED   RUN_TIME     ST  COMPLETED   CMD"


def cmd_history(args: argparse.Namespace) -> int:
    schedd = _schedd(args)
    constraint = selection(args.targets, args.constraint, everyone=True) or "true"
    ads = list(schedd.history(constraint, formats.af_projection(args), args.limit))
    chosen = formats.chosen_form(args, ads)
    if chosen is not None:
        sys.stdout.write(chosen)
    else:
        print(HISTORY_HEADER)
        for ad in ads:
            st = formats.STATUS_LETTERS.get(formats.get(ad, "JobStatus"), "?")
            # A job removed before it completed has no CompletionDate: blank, as condor_history.
            done = formats.get(ad, "CompletionDate")
            completed = formats.submitted(done) if is_number(done) and done > 0 else ""
            print(
                f"{formats.get(ad, 'ClusterId', 0):>4}.{formats.get(ad, 'ProcId', 0):<3} {str(formats.get(ad, 'Owner', '?')):<14} "
                f"{formats.submitted(formats.get(ad, 'QDate')):>11} {formats.run_time(formats.get(ad, 'RemoteWallClockTime', 0))} "
                f"{st:<3} {completed:>11} {formats.job_description(ad)}"
            )
    return 0


# ------------------------------------------------------------------ wait
_HEADER = re.compile(r"^(\d{3}) \((\d+)\.(\d+)\.\d+\) ")


class LogWatch:
    """Follows a user log and keeps, per job, whether it was submitted and whether it has finished."""

    def __init__(self, path: str, job: tuple[int, int | None] | None = None):
        self.path = path
        self.job = job
        self.offset = 0
        self.submitted: set[tuple[int, int]] = set()
        self.finished: set[tuple[int, int]] = set()
        self.events: list[str] = []  # whole events of the wanted jobs read since the last take (-echo)
        self._partial = ""
        self._block: list[str] = []
        self._block_wanted = False

    def _wanted(self, c: int, p: int) -> bool:
        return self.job is None or (c == self.job[0] and (self.job[1] is None or p == self.job[1]))

    def poll(self) -> None:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished line waits for the rest
        for line in lines:
            self._block.append(line)
            if line == "...":  # an event's end
                if self._block_wanted:
                    self.events.append("\n".join(self._block))
                self._block, self._block_wanted = [], False
                continue
            m = _HEADER.match(line)
            if not m:
                continue
            code, c, p = int(m.group(1)), int(m.group(2)), int(m.group(3))
            self._block, self._block_wanted = [line], self._wanted(c, p)
            if not self._block_wanted:
                continue
            if code == 0:
                self.submitted.add((c, p))
            elif code in (5, 9):  # terminated, aborted
                self.submitted.add((c, p))
                self.finished.add((c, p))

    def take_events(self) -> list[str]:
        taken, self.events = self.events, []
        return taken

    def done(self, num: int | None = None) -> bool:
        """Every job seen submitted has finished, or (condor_wait -num) ``num`` jobs have."""
        if num is not None:
            return len(self.finished) >= num
        return bool(self.submitted) and self.submitted <= self.finished


def cmd_wait(args: argparse.Namespace) -> int:
    job: tuple[int, int | None] | None = None
    if args.job is None and _JOB_ID.match(args.log) and not os.path.exists(args.log):
        return _wait_in_queue(args, args.log)
    if args.job:
        if not _JOB_ID.match(args.job):
            raise ValueError(f"{args.job!r} is not a job id (cluster or cluster.proc)")
        c, _, p = args.job.partition(".")
        job = (int(c), int(p) if p else None)
    if not os.path.exists(args.log):
        raise FileNotFoundError(f"no such user log: {args.log}")
    watch = LogWatch(args.log, job)
    deadline = None if args.wait is None else time.monotonic() + args.wait
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if args.num is not None and args.num < 1:
        raise ValueError(f"-num must be a positive number of jobs, not {args.num}")
    show = not args.quiet and not args.echo
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        transient=True, disable=not show, console=_stderr_console(),
    ) as progress:
        task = progress.add_task("jobs done", total=None)
        while True:
            watch.poll()
            for text in watch.take_events():
                if args.echo:
                    print(text, flush=True)
            progress.update(task, total=max(len(watch.submitted), args.num or 1), completed=len(watch.finished))
            if watch.done(args.num):
                break
            if deadline is not None and time.monotonic() >= deadline:
                print(f"Time expired: {len(watch.finished)} of {len(watch.submitted)} jobs done.")
                return 1
            time.sleep(0.2)  # polling interval of the log file, not a wait for a condition in a test
    print("All jobs done.")
    return 0


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(file=sys.stderr)


# ------------------------------------------------------------------ parser
def _add_select(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", metavar="CLUSTER|CLUSTER.PROC|OWNER", help="jobs, clusters or users")
    p.add_argument("-constraint", "--constraint", metavar="EXPR", help="a ClassAd constraint the jobs must satisfy")
    p.add_argument("-name", "--name", metavar="SCHEDD", help="the schedd to ask (default: the only or first one)")


def register(sub: Any) -> None:
    p = sub.add_parser("submit", help="submit a cluster of jobs from a submit description (condor_submit)")
    p.add_argument("file", metavar="SUBMIT_FILE", help="the submit description ('-' reads stdin)")
    p.add_argument("-a", "-append", "--append", action="append", metavar="LINE", help="a command added before the queue statement")
    p.add_argument("-queue", "--queue", metavar="ARGS", help="replace the queue statement's arguments")
    p.add_argument("-batch-name", "--batch-name", dest="batch_name", metavar="NAME", help="the batch name condor_q shows")
    p.add_argument("-terse", "--terse", action="store_true", help="print only the job id range")
    p.add_argument("-unused", "--unused", action="store_true",
                   help="no warning of lines that are no command and that nothing refers to")
    p.add_argument("-dry-run", "--dry-run", dest="dry_run", metavar="FILE",
                   help="write the job ads to FILE ('-': standard output); submit nothing")
    p.add_argument("-name", "--name", metavar="SCHEDD", help="the schedd to submit to")
    p.add_argument("-spool", "--spool", action="store_true",
                   help="send the input to the schedd's spool now; fetch the output later with transfer_data")
    p.set_defaults(handler=cmd_submit)

    p = sub.add_parser("transfer_data", help="fetch the output of completed spooled jobs (condor_transfer_data)")
    p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]", help="the jobs")
    p.add_argument("-constraint", "--constraint", metavar="EXPR", help="the jobs matching a ClassAd expression")
    p.add_argument("-all", "--all", action="store_true", help="all your completed spooled jobs")
    p.add_argument("-name", "--name", metavar="SCHEDD", help="the schedd that holds them")
    p.set_defaults(handler=cmd_transfer_data)

    p = sub.add_parser("q", help="show the job queue (condor_q)")
    _add_select(p)
    formats.add_output_options(p)
    p.add_argument("-nobatch", "--nobatch", action="store_true", help="one line per job")
    p.add_argument("-batch", "--batch", dest="nobatch", action="store_false",
                   help="one line per batch (the default, as condor_q's -batch)")
    p.add_argument("-totals", "--totals", action="store_true", help="only the totals lines")
    p.add_argument("-limit", "--limit", type=int, default=-1, metavar="N", help="at most N jobs")
    p.add_argument("-autocluster", "--autocluster", action="store_true", help="jobs grouped as the matchmaker sees them")
    p.add_argument("-run", "--run", action="store_true", help="running jobs and where they run")
    p.add_argument("-hold", "--hold", action="store_true", help="held jobs and why")
    p.add_argument("-dag", "--dag", action="store_true", help="DAG node jobs listed under their DAGMan job")
    p.add_argument("-better-analyze", "-analyze", "--better-analyze", dest="analyze", action="store_true",
                   help="why idle jobs do not run: each Requirements condition against the pool's slots")
    p.add_argument("-machine", "--machine", metavar="NAME", help="with -better-analyze: only this slot or machine")
    p.add_argument("-allusers", "--allusers", action="store_true", help="every user's jobs (default: yours)")
    p.add_argument("-global", "--global", dest="global_", action="store_true",
                   help="the queues of every schedd in the pool (from the collector), one after another")
    p.set_defaults(handler=cmd_q)

    for name, text in (("rm", "remove jobs (condor_rm)"), ("hold", "hold jobs (condor_hold)"),
                       ("release", "release held jobs (condor_release)"),
                       ("suspend", "suspend running jobs where they run: their processes are frozen (condor_suspend)"),
                       ("continue", "let suspended jobs run again (condor_continue)"),
                       ("vacate_job", "stop running jobs and put them back to Idle to run again (condor_vacate_job)")):
        p = sub.add_parser(name, help=text)
        _add_select(p)
        p.add_argument("-all", "--all", action="store_true", help="all of your jobs")
        p.add_argument("-reason", "--reason", metavar="TEXT", help="why (recorded in the job and its log)")
        if name == "vacate_job":
            p.add_argument("-fast", "--fast", action="store_true", help="SIGKILL at once, no KILLING_TIMEOUT grace")
        p.set_defaults(handler=cmd_act)

    p = sub.add_parser("edit", aliases=["qedit"], help="set a job attribute (condor_qedit)")
    p.add_argument("targets", nargs="*", metavar="CLUSTER|CLUSTER.PROC|OWNER")
    p.add_argument("attr", metavar="ATTR")
    p.add_argument("value", metavar="VALUE", help="ClassAd text: 5, \"a string\", or an expression")
    p.add_argument("-constraint", "--constraint", metavar="EXPR")
    p.add_argument("-name", "--name", metavar="SCHEDD")
    p.set_defaults(handler=cmd_edit)

    p = sub.add_parser("history", help="jobs that have left the queue (condor_history)")
    _add_select(p)
    formats.add_output_options(p)
    p.add_argument("-limit", "-match", "--limit", dest="limit", type=int, default=-1, metavar="N", help="at most N jobs")
    p.set_defaults(handler=cmd_history)

    p = sub.add_parser("wait", help="wait for the jobs in a user log, or of a cluster, to finish (condor_wait)")
    p.add_argument("log", metavar="LOGFILE|CLUSTER[.PROC]",
                   help="a user log, or a job id alone to wait until its jobs leave the schedd's queue")
    p.add_argument("job", nargs="?", metavar="CLUSTER[.PROC]")
    p.add_argument("-wait", "--wait", type=float, metavar="SECONDS", help="give up after this long (exit 1)")
    p.add_argument("-num", "--num", type=int, metavar="N", help="return once N jobs have finished")
    p.add_argument("-echo", "--echo", action="store_true", help="print the jobs' events as they are read")
    p.add_argument("-quiet", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_wait)
