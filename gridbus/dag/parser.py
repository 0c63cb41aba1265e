"""HTCondor's DAG description language, read into a `gridbus.dag.model.Dag`.

    dag = parse_file("diamond.dag")          # DagError("diamond.dag:7: ...") on a bad line

Commands: JOB (DIR, NOOP, DONE), FINAL, SUBDAG EXTERNAL, SPLICE (DIR), PARENT ... CHILD, RETRY
(UNLESS-EXIT), VARS (PREPEND/APPEND accepted), SCRIPT [DEFER status time] [DEBUG file type] PRE|POST|HOLD, PRE_SKIP,
ABORT-DAG-ON (RETURN), PRIORITY, CATEGORY, MAXJOBS, CONFIG, DOT, NODE_STATUS_FILE, JOBSTATE_LOG,
SET_JOB_ATTR, INCLUDE, and a rescue DAG's DONE. ALL_NODES stands for every node of the file
in RETRY, VARS, SCRIPT, PRE_SKIP, PRIORITY, CATEGORY and ABORT-DAG-ON. Commands that name nodes
run after the file's nodes are defined (a PARENT may come before its JOBs). A spliced DAG's nodes are
named ``splice+node``; a PARENT or CHILD naming a splice means its leaves or its roots.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gridbus.dag.model import FINAL, JOB, SUBDAG, Dag, Node, Script

ALL_NODES = "ALL_NODES"
_NAME = re.compile(r"[^\s+]+")
_VAR = re.compile(r'\s*([A-Za-z_][\w.]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


# Commands that name nodes: run after every node of the file is defined.
_NAMING_NODES = frozenset({"PARENT", "RETRY", "VARS", "SCRIPT", "PRE_SKIP", "ABORT_DAG_ON", "PRIORITY",
                           "CATEGORY", "DONE"})


class DagError(ValueError):
    """A DAG file that cannot be run; the message starts with ``file:line:``."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where


@dataclass
class _Scope:
    """Where a file is being read: its DAG, the splice prefix, the DIR nodes are relative to."""

    dag: Dag
    prefix: str = ""  # "splice+" inside a splice
    directory: str = ""  # the splice's DIR
    splices: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)  # name -> roots, leaves
    nested: bool = False  # inside a splice: FINAL is refused, NODE_STATUS_FILE ignored
    including: tuple[str, ...] = ()


def parse_file(path: str | os.PathLike[str]) -> Dag:
    """Read a DAG file (and the files it INCLUDEs and SPLICEs) into a checked `Dag`."""
    path = Path(path)
    dag = Dag(path=path)
    _read(path, _Scope(dag))
    _check(dag, str(path))
    return dag


def parse_text(text: str, name: str = "<dag>", base: str | os.PathLike[str] = ".") -> Dag:
    """Read DAG text (INCLUDE and SPLICE files are found relative to ``base``)."""
    dag = Dag(path=Path(base) / name)
    _Reader(_Scope(dag), name, Path(base)).run(text)
    _check(dag, name)
    return dag


def apply_rescue(dag: Dag, path: str | os.PathLike[str]) -> None:
    """Mark the nodes a rescue DAG lists as DONE (and take its RETRY lines) on ``dag``."""
    text = Path(path).read_text()
    for lineno, raw in enumerate(text.splitlines(), 1):
        words = raw.split()
        if not words or words[0].startswith("#"):
            continue
        where = f"{path}:{lineno}"
        keyword = words[0].upper()
        if keyword == "DONE" and len(words) == 2:
            _node(dag, words[1], where).done = True
        elif keyword == "RETRY" and len(words) >= 3:
            _node(dag, words[1], where).retries = _int(words[2], where, "RETRY count")
        else:
            raise DagError(where, f"a rescue DAG holds only DONE and RETRY lines, not {raw.strip()!r}")


def _node(dag: Dag, name: str, where: str) -> Node:
    if dag.final is not None and dag.final.name == name:
        return dag.final
    try:
        return dag.nodes[name]
    except KeyError:
        raise DagError(where, f"no node named {name!r}") from None


def _int(text: str, where: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DagError(where, f"{what} must be an integer, not {text!r}") from None


def _check(dag: Dag, where: str) -> None:
    if not dag.nodes and dag.final is None:
        raise DagError(where, "the DAG has no nodes")
    try:
        dag.check_acyclic()
    except ValueError as exc:
        raise DagError(where, str(exc)) from None


def _read(path: Path, scope: _Scope) -> None:
    resolved = str(path.resolve())
    if resolved in scope.including:
        raise DagError(str(path), "the file INCLUDEs itself")
    try:
        text = path.read_text()
    except OSError as exc:
        raise DagError(str(path), f"cannot read the DAG file: {exc.strerror}") from None
    inner = _Scope(scope.dag, scope.prefix, scope.directory, scope.splices, scope.nested,
                   (*scope.including, resolved))
    _Reader(inner, str(path), path.parent).run(text)


class _Reader:
    def __init__(self, scope: _Scope, filename: str, base: Path):
        self.scope = scope
        self.dag = scope.dag
        self.filename = filename
        self.base = base  # where this file's relative INCLUDE/SPLICE names are found
        self.where = filename

    def run(self, text: str) -> None:
        # Two passes, as DAGMan reads a file: the nodes (and splices, includes, DAG-wide commands)
        # first, then the commands that name nodes, so PARENT ... CHILD may come before a JOB.
        later = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            self.where = f"{self.filename}:{lineno}"
            words = line.split()
            keyword = words[0].upper().replace("-", "_")
            handler = getattr(self, "cmd_" + keyword, None)
            if handler is None:
                raise DagError(self.where, f"unknown DAG command {words[0]!r}")
            if keyword in _NAMING_NODES:
                later.append((self.where, handler, words[1:], line))
            else:
                handler(words[1:], line)
        for self.where, handler, args, line in later:
            handler(args, line)

    # ------------------------------------------------------------------ helpers
    def fail(self, message: str) -> DagError:
        return DagError(self.where, message)

    def full(self, name: str) -> str:
        return self.scope.prefix + name

    def node(self, name: str) -> Node:
        return _node(self.dag, self.full(name), self.where)

    def targets(self, name: str) -> list[Node]:
        if name == ALL_NODES:
            return [n for n in self.dag.nodes.values() if n.name.startswith(self.scope.prefix)]
        return [self.node(name)]

    def need(self, args: list[str], count: int, usage: str) -> None:
        if len(args) < count:
            raise self.fail(f"expected {usage}")

    def node_dir(self, directory: str | None) -> str | None:
        parts = [d for d in (self.scope.directory, directory) if d]
        if not parts:
            return None
        return parts[-1] if os.path.isabs(parts[-1]) else os.path.join(*parts)

    # ------------------------------------------------------------------ nodes
    def define(self, kind: str, args: list[str], usage: str) -> Node:
        self.need(args, 2, usage)
        name, submit = args[0], args[1]
        if not _NAME.fullmatch(name) or name == ALL_NODES:
            raise self.fail(f"{name!r} is not a valid node name (no '+', not ALL_NODES)")
        full = self.full(name)
        if full in self.dag.nodes or (self.dag.final is not None and self.dag.final.name == full):
            raise self.fail(f"node {full!r} is defined twice")
        node = Node(full, submit, kind=kind, source=self.where)
        rest = iter(args[2:])
        directory = None
        for word in rest:
            key = word.upper()
            if key == "DIR":
                directory = next(rest, None)
                if directory is None:
                    raise self.fail("DIR needs a directory")
            elif key == "NOOP":
                node.noop = True
            elif key == "DONE" and kind != FINAL:
                node.done = True
            else:
                raise self.fail(f"unexpected {word!r}: expected {usage}")
        node.directory = self.node_dir(directory)
        return node

    def cmd_JOB(self, args: list[str], line: str) -> None:
        node = self.define(JOB, args, "JOB name submit_file [DIR dir] [NOOP] [DONE]")
        self.dag.nodes[node.name] = node

    def cmd_FINAL(self, args: list[str], line: str) -> None:
        if self.scope.nested:
            raise self.fail("a spliced DAG cannot have a FINAL node")
        if self.dag.final is not None:
            raise self.fail(f"the DAG already has a FINAL node ({self.dag.final.name})")
        self.dag.final = self.define(FINAL, args, "FINAL name submit_file [DIR dir] [NOOP]")

    def cmd_SUBDAG(self, args: list[str], line: str) -> None:
        if not args or args[0].upper() != "EXTERNAL":
            raise self.fail("expected SUBDAG EXTERNAL name dag_file [DIR dir] [NOOP] [DONE]")
        node = self.define(SUBDAG, args[1:], "SUBDAG EXTERNAL name dag_file [DIR dir] [NOOP] [DONE]")
        self.dag.nodes[node.name] = node

    def cmd_SPLICE(self, args: list[str], line: str) -> None:
        self.need(args, 2, "SPLICE name dag_file [DIR dir]")
        name, file = args[0], args[1]
        if not _NAME.fullmatch(name):
            raise self.fail(f"{name!r} is not a valid splice name")
        directory = None
        if len(args) > 2:
            if len(args) != 4 or args[2].upper() != "DIR":
                raise self.fail("expected SPLICE name dag_file [DIR dir]")
            directory = args[3]
        full = self.full(name)
        if full in self.scope.splices:
            raise self.fail(f"splice {full!r} is defined twice")
        splice_dir = self.node_dir(directory) or ""
        path = Path(file)
        if not path.is_absolute():
            # The splice's file, like its nodes' files, is found in its DIR (below the top DAG's
            # directory unless absolute).
            root = self.dag.path.parent if self.dag.path is not None else self.base
            path = (root / splice_dir / file) if splice_dir else (self.base / file)
        before = set(self.dag.nodes)
        _read(path, _Scope(self.dag, full + "+", splice_dir, self.scope.splices, True, self.scope.including))
        made = [n for n in self.dag.nodes if n not in before]
        if not made:
            raise self.fail(f"splice {full!r} has no nodes")
        roots = [n for n in made if not self.dag.nodes[n].parents]
        leaves = [n for n in made if not self.dag.nodes[n].children]
        self.scope.splices[full] = (roots, leaves)

    def cmd_PARENT(self, args: list[str], line: str) -> None:
        upper = [a.upper() for a in args]
        if "CHILD" not in upper:
            raise self.fail("expected PARENT p1 [p2 ...] CHILD c1 [c2 ...]")
        cut = upper.index("CHILD")
        parents, children = args[:cut], args[cut + 1:]
        if not parents or not children:
            raise self.fail("PARENT ... CHILD needs at least one parent and one child")
        tails = [t for p in parents for t in self.ends(p, leaves=True)]
        heads = [h for c in children for h in self.ends(c, leaves=False)]
        for p in tails:
            for c in heads:
                if p == c:
                    raise self.fail(f"node {p!r} cannot be its own parent")
                self.dag.add_edge(p, c)

    def ends(self, name: str, *, leaves: bool) -> list[str]:
        full = self.full(name)
        if full in self.scope.splices:
            return self.scope.splices[full][1 if leaves else 0]
        node = self.node(name)
        if node.kind == FINAL:
            raise self.fail(f"the FINAL node {name!r} cannot be in PARENT ... CHILD")
        return [node.name]

    # ------------------------------------------------------------------ per-node commands
    def cmd_RETRY(self, args: list[str], line: str) -> None:
        self.need(args, 2, "RETRY name count [UNLESS-EXIT value]")
        count = _int(args[1], self.where, "RETRY count")
        unless = None
        if len(args) > 2:
            if len(args) != 4 or args[2].upper() != "UNLESS-EXIT":
                raise self.fail("expected RETRY name count [UNLESS-EXIT value]")
            unless = _int(args[3], self.where, "UNLESS-EXIT value")
        if count < 0:
            raise self.fail("RETRY count must not be negative")
        for node in self.targets(args[0]):
            node.retries, node.retry_unless_exit = count, unless

    def cmd_VARS(self, args: list[str], line: str) -> None:
        self.need(args, 2, 'VARS name [PREPEND|APPEND] macro="value" ...')
        rest = line.split(None, 2)[2]
        first = rest.split(None, 1)[0].upper()
        if first in ("PREPEND", "APPEND"):
            rest = rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else ""
        pairs: list[tuple[str, str]] = []
        pos = 0
        while pos < len(rest):
            if rest[pos:].strip() == "":
                break
            m = _VAR.match(rest, pos)
            if m is None:
                raise self.fail(f'VARS expects macro="value" pairs, not {rest[pos:].strip()!r}')
            name = m.group(1)
            if name.lower().startswith("queue"):
                raise self.fail(f"VARS macro {name!r} cannot begin with 'queue'")
            value = re.sub(r"\\(.)", r"\1", m.group(2))
            pairs.append((name, value))
            pos = m.end()
        if not pairs:
            raise self.fail('VARS needs at least one macro="value"')
        for node in self.targets(args[0]):
            node.vars.update(pairs)

    def cmd_SCRIPT(self, args: list[str], line: str) -> None:
        usage = "SCRIPT [DEFER status time] [DEBUG file STDOUT|STDERR|ALL] PRE|POST|HOLD name executable [arguments]"
        defer_status, defer_time = None, 0
        debug_file, debug_type = "", ""
        words = list(args)
        if words and words[0].upper() == "DEFER":
            self.need(words, 3, usage)
            defer_status = _int(words[1], self.where, "DEFER status")
            defer_time = _int(words[2], self.where, "DEFER time")
            words = words[3:]
        if words and words[0].upper() == "DEBUG":
            self.need(words, 3, usage)
            debug_file, debug_type = words[1], words[2].upper()
            if debug_type not in ("STDOUT", "STDERR", "ALL"):
                raise self.fail(f"DEBUG output type {words[2]!r} is not STDOUT, STDERR or ALL")
            words = words[3:]
        if len(words) < 3 or words[0].upper() not in ("PRE", "POST", "HOLD"):
            raise self.fail(f"expected {usage}")
        kind = words[0].upper()
        try:
            argv = shlex.split(line.split(None, 1)[1])[len(args) - len(words) + 2:]
        except ValueError as exc:
            raise self.fail(f"cannot split the script's command line: {exc}") from None
        for node in self.targets(words[1]):
            setattr(node, kind.lower(), Script(kind, argv[0], argv[1:], defer_status, defer_time,
                                               debug_file, debug_type))

    def cmd_PRE_SKIP(self, args: list[str], line: str) -> None:
        self.need(args, 2, "PRE_SKIP name exit_code")
        code = _int(args[1], self.where, "PRE_SKIP exit code")
        if code == 0:
            raise self.fail("PRE_SKIP exit code must not be 0")
        for node in self.targets(args[0]):
            node.pre_skip = code

    def cmd_ABORT_DAG_ON(self, args: list[str], line: str) -> None:
        self.need(args, 2, "ABORT-DAG-ON name exit_value [RETURN value]")
        value = _int(args[1], self.where, "ABORT-DAG-ON exit value")
        ret = None
        if len(args) > 2:
            if len(args) != 4 or args[2].upper() != "RETURN":
                raise self.fail("expected ABORT-DAG-ON name exit_value [RETURN value]")
            ret = _int(args[3], self.where, "RETURN value")
            if not 0 <= ret <= 255:
                raise self.fail("RETURN value must be 0 to 255")
        for node in self.targets(args[0]):
            node.abort_on, node.abort_return = value, ret

    def cmd_PRIORITY(self, args: list[str], line: str) -> None:
        self.need(args, 2, "PRIORITY name value")
        value = _int(args[1], self.where, "PRIORITY")
        for node in self.targets(args[0]):
            node.priority = value

    def cmd_CATEGORY(self, args: list[str], line: str) -> None:
        self.need(args, 2, "CATEGORY name category")
        for node in self.targets(args[0]):
            node.category = args[1]

    def cmd_DONE(self, args: list[str], line: str) -> None:
        self.need(args, 1, "DONE name")
        self.node(args[0]).done = True

    # ------------------------------------------------------------------ DAG-wide commands
    def cmd_MAXJOBS(self, args: list[str], line: str) -> None:
        self.need(args, 2, "MAXJOBS category value")
        value = _int(args[1], self.where, "MAXJOBS value")
        if value < 0:
            raise self.fail("MAXJOBS value must not be negative")
        self.dag.maxjobs[args[0]] = value

    def cmd_CONFIG(self, args: list[str], line: str) -> None:
        self.need(args, 1, "CONFIG file")
        if self.dag.config is not None and self.dag.config != args[0] and not self.scope.nested:
            raise self.fail(f"a second CONFIG file ({args[0]}; the first was {self.dag.config})")
        self.dag.config = self.dag.config or args[0]

    def cmd_DOT(self, args: list[str], line: str) -> None:
        self.need(args, 1, "DOT file [UPDATE|DONT-UPDATE] [OVERWRITE|DONT-OVERWRITE] [INCLUDE file]")
        self.dag.dot = list(args)

    def cmd_NODE_STATUS_FILE(self, args: list[str], line: str) -> None:
        self.need(args, 1, "NODE_STATUS_FILE file [min_update_time] [ALWAYS-UPDATE]")
        if self.scope.nested or self.dag.node_status_file is not None:
            return  # the first one counts; a splice's is ignored (HTCondor's rule)
        self.dag.node_status_file = args[0]
        for word in args[1:]:
            if word.upper() == "ALWAYS-UPDATE":
                self.dag.node_status_always = True
            else:
                self.dag.node_status_interval = _int(word, self.where, "NODE_STATUS_FILE update time")

    def cmd_JOBSTATE_LOG(self, args: list[str], line: str) -> None:
        self.need(args, 1, "JOBSTATE_LOG file")
        self.dag.jobstate_log = args[0]

    def cmd_SET_JOB_ATTR(self, args: list[str], line: str) -> None:
        body = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
        name, eq, value = body.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise self.fail("expected SET_JOB_ATTR name = value")
        self.dag.job_attrs[name.strip()] = value.strip()

    def cmd_INCLUDE(self, args: list[str], line: str) -> None:
        self.need(args, 1, "INCLUDE file")
        path = Path(args[0])
        _read(path if path.is_absolute() else self.base / path, self.scope)
