"""`Submit`: HTCondor's submit description, mirroring htcondor2.Submit, and the job ads it makes.

    from gridbus.submit import Submit
    sub = Submit("executable = /bin/echo\\narguments = $(Item)\\nqueue Item in (a, b)")
    sub.getQArgs(), list(sub.itemdata()), sub.expand("arguments")
    built = sub.build(cluster_id=7)            # the ads a schedd stores
    built.cluster_ad, built.proc_ads           # common attributes; per-proc differences (with ProcId)

Only the submitting client expands a description (the console's `Schedd.submit` and `gridbus
submit`, in the submitter's working directory, with the cluster id the schedd's NewCluster gave):
`cluster_ad(...)` is the cluster's common attributes as a plain dict (values are literals or
`gridbus.classad.ExprTree`), `proc_ads(...)` the per-proc differences after the queue statement's
items are expanded, each with its `ProcId`; `late(built, ...)` is the proc template a schedd fills
in for a cluster it materializes late (gridbus.submit.materialize). `uses_cluster_id()` says whether
the description refers to `$(Cluster)`.

A description may hold several queue statements (condor_submit's rule): each makes its own procs,
numbered on from the previous one's, with the commands above it in effect. The mapping, `getQArgs`
and `itemdata` show the first queue statement and the commands before it, as htcondor2 does;
`build`, `jobs` and `str()` cover them all.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from gridbus import hostinfo
from gridbus.dag.dagmanjob import dagman_job_commands
from gridbus.errors import HTCondorTypeError, HTCondorValueError
from gridbus.submit import commands, lines, materialize, queue
from gridbus.submit.errors import SubmitError, SubmitWarning, UnusedMacroWarning
from gridbus.submit.jobad import build_job_ad
from gridbus.submit.macros import Expander

SUBMIT_METHOD_CONDOR_SUBMIT = 0
SUBMIT_METHOD_PYTHON = 2
SUBMIT_METHOD_HTCONDOR_JOB = 3
_RESERVED_METHOD_LIMIT = 100

_PER_PROC = {"process", "procid", "step", "row", "itemindex", "item", "node"}
_CLUSTER = {"cluster", "clusterid"}


@dataclass
class Built:
    """The ads of one cluster: what every proc shares, and what each proc adds or changes."""

    cluster_ad: dict[str, Any]
    proc_ads: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)

    def jobs(self) -> list[dict[str, Any]]:
        return [{**self.cluster_ad, **p} for p in self.proc_ads]


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and (a == b if not hasattr(a, "eval") else str(a) == str(b))


@lru_cache(maxsize=8)
def _submit_defaults(submit_file: str | None, qdate: int) -> dict[str, str]:
    """condor_submit's defaults beyond the per-proc ones: the submit machine's platform, the
    submit file, and the submit time (each proc's expansion reads this one dict; never changed)."""
    out = dict(hostinfo.submit_macros())
    if submit_file:
        out["submit_file"] = submit_file
    if qdate > 0:
        year, month, day = time.strftime("%Y %m %d", time.localtime(qdate)).split()
        out.update(submit_time=str(qdate), year=year, month=month, day=day)
    return out


class Submit(MutableMapping[str, str]):
    """A submit description (htcondor2.Submit): a case-insensitive mapping of commands to values."""

    def __init__(self, input: str | dict[str, str] | None = None, queue: str | None = None, **kwargs: str):
        # key (lower-case, `+X` as `my.x`) -> (key as written, value, line number or None)
        self._entries: dict[str, tuple[str, str, int | None]] = {}
        self._qargs: str | None = None
        self._qlineno: int | None = None
        # the second and later queue statements: (commands since the previous one, args, line)
        self._more: list[tuple[dict[str, tuple[str, str, int | None]], str, int | None]] = []
        self._condition_refs: set[str] = set()  # macros read by if conditions and include names
        self._submit_method = SUBMIT_METHOD_PYTHON
        self._warnings: list[str] = []
        self.cwd: str | None = None  # directory relative paths are read against (default: os.getcwd())
        # $(SUBMIT_FILE): the file the description was read from, as condor_submit was given it
        # (`gridbus submit` and DAGMan set it; a description made in Python has none).
        self.submit_file: str | None = None
        if isinstance(input, str):
            parsed = lines.parse(input)
            for st in parsed.statements:
                self._entries[st.key.lower()] = (st.key, st.value, st.lineno)
            self._qargs, self._qlineno = parsed.queue_args, parsed.queue_lineno
            self._condition_refs = parsed.referenced
            for q in parsed.more:
                self._more.append(({st.key.lower(): (st.key, st.value, st.lineno) for st in q.statements}, q.args, q.lineno))
            last = parsed.more[-1].lineno if parsed.more else parsed.queue_lineno
            for st in parsed.trailing:
                self._warnings.append(
                    f"line {st.lineno}: {st.key!r} comes after the queue statement (line {last}) and applies to no job"
                )
        elif isinstance(input, dict):
            for k, v in input.items():
                self[k] = v
        elif input is not None:
            raise HTCondorTypeError(f"Submit() takes a submit description string or a dict, not {type(input).__name__}")
        for k, v in kwargs.items():
            self[k] = v
        if queue is not None:
            self.setQArgs(queue)
        # condor_submit warns of a line it did not use; HTCondor's bindings take a dict's keys silently.
        self._unused: list[str] = []
        self._check_commands(warn_unused=isinstance(input, str))
        for w in self._warnings:
            warnings.warn(w, UnusedMacroWarning if w in self._unused else SubmitWarning, stacklevel=2)

    # ------------------------------------------------------------------ mapping
    @staticmethod
    def _norm(key: str) -> str:
        if not isinstance(key, str) or not key.strip():
            raise KeyError(f"a submit command name must be a non-empty string, not {key!r}")
        return lines.canonical_key(key.strip()).lower()

    def __getitem__(self, key: str) -> str:
        return self._entries[self._norm(key)][1]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(value, str):
            raise HTCondorTypeError(f"the value of submit command {key!r} must be a string, not {type(value).__name__}")
        k = self._norm(key)
        written = self._entries[k][0] if k in self._entries else lines.canonical_key(key.strip())
        self._entries[k] = (written, value, None)

    def __delitem__(self, key: str) -> None:
        del self._entries[self._norm(key)]

    def __iter__(self) -> Iterator[str]:
        return (written for written, _, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(key.strip()) and self._norm(key) in self._entries

    def __str__(self) -> str:
        body = "".join(f"{k} = {v}\n" for k, v, _ in self._entries.values())
        body += f"queue {self._qargs}\n" if self._qargs else "queue\n"
        for delta, qargs, _ in self._more:
            body += "".join(f"{k} = {v}\n" for k, v, _ in delta.values())
            body += f"queue {qargs}\n" if qargs else "queue\n"
        return body

    def __repr__(self) -> str:
        return f"Submit({str(self)!r})"

    # ------------------------------------------------------------------ htcondor2 methods
    @classmethod
    def from_dag(cls, filename: str, options: dict[str, Any] | None = None) -> Submit:
        """The DAGMan job's description for a DAG file, as htcondor2's Submit.from_dag (options are
        condor_submit_dag's: maxidle, maxjobs, maxpre, maxpost, force, notification, ...)."""
        sub = cls()
        # Set one by one, as condor_submit_dag writes them: the options the user chose (notification,
        # an -append line) are theirs to give, not commands to warn about as a description's are.
        sub.update(dagman_job_commands(filename, options))
        return sub

    def getQArgs(self) -> str:
        return self._qargs or ""

    def setQArgs(self, args: str) -> None:
        if not isinstance(args, str):
            raise HTCondorTypeError("setQArgs() takes the text after 'queue' as a string")
        text = args.strip()
        if text[:5].lower() == "queue" and (len(text) == 5 or text[5].isspace()):
            text = text[5:].strip()
        queue.parse_queue(text)  # raises on a bad statement
        if self._more:
            raise SubmitError(f"this description has {1 + len(self._more)} queue statements; "
                              "replacing the queue arguments needs a description with one")
        self._qargs, self._qlineno = text, None

    def getSubmitMethod(self) -> int:
        return self._submit_method

    def setSubmitMethod(self, method_value: int = -1, allow_reserved_values: bool = False) -> None:
        if not isinstance(method_value, int):
            raise HTCondorTypeError("the submit method is an integer")
        if method_value < _RESERVED_METHOD_LIMIT and not allow_reserved_values:
            raise HTCondorValueError(f"submit methods below {_RESERVED_METHOD_LIMIT} are reserved; pass allow_reserved_values=True")
        self._submit_method = method_value

    def expand(self, attr: str) -> str:
        """A command's value with its macros expanded (Cluster 1, Process 0, as htcondor2 does)."""
        if attr not in self:
            return ""
        return self._expander(1, materialize.proc_macros(0, 0, 0, {})).expand(self[attr])

    def itemdata(self, qargs: str | None = None) -> Iterator[dict[str, str]] | None:
        """The queue statement's items as dicts (None when it has none). As in htcondor2, no slice."""
        qa = queue.parse_queue(self._expanded_qargs(qargs), self._qlineno)
        rows = queue.raw_items(qa, self._cwd(), self._qlineno)
        return None if rows is None else iter(rows)

    def jobs(
        self, count: int = 0, itemdata: Iterable[Any] | None = None, clusterid: int = 1, procid: int = 0,
        qdate: int = 0, owner: str = "",
    ) -> list[Any]:
        """Every job's whole ad, as htcondor (v1) `Submit.jobs()` makes them offline."""
        from gridbus.classad import ClassAd

        built = self.build(cluster_id=clusterid, count=count, itemdata=itemdata, qdate=qdate, owner=owner or None, first_proc=procid)
        return [ClassAd(ad) for ad in built.jobs()]

    def procs(
        self, count: int = 0, itemdata: Iterable[Any] | None = None, clusterid: int = 1, procid: int = 0,
        qdate: int = 0, owner: str = "",
    ) -> list[Any]:
        """The cluster ad, then each proc's differences (htcondor v1 `Submit.procs()`)."""
        from gridbus.classad import ClassAd

        built = self.build(cluster_id=clusterid, count=count, itemdata=itemdata, qdate=qdate, owner=owner or None, first_proc=procid)
        return [ClassAd(built.cluster_ad), *(ClassAd(p) for p in built.proc_ads)]

    # ------------------------------------------------------------------ the schedd's contract
    def cluster_ad(self, cluster_id: int = 1, qdate: int | None = None, owner: str | None = None,
                   count: int = 0, itemdata: Iterable[Any] | None = None) -> dict[str, Any]:
        return self.build(cluster_id=cluster_id, count=count, itemdata=itemdata, qdate=qdate, owner=owner).cluster_ad

    def proc_ads(self, count: int = 0, itemdata: Iterable[Any] | None = None, cluster_id: int = 1,
                 qdate: int | None = None) -> list[dict[str, Any]]:
        return self.build(cluster_id=cluster_id, count=count, itemdata=itemdata, qdate=qdate).proc_ads

    def queue_count(self) -> int:
        """How many queue statements the description holds (0 when it has none)."""
        return (self._qargs is not None or self._qlineno is not None) + len(self._more)

    def uses_cluster_id(self) -> bool:
        """True when some value refers to $(Cluster)/$(ClusterId), so ads need the real cluster id."""
        texts = self._all_texts()
        return bool(commands.referenced_macros(texts) & _CLUSTER)

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings)

    def build(self, cluster_id: int = 1, count: int = 0, itemdata: Iterable[Any] | None = None,
              qdate: int | None = None, owner: str | None = None, first_proc: int = 0) -> Built:
        """The cluster's ads. count/itemdata as htcondor2's Schedd.submit: 0/None use the queue statement."""
        if not isinstance(cluster_id, int) or cluster_id < 0:
            raise SubmitError(f"cluster id must be a non-negative integer, not {cluster_id!r}")
        if not isinstance(count, int) or count < 0:
            raise SubmitError(f"count must be a non-negative integer, not {count!r}")
        self._check_commands(warn_unused=False)
        qdate = int(time.time()) if qdate is None else int(qdate)
        if self._more:
            if count or itemdata is not None:
                raise SubmitError(f"this description has {1 + len(self._more)} queue statements; "
                                  "count and itemdata replace a single queue statement's")
            return self._build_all(cluster_id, qdate, owner, first_proc)
        plan = list(self._plan(count, itemdata))
        if not plan:
            raise SubmitError("the queue statement makes no jobs")
        user_keys = [(written[3:], k) for k, (written, _, _) in self._entries.items() if k.startswith("my.")]
        first_ad, used = self._one(cluster_id, first_proc, plan[0], qdate, owner, user_keys)
        # What may differ per proc: the built-in per-proc macros, the queue statement's names and
        # the keys of the item rows (itemdata's dicts name their own).
        per_proc = _PER_PROC | {n.lower() for n in self._queue_names()} | {k.lower() for _, _, row in plan for k in row}
        if not (used & per_proc):
            cluster = dict(first_ad)
            cluster.pop("ProcId", None)
            procs = [{"ProcId": first_proc + i} for i in range(len(plan))]
            return Built(cluster, procs, self.warnings)
        ads = [first_ad] + [
            self._one(cluster_id, first_proc + i, step, qdate, owner, user_keys)[0] for i, step in enumerate(plan[1:], start=1)
        ]
        keys = list(dict.fromkeys(k for ad in ads for k in ad))
        common = {
            k: first_ad[k] for k in keys
            if k != "ProcId" and all(k in ad and _same(ad[k], first_ad[k]) for ad in ads)
        }
        procs = [{"ProcId": ad["ProcId"], **{k: v for k, v in ad.items() if k not in common and k != "ProcId"}} for ad in ads]
        return Built(common, procs, self.warnings)

    def late(self, built: Built, cluster_id: int, count: int = 0, itemdata: Iterable[Any] | None = None,
             qdate: int | None = None) -> dict[str, Any] | None:
        """What a schedd needs to materialize ``built``'s procs itself: {"Template", "Items", "Steps"}
        (gridbus.submit.materialize), or None when a template cannot make exactly those procs (then
        the procs' own ads are sent). ``built`` is this description's build() with the same arguments."""
        if self._more:
            return None
        rows, steps = self._rows(count, list(itemdata) if itemdata is not None else None)
        if not rows or steps < 1 or len(rows) * steps != len(built.proc_ads):
            return None
        # (Item is marked only where the queue statement sets it: elsewhere it is the description's
        # own macro, or empty, the same in every proc.)
        names = [*(n for n in materialize.BUILTIN if n != "item"), *(n.lower() for n in self._queue_names())]
        for _, row in rows:
            names += [k.lower() for k in row]
        macros = {n: materialize.marker(n) for n in names} | {"jobid": materialize.JOB_ID}
        user_keys = [(written[3:], k) for k, (written, _, _) in self._entries.items() if k.startswith("my.")]
        first = built.proc_ads[0]
        if first["ProcId"] != 0:
            return None  # the schedd numbers a cluster's procs from 0
        try:
            marked, _ = self._one(cluster_id, 0, (0, 0, {}), int(qdate or 0), None, user_keys,
                                  macros=macros)
        except SubmitError:
            return None
        template: dict[str, list[str]] = {}
        for name, value in first.items():
            if name == "ProcId":
                continue
            tv = marked.get(name)
            if isinstance(tv, str) and isinstance(value, str):
                template[name] = ["str", materialize.unmark(tv)]
            elif hasattr(tv, "eval"):
                kind = "expr" if hasattr(value, "eval") else "value"
                template[name] = [kind, materialize.unmark(str(tv))]
            else:
                return None  # a per-proc number made by conversion: not a text substitution
        if not template:
            return None
        items = [[row_no, dict(row)] for row_no, row in rows]
        try:
            for proc in built.proc_ads:
                made = materialize.proc_ad(template, materialize.proc_for(proc["ProcId"], items, steps))
                own = {k: v for k, v in proc.items() if k != "ProcId"}
                if made.keys() != own.keys() or not all(_same(made[k], own[k]) for k in own):
                    return None
        except Exception:
            return None
        return {"Template": template, "Items": items, "Steps": steps}

    # ------------------------------------------------------------------ internals
    def _segments(self) -> list[Submit]:
        """One single-queue description per queue statement, each with the commands then in effect."""
        out: list[Submit] = []
        entries = dict(self._entries)
        for delta, qargs, qlineno in [({}, self._qargs or "", self._qlineno), *self._more]:
            entries.update(delta)
            seg = Submit.__new__(Submit)
            seg._entries, seg._qargs, seg._qlineno, seg._more = dict(entries), qargs, qlineno, []
            seg._submit_method, seg._warnings, seg._unused, seg.cwd = self._submit_method, [], [], self.cwd
            seg.submit_file = self.submit_file
            seg._condition_refs = self._condition_refs
            out.append(seg)
        return out

    def _build_all(self, cluster_id: int, qdate: int, owner: str | None, first_proc: int) -> Built:
        """Every queue statement's procs, numbered on; attributes shared by all go in the cluster ad."""
        parts: list[Built] = []
        next_proc = first_proc
        for seg in self._segments():
            part = seg.build(cluster_id=cluster_id, qdate=qdate, owner=owner, first_proc=next_proc)
            parts.append(part)
            next_proc += len(part.proc_ads)
        first = parts[0].cluster_ad
        common = {k: v for k, v in first.items()
                  if all(k in p.cluster_ad and _same(p.cluster_ad[k], v) for p in parts[1:])}
        procs = [
            {"ProcId": proc["ProcId"], **{k: v for k, v in part.cluster_ad.items() if k not in common},
             **{k: v for k, v in proc.items() if k != "ProcId"}}
            for part in parts for proc in part.proc_ads
        ]
        return Built(common, procs, self.warnings)

    def _all_texts(self) -> list[str]:
        texts = [v for _, v, _ in self._entries.values()] + [self._qargs or ""]
        for delta, qargs, _ in self._more:
            texts += [v for _, v, _ in delta.values()] + [qargs]
        return texts

    def _cwd(self) -> str:
        return self.cwd or os.getcwd()

    def _queue_names(self) -> list[str]:
        names: list[str] = []
        for qargs, qlineno in [(self._qargs or "", self._qlineno), *((q, n) for _, q, n in self._more)]:
            try:
                names += queue.parse_queue(qargs, qlineno).names
            except SubmitError:
                pass
        return names

    def _expanded_qargs(self, qargs: str | None) -> str:
        text = ((self._qargs or "") if qargs is None else qargs).strip()
        if text[:5].lower() == "queue" and (len(text) == 5 or text[5].isspace()):
            text = text[5:].strip()
        # Only the part before an inline item list is macro-expanded (the count, the file name).
        m = re.search(r"(?<!\$)\(", text)
        head, tail = (text[: m.start()], text[m.start() :]) if m else (text, "")
        return self._expander(1, {}).expand(head) + tail

    def _plan(self, count: int, itemdata: Iterable[Any] | None) -> Iterator[tuple[int, int, dict[str, str]]]:
        """(step, row number, item row) for every proc, in proc order."""
        rows, steps = self._rows(count, itemdata)
        for row_no, row in rows:
            for step in range(steps):
                yield step, row_no, row

    def _rows(self, count: int, itemdata: Iterable[Any] | None) -> tuple[list[tuple[int, dict[str, str]]], int]:
        """The item rows (row number, row) after the slice, and how many procs each makes."""
        qa = queue.parse_queue(self._expanded_qargs(None), self._qlineno)
        if itemdata is not None:
            names = qa.names or ["Item"]
            return [(row_no, self._item_row(item, names)) for row_no, item in enumerate(itemdata)], count or 1
        n = count or queue.count_of(qa, self._qlineno)
        rows = queue.raw_items(qa, self._cwd(), self._qlineno)
        if rows is None:
            return ([(0, {})] if n else []), n
        return queue.sliced(qa, rows), n

    @staticmethod
    def _item_row(item: Any, names: list[str]) -> dict[str, str]:
        if isinstance(item, dict):
            return {str(k): str(v) for k, v in item.items()}
        if isinstance(item, str):
            # htcondor2 serialises a row's fields with \x1F; a plain line splits like a `from` row.
            if "\x1f" in item:
                return dict(zip(names, item.split("\x1f"), strict=False))
            return queue._split_row(item, names)
        raise SubmitError(f"each itemdata entry must be a dict or a string, not {type(item).__name__}")

    def _expander(self, cluster_id: int, extra: dict[str, str], qdate: int = 0) -> Expander:
        entries = self._entries
        builtins = {"cluster": str(cluster_id), "clusterid": str(cluster_id), **extra}
        defaults = _submit_defaults(self.submit_file, qdate)

        def lookup(name: str) -> str | None:
            if name in builtins and name not in materialize.DEFAULTS:
                return builtins[name]  # a queue variable (Item, or the statement's own names)
            entry = entries.get(name)
            if entry:
                return entry[1]
            value = builtins.get(name)
            return value if value is not None else defaults.get(name)

        return Expander(lookup)

    def _one(self, cluster_id: int, proc_id: int, plan_step: tuple[int, int, dict[str, str]], qdate: int,
             owner: str | None, user_keys: list[tuple[str, str]], *,
             macros: dict[str, str] | None = None) -> tuple[dict[str, Any], set[str]]:
        step, row_no, row = plan_step
        extra = materialize.proc_macros(proc_id, step, row_no, row) if macros is None else macros
        expander = self._expander(cluster_id, extra, qdate)
        cache: dict[str, str | None] = {}

        def get(command: str) -> str | None:
            if command not in cache:
                entry = self._entries.get(command)
                cache[command] = None if entry is None else expander.expand(entry[1])
            return cache[command]

        user_attrs = tuple((name, expander.expand(self._entries[key][1])) for name, key in user_keys)
        try:
            ad = build_job_ad(get, cwd=self._cwd(), cluster_id=cluster_id, proc_id=proc_id, qdate=qdate,
                              submit_method=self._submit_method, owner=owner, user_attrs=user_attrs,
                              check_dirs=macros is None)
        except SubmitError as exc:
            if exc.lineno is None:
                raise SubmitError(exc.reason, self._line_of(exc.reason)) from None
            raise
        return ad, expander.used

    def _line_of(self, message: str) -> int | None:
        """The line of the command an error message starts with, when the description came as text."""
        head = message.split(":", 1)[0].split(" ", 1)[0].lower()
        entry = self._entries.get(head)
        return entry[2] if entry else None

    def _check_commands(self, warn_unused: bool) -> None:
        """Warnings for commands HTCondor knows that gridbus does not act on, and (``warn_unused``)
        for lines that are no command and that nothing refers to: as for condor_submit, a
        definition of a macro of one's own, used or not, is never an error."""
        referenced = (commands.referenced_macros(self._all_texts()) | {n.lower() for n in self._queue_names()}
                      | self._condition_refs)
        every = [*self._entries.items(), *(item for delta, _, _ in self._more for item in delta.items())]
        for key, (written, value, lineno) in every:
            if key.startswith("my.") or key in commands.USED or key in referenced or key in commands.BUILTIN_MACROS:
                continue
            if key in commands.KNOWN_UNUSED:
                where = f"line {lineno}: " if lineno else ""
                msg = f"{where}gridbus accepts {written!r} but does not act on it (recorded in the job ad where HTCondor records it)"
                if msg not in self._warnings:
                    self._warnings.append(msg)
                continue
            if warn_unused:
                where = f"line {lineno}: " if lineno else ""
                msg = f"{where}the line '{written} = {value}' was unused by gridbus. Is it a typo?"
                if msg not in self._warnings:
                    self._warnings.append(msg)
                    self._unused.append(msg)

