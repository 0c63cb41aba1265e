"""How the `gridbus` command lays out ads: condor_q's batch and -nobatch tables and totals lines,
condor_status's slot table and totals, `-af`, `-format`, `-l` and `-json`.

Pure functions over ads (anything with `.get`/`.keys`, matched case-insensitively), so they are
tested without a pool.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from gridbus.classad.values import Value, is_number
from gridbus.jobstatus import STATUS_LETTERS

STATUS_NAME = {1: "idle", 2: "running", 3: "removed", 4: "completed", 5: "held", 6: "transferring", 7: "suspended"}

BATCH_HEADER = "OWNER    BATCH_NAME    SUBMITTED   DONE   RUN    IDLE   HOLD  TOTAL JOB_IDS"
BATCH_HEADER_NO_HOLD = "OWNER    BATCH_NAME    SUBMITTED   DONE   RUN    IDLE  TOTAL JOB_IDS"
NOBATCH_HEADER = " ID      OWNER            SUBMITTED     RUN_TIME ST PRI SIZE CMD"
RUN_HEADER = " ID      OWNER            SUBMITTED     RUN_TIME HOST(S)"
HOLD_HEADER = " ID      OWNER          HELD_SINCE  HOLD_REASON"
STATUS_HEADER = "Name               OpSys      Arch   State     Activity LoadAv Mem    ActvtyTime"


def get(ad: Any, name: str, default: Any = None) -> Any:
    """An attribute, case-insensitively, from a ClassAd or a dict."""
    try:
        value = ad.get(name, None)
    except Exception:  # a ClassAd that cannot evaluate it
        value = None
    if value is not None:
        return value
    low = name.lower()
    for key in ad.keys():
        if key.lower() == low:
            return ad[key]
    return default


def _is_expr(value: Any) -> bool:
    return type(value).__name__ == "ExprTree"


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unparse(value: Any) -> str:
    """A value in ClassAd's old (`-l`) notation."""
    if isinstance(value, Value):  # before int: classad2's Value is an IntEnum
        return value.name.lower()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, list | tuple):
        return "{ " + ",".join(unparse(v) for v in value) + " }"
    if isinstance(value, Mapping):
        return "[ " + "; ".join(f"{k} = {unparse(v)}" for k, v in value.items()) + " ]"
    return str(value)


def plain(value: Any) -> str:
    """A value as `-af` prints it: strings without quotes, everything else as ClassAd text."""
    if value is None:
        return "undefined"
    if isinstance(value, str):
        return value
    return unparse(value)


def _items(ad: Any) -> list[tuple[str, Any]]:
    keys = list(ad.keys())
    out = []
    for k in keys:
        v = ad.lookup(k) if hasattr(ad, "lookup") and _is_expr_attr(ad, k) else ad[k]
        out.append((k, v))
    return out


def _is_expr_attr(ad: Any, key: str) -> bool:
    try:
        return _is_expr(ad[key])
    except Exception:
        return True


def long_form(ads: Iterable[Any]) -> str:
    """`-l`: every attribute as `Name = value`, a blank line after each ad."""
    chunks = []
    for ad in ads:
        chunks.append("".join(f"{k} = {unparse(v)}\n" for k, v in sorted(_items(ad), key=lambda kv: kv[0].lower())))
    return "\n".join(chunks) + ("\n" if chunks else "")


_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _is_name(text: str) -> bool:
    return _ATTR_NAME.fullmatch(text) is not None


def _check_expression(text: str) -> None:
    """Refuse an `-af`/`-format` column that is no ClassAd expression, with its text."""
    from gridbus import classad

    try:
        classad.ExprTree(text)
    except Exception:
        raise ValueError(f"{text!r} is neither an attribute name nor a ClassAd expression") from None


def value_of(ad: Any, attr: str) -> Any:
    """An `-af`/`-format` column: an attribute's value, or an expression evaluated in the ad
    (condor_q -af 'RemoteWallClockTime/60'); None when undefined."""
    if _is_name(attr):
        return get(ad, attr)
    from gridbus import classad

    value = classad.compile(attr).eval(dict(ad.items()) if not isinstance(ad, dict) else ad)
    return None if isinstance(value, Value) and value is Value.Undefined else value


def attribute_list(text: str) -> list[str]:
    """-attributes' comma-separated attribute names."""
    names = [n.strip() for n in text.replace(" ", ",").split(",") if n.strip()]
    if not names or not all(map(_is_name, names)):
        raise argparse.ArgumentTypeError(f"takes attribute names separated by commas, not {text!r}")
    return names


def add_output_options(p: argparse.ArgumentParser) -> None:
    """The output forms condor_q, condor_history and condor_status share: -af, -format, -l, -json,
    -attributes and -wide."""
    p.add_argument("-af", "-autoformat", "--af", nargs="+", metavar="ATTR", help="print these attributes, one line per ad")
    p.add_argument("-format", "--format", nargs=2, action="append", metavar=("FMT", "ATTR"),
                   help="print ATTR through the printf-style FMT (repeatable; %%v and %%V as -af and -af:V)")
    p.add_argument("-l", "-long", "--long", dest="long", action="store_true", help="every attribute of every ad")
    p.add_argument("-json", "--json", action="store_true", help="ads as a JSON array")
    p.add_argument("-attributes", "--attributes", type=attribute_list, metavar="A,B,...",
                   help="with -l or -json: only these attributes")
    p.add_argument("-wide", "-w", "--wide", action="store_true",
                   help="do not truncate columns to 80 characters (gridbus never truncates them)")


def af_projection(args: Any) -> list[str]:
    """The attributes `-af` and `-format` need from the daemon: the named ones, and the job id or
    Name for `j`; every attribute (an empty list) when a column is an expression, whose
    attributes may be expressions over others in turn (RequestMemory over MemoryUsage). With
    -l or -json, -attributes names them (condor_q -l -attributes A,B)."""
    if getattr(args, "attributes", None) and (getattr(args, "long", False) or getattr(args, "json", False)):
        return list(dict.fromkeys(args.attributes))
    columns = list(getattr(args, "af", None) or [])
    columns += [attr for _, attr in getattr(args, "format", None) or []]  # (-format FMT ATTR)
    expressions = [c for c in columns if not _is_name(c)]
    for text in expressions:
        _check_expression(text)  # (before anything is asked)
    if expressions:
        return []
    if getattr(args, "af", None) and "j" in getattr(args, "af_options", ""):
        columns += ["ClusterId", "ProcId", "Name"]
    return list(dict.fromkeys(columns))


def autoformat(ads: Iterable[Any], attrs: list[str], options: str = "") -> str:
    """`-af ATTR...`, and `-af:OPTIONS` as HTCondor reads them: `,` or `t` separate the values by a
    comma or a tab, `n` puts each on its own line, `l` labels each (`Name = value`), `V` prints
    strings quoted (ClassAd text), `r` the expressions unevaluated, `h` a header line of the names,
    `j` the job id (or the slot's Name) first, `g` a blank line between ads."""
    unknown = set(options) - set(",tnlVrhjg")
    if unknown:
        raise ValueError(f"-af:{options}: unknown autoformat option {''.join(sorted(unknown))!r} "
                         "(known: , t n l V r h j g)")
    sep = "\n" if "n" in options else "," if "," in options else "\t" if "t" in options else " "
    lines: list[str] = []
    if "h" in options:
        lines.append(sep.join((["ID"] if "j" in options else []) + list(attrs)))
    for i, ad in enumerate(ads):
        values = []
        if "j" in options:
            values.append(f"{get(ad, 'ClusterId')}.{get(ad, 'ProcId')}" if get(ad, "ClusterId") is not None
                          else plain(get(ad, "Name")))
        for a in attrs:
            if "r" in options and hasattr(ad, "lookup") and a in ad:
                text = unparse(ad.lookup(a))
            else:
                value = value_of(ad, a)
                text = unparse(value) if "V" in options and value is not None else plain(value)
            values.append(f"{a} = {text}" if "l" in options else text)
        if "g" in options and i:
            lines.append("")
        lines.append(sep.join(values))
    return "".join(line + "\n" for line in lines)


def _json_value(value: Any) -> Any:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    text = unparse(value)
    if text == "undefined":
        return None
    return f"\\/Expr({text})\\/"  # HTCondor's JSON form of an expression


def json_form(ads: Iterable[Any]) -> str:
    """`-json`: a JSON array of ads; expressions as HTCondor writes them ("\\/Expr(...)\\/")."""
    return json.dumps([{k: _json_value(v) for k, v in _items(ad)} for ad in ads], indent=1) + "\n"


# One printf conversion of a -format string: flags, width, precision, and the letter (HTCondor's
# own: v and V a value as -af and as ClassAd text, r and R the expression unevaluated).
_CONVERSION = re.compile(r"%([-+ #0]*)(\d*)(?:\.(\d+))?([diouxXeEfFgGcsvVrR%])")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


def _escapes(text: str) -> str:
    """A -format string's backslash escapes (``\\n``, ``\\t``) as condor_q reads them: the shell
    leaves them as typed."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def _format_one(fmt: str, ad: Any, attr: str) -> str:
    """``fmt`` with ``attr``'s value in its conversion; "" when the ad has no such attribute
    (condor_q -format skips it)."""
    value = value_of(ad, attr)
    if value is None:
        return ""

    def convert(m: re.Match) -> str:
        flags, width, precision, letter = m.groups()
        if letter == "%":
            return "%"
        spec = "%" + flags + width + (f".{precision}" if precision is not None else "")
        try:
            if letter in "diouxXc":
                number = int(value) if is_number(value) else int(float(value))
                return (spec + letter) % number
            if letter in "eEfFgG":
                return (spec + letter) % float(value)
        except (TypeError, ValueError, OverflowError):  # (%c of a number no character has)
            return ""
        if letter in "VR":
            return (spec + "s") % unparse(value)
        if letter == "r" and hasattr(ad, "lookup") and _is_expr_attr(ad, attr):
            return (spec + "s") % unparse(ad.lookup(attr))
        return (spec + "s") % plain(value)

    return _CONVERSION.sub(convert, _escapes(fmt))


def format_form(ads: Iterable[Any], pairs: list[list[str]]) -> str:
    """`-format FMT ATTR`, repeated: per ad, each attribute printed through its printf-style
    format, nothing added between them (the formats carry their own spaces and newlines)."""
    return "".join(_format_one(fmt, ad, attr) for ad in ads for fmt, attr in pairs)


def chosen_form(args: Any, ads: list[Any]) -> str | None:
    """The text of the form the options chose (``-json``, ``-l``, ``-af``, ``-format``, in that
    order), or None when none was asked for and the command prints its own table."""
    if getattr(args, "json", False):
        return json_form(ads)
    if getattr(args, "long", False):
        return long_form(ads)
    if getattr(args, "af", None):
        return autoformat(ads, args.af, getattr(args, "af_options", ""))
    if getattr(args, "format", None):
        return format_form(ads, args.format)
    return None


# ------------------------------------------------------------------ condor_q
def submitted(qdate: Any) -> str:
    """`%m/%d %H:%M` without a leading zero on the month, the day padded (`1/5  11:45`)."""
    if not is_number(qdate):
        return "?"
    t = time.localtime(qdate)
    return f"{t.tm_mon}/{t.tm_mday:<2} {t.tm_hour:02d}:{t.tm_min:02d}"


def run_time(seconds: Any) -> str:
    s = int(seconds) if is_number(seconds) else 0
    days, rest = divmod(max(s, 0), 86400)
    return f"{days:3d}+{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def _job_id(ad: Any) -> tuple[int, int]:
    return int(get(ad, "ClusterId", 0)), int(get(ad, "ProcId", 0))


def batch_key(ad: Any) -> str:
    name = get(ad, "JobBatchName")
    if isinstance(name, str) and name:
        return name
    node = get(ad, "DAGNodeName")
    if isinstance(node, str) and node:
        return f"NODE: {node}"
    return f"ID: {_job_id(ad)[0]}"


def job_ids(ids: list[tuple[int, int]]) -> str:
    ids = sorted(ids)
    if len(ids) == 1:
        return f"{ids[0][0]}.{ids[0][1]}"
    if ids[0][0] == ids[-1][0]:
        return f"{ids[0][0]}.{ids[0][1]}-{ids[-1][1]}"
    return f"{ids[0][0]}.{ids[0][1]} ... {ids[-1][0]}.{ids[-1][1]}"


def _count(n: int) -> str:
    return str(n) if n else "_"


def batch_table(ads: list[Any]) -> str:
    """The default condor_q table: one row per (owner, batch)."""
    batches: dict[tuple[str, str], list[Any]] = {}
    for ad in sorted(ads, key=_job_id):
        batches.setdefault((str(get(ad, "Owner", "?")), batch_key(ad)), []).append(ad)
    show_hold = not ads or any(get(ad, "JobStatus") == 5 for ad in ads)
    lines = [BATCH_HEADER if show_hold else BATCH_HEADER_NO_HOLD]
    for (owner, batch), jobs in batches.items():
        status = [get(j, "JobStatus") for j in jobs]
        done = status.count(4)
        run = status.count(2)
        idle = status.count(1)
        hold = status.count(5)
        first = min(get(j, "QDate", 0) or 0 for j in jobs)
        row = f"{owner:<8} {batch:<13} {submitted(first):<11}{_count(done):>6} {_count(run):>6} {_count(idle):>6}"
        if show_hold:
            row += f" {_count(hold):>6}"
        row += f" {len(jobs):>6} {job_ids([_job_id(j) for j in jobs])}"
        lines.append(row)
    return "\n".join(lines) + "\n"


def job_description(ad: Any) -> str:
    """The CMD column of condor_q and condor_history (HTCondor's JOB_DESCRIPTION): the job's
    JobDescription in parentheses (as matched, where it had a ``$$()``), else the executable's base
    name and the arguments as the job ad holds them (Arguments, else the old syntax's Args)."""
    described = get(ad, "MATCH_EXP_JobDescription")
    if not isinstance(described, str) or not described:
        described = get(ad, "JobDescription")
    if isinstance(described, str) and described:
        return f"({described})"
    args = get(ad, "Arguments")
    if not isinstance(args, str):
        args = get(ad, "Args")
    name = os.path.basename(str(get(ad, "Cmd", "")))
    # (A container job may have no Cmd: its image's command runs, with these arguments.)
    return " ".join(part for part in (name, args if isinstance(args, str) else "") if part)


def _wall(ad: Any, now: float) -> float:
    total = get(ad, "RemoteWallClockTime", 0) or 0
    start = get(ad, "JobCurrentStartDate")
    if get(ad, "JobStatus") == 2 and is_number(start):
        total += max(now - start, 0)
    return total


def _id_col(ad: Any) -> str:
    c, p = _job_id(ad)
    return f"{c:>4}.{p:<3}"


def nobatch_table(ads: list[Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = [NOBATCH_HEADER]
    for ad in sorted(ads, key=_job_id):
        size = (get(ad, "ImageSize", 0) or 0) / 1024.0
        st = STATUS_LETTERS.get(get(ad, "JobStatus"), "?")
        lines.append(
            f"{_id_col(ad)} {str(get(ad, 'Owner', '?')):<14} {submitted(get(ad, 'QDate')):>11} "
            f"{run_time(_wall(ad, now))} {st:<2} {get(ad, 'JobPrio', 0)!s:<3} {size:4.1f} {job_description(ad):<18}"
        )
    return "\n".join(lines) + "\n"


def run_table(ads: list[Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = [RUN_HEADER]
    for ad in sorted(ads, key=_job_id):
        host = get(ad, "RemoteHost") or get(ad, "LastRemoteHost") or ""
        lines.append(
            f"{_id_col(ad)} {str(get(ad, 'Owner', '?')):<14} {submitted(get(ad, 'QDate')):>11} "
            f"{run_time(_wall(ad, now))} {host}"
        )
    return "\n".join(lines) + "\n"


def hold_table(ads: list[Any]) -> str:
    lines = [HOLD_HEADER]
    for ad in sorted(ads, key=_job_id):
        since = submitted(get(ad, "EnteredCurrentStatus"))
        lines.append(f"{_id_col(ad)} {str(get(ad, 'Owner', '?')):<14} {since:>11} {get(ad, 'HoldReason', '')}")
    return "\n".join(lines) + "\n"


def totals(ads: list[Any]) -> str:
    counts = {n: 0 for n in STATUS_NAME}
    for ad in ads:
        s = get(ad, "JobStatus")
        if s in counts:
            counts[s] += 1
    return (
        f"{len(ads)} jobs; {counts[4]} completed, {counts[3]} removed, {counts[1]} idle, "
        f"{counts[2]} running, {counts[5]} held, {counts[7]} suspended"
    )


def summary_totals(ad: Any) -> str:
    """`totals` of a schedd's Summary ad (its counts by status, not the jobs)."""
    def n(name: str) -> int:
        value = get(ad, name, 0) if ad is not None else 0
        return int(value) if is_number(value) else 0

    return (
        f"{n('Jobs')} jobs; {n('Completed')} completed, {n('Removed')} removed, {n('Idle')} idle, "
        f"{n('Running')} running, {n('Held')} held, {n('Suspended')} suspended"
    )


def schedd_banner(name: str, address: str, now: float | None = None) -> str:
    stamp = time.strftime("%m/%d/%y %H:%M:%S", time.localtime(time.time() if now is None else now))
    return f"\n\n-- Schedd: {name} : {address} @ {stamp}\n"


# ------------------------------------------------------------------ condor_status
def _activity_time(ad: Any, now: float) -> str:
    since = get(ad, "EnteredCurrentActivity")
    return run_time(now - since) if is_number(since) else run_time(0)


def status_table(ads: list[Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = [STATUS_HEADER, ""]
    for ad in sorted(ads, key=lambda a: str(get(a, "Name", ""))):
        lines.append(
            f"{str(get(ad, 'Name', '?')):<18} {str(get(ad, 'OpSys', '?')):<10} {str(get(ad, 'Arch', '?')):<6} "
            f"{str(get(ad, 'State', '?')):<9} {str(get(ad, 'Activity', '?')):<8} {_load(ad):6.3f} "
            f"{str(get(ad, 'Memory', '?')):<6} {_activity_time(ad, now)}"
        )
    return "\n".join(lines) + "\n\n" + status_totals(ads)


STATUS_RUN_HEADER = "Name               OpSys       Arch   LoadAv RemoteUser           ClientMachine"


def _load(ad: Any) -> float:
    load = get(ad, "LoadAvg", 0.0)
    return float(load) if is_number(load) else 0.0


def _arch_opsys(ad: Any) -> str:
    return f"{get(ad, 'Arch', '?')}/{get(ad, 'OpSys', '?')}"


def status_run_table(ads: list[Any]) -> str:
    """condor_status -claimed (and -run): each claimed slot with who holds it, then the totals."""
    lines = [STATUS_RUN_HEADER, ""]
    for ad in sorted(ads, key=lambda a: str(get(a, "Name", ""))):
        lines.append(
            f"{str(get(ad, 'Name', '?')):<18} {str(get(ad, 'OpSys', '?')):<11} {str(get(ad, 'Arch', '?')):<6} "
            f"{_load(ad):6.3f} {str(get(ad, 'RemoteUser', '?')):<20} {get(ad, 'ClientMachine', '?')}".rstrip())
    return "\n".join(lines) + "\n\n" + status_run_totals(ads)


def status_run_totals(ads: list[Any]) -> str:
    """The totals of condor_status -claimed by platform, in that form's columns (Machines, MIPS,
    KFLOPS, AvgLoadAvg)."""
    def row(label: str, group: list[Any]) -> str:
        def total(attr: str) -> int:
            return sum(int(v) for v in (get(a, attr, 0) for a in group) if is_number(v))

        average = sum(map(_load, group)) / len(group) if group else 0.0
        return f"{label:>14} {len(group):>9}  {total('Mips'):>11}  {total('KFlops'):>11}   {average:.3f}"

    groups: dict[str, list[Any]] = {}
    for ad in ads:
        groups.setdefault(_arch_opsys(ad), []).append(ad)
    lines = [f"{'':14} {'Machines':>9}  {'MIPS':>11}  {'KFLOPS':>11}  {'AvgLoadAvg':>11}", ""]
    lines += [row(k, v) for k, v in sorted(groups.items())]
    lines += ["", row("Total", ads)]
    return "\n".join(lines) + "\n"


STATES = ["Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drained", "Backfill"]


def status_totals(ads: list[Any]) -> str:
    header = "               Total Owner Claimed Unclaimed Matched Preempting  Drain Backfill BkIdle"

    def row(label: str, group: list[Any]) -> str:
        states = [str(get(a, "State", "")) for a in group]
        c = {s: states.count(s) for s in STATES}
        return (
            f"{label:>14} {len(group):>5} {c['Owner']:>5} {c['Claimed']:>7} {c['Unclaimed']:>9} {c['Matched']:>7} "
            f"{c['Preempting']:>10} {c['Drained']:>6} {c['Backfill']:>8} {0:>6}"
        )

    groups: dict[str, list[Any]] = {}
    for ad in ads:
        groups.setdefault(_arch_opsys(ad), []).append(ad)
    lines = [header, ""]
    lines += [row(k, v) for k, v in sorted(groups.items())]
    lines += ["", row("Total", ads)]
    return "\n".join(lines) + "\n"
