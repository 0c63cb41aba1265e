"""DAGs described in Python, written as DAGMan input: the names and behaviour of ``htcondor2.dags``.

(One module over 500 lines: htcondor2.dags's names in one module, as htcondor2 has them.)

    from gridbus.console import dags              # instead of: from htcondor2 import dags
    dag = dags.DAG()
    tiles = dag.layer(name="tile", submit_description=Submit({...}), vars=[{"x": "1"}, {"x": "2"}])
    tiles.child_layer(name="montage", submit_description=Submit({...}))
    dag_file = dags.write_dag(dag, "mandelbrot-dag")   # then Submit.from_dag(str(dag_file))

A logical node is a layer of DAGMan nodes that share a submit description (one per ``vars``
entry, named ``<layer>:<index>``), a sub-DAG, or the FINAL node. Edges between layers say which of
their nodes depend on which: ManyToMany (through a NOOP join node when both sides have several),
OneToOne, Grouper, Slicer. `write_dag` prints what htcondor2.dags prints for the same DAG, line for
line; children are visited in the order their edges were made (htcondor2 leaves sibling order
unspecified).
"""

from __future__ import annotations

import collections
import enum
import fnmatch
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from gridbus.submit import Submit

DEFAULT_DAG_FILE_NAME = "dagfile.dag"
CONFIG_FILE_NAME = "dagman.config"
NOOP_SUBMIT_FILE_NAME = "__JOIN__.sub"
DEFAULT_SEPARATOR = ":"


# ------------------------------------------------------------------ errors
class DAGsException(Exception):
    pass


class OneToOneEdgeNeedsSameNumberOfVars(DAGsException):
    pass


class IncompatibleGrouper(DAGsException):
    pass


class DuplicateNodeName(DAGsException):
    pass


class UnrecognizedWalkOrder(DAGsException):
    pass


class LayerNameContainsSeparator(DAGsException):
    pass


class NoRescueFileFound(DAGsException):
    pass


class CannotInvertFormat(DAGsException):
    pass


class exceptions:  # noqa: N801 - htcondor2.dags.exceptions, as a namespace
    DAGsException = DAGsException
    OneToOneEdgeNeedsSameNumberOfVars = OneToOneEdgeNeedsSameNumberOfVars
    IncompatibleGrouper = IncompatibleGrouper
    DuplicateNodeName = DuplicateNodeName
    UnrecognizedWalkOrder = UnrecognizedWalkOrder
    LayerNameContainsSeparator = LayerNameContainsSeparator
    NoRescueFileFound = NoRescueFileFound
    CannotInvertFormat = CannotInvertFormat


class WalkOrder(enum.Enum):
    DEPTH_FIRST = "DEPTH"
    BREADTH_FIRST = "BREADTH"


def _flat(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        if isinstance(item, (BaseNode,)):
            yield item
        elif isinstance(item, (Nodes, list, tuple, set, frozenset)):
            yield from _flat(item)
        else:
            yield item


# ------------------------------------------------------------------ node names
class NodeNameFormatter:
    def generate(self, layer_name: str, node_index: int) -> str:
        raise NotImplementedError

    def parse(self, node_name: str) -> tuple[str, int]:
        raise NotImplementedError


class SimpleFormatter(NodeNameFormatter):
    """Names like ``layer:5`` (separator, index format and offset configurable)."""

    def __init__(self, separator: str = DEFAULT_SEPARATOR, index_format: str = "{:d}", offset: int = 0):
        self.separator, self.index_format, self.offset = separator, index_format, offset

    def generate(self, layer_name: str, node_index: int) -> str:
        if self.separator in layer_name:
            raise LayerNameContainsSeparator(
                f"The layer name {layer_name} cannot contain the node name separator character '{self.separator}'")
        name = f"{layer_name}{self.separator}{self.index_format.format(node_index + self.offset)}"
        if self.parse(name) != (layer_name, node_index):
            raise CannotInvertFormat(f"{type(self).__name__} cannot invert the node name {name}")
        return name

    def parse(self, node_name: str) -> tuple[str, int]:
        layer, _, index = node_name.rpartition(self.separator)
        try:
            return layer, int(index) - self.offset
        except ValueError:
            raise CannotInvertFormat(f"{type(self).__name__} cannot invert the node name {node_name}") from None


# ------------------------------------------------------------------ edges
class JoinNode:
    def __init__(self, id: int):
        self.id = id


class JoinFactory:
    def __init__(self) -> None:
        self._ids = itertools.count(0)
        self.joins: list[JoinNode] = []

    def get_join_node(self) -> JoinNode:
        join = JoinNode(next(self._ids))
        self.joins.append(join)
        return join


class BaseEdge:
    """Which nodes of a parent layer each node of a child layer depends on: ``get_edges`` yields
    (parent indices, child indices) pairs, either side possibly a JoinNode."""

    def get_edges(self, parent: BaseNode, child: BaseNode, join_factory: JoinFactory) -> Iterable[Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


class ManyToMany(BaseEdge):
    """Every child node depends on every parent node (2N edges through a join node, not N^2)."""

    def get_edges(self, parent: BaseNode, child: BaseNode, join_factory: JoinFactory) -> Iterable[Any]:
        p, c = tuple(range(len(parent))), tuple(range(len(child)))
        if len(p) == 1 or len(c) == 1:
            yield p, c
        else:
            join = join_factory.get_join_node()
            yield p, join
            yield join, c


class OneToOne(BaseEdge):
    """Child node i depends on parent node i (the layers must be the same size)."""

    def get_edges(self, parent: BaseNode, child: BaseNode, join_factory: JoinFactory) -> Iterable[Any]:
        if len(parent) != len(child):
            raise OneToOneEdgeNeedsSameNumberOfVars(
                f"Parent layer {parent} has {len(parent)} nodes, but child layer {child} has {len(child)} nodes")
        return (((i,), (i,)) for i in range(len(parent)))


class Grouper(BaseEdge):
    """The layers cut into equal numbers of chunks; chunk i of the child depends on chunk i of the parent."""

    def __init__(self, parent_chunk_size: int = 1, child_chunk_size: int = 1):
        self.parent_chunk_size, self.child_chunk_size = parent_chunk_size, child_chunk_size

    def get_edges(self, parent: BaseNode, child: BaseNode, join_factory: JoinFactory) -> Iterable[Any]:
        np_, nc, ps, cs = len(parent), len(child), self.parent_chunk_size, self.child_chunk_size
        if np_ % ps or nc % cs or np_ // ps != nc // cs:
            raise IncompatibleGrouper(
                f"Cannot apply edge {self} to layers {parent} ({np_} nodes) and {child} ({nc} nodes)")
        for k in range(np_ // ps):
            join = join_factory.get_join_node()
            yield tuple(range(k * ps, (k + 1) * ps)), join
            yield join, tuple(range(k * cs, (k + 1) * cs))

    def __repr__(self) -> str:
        return f"Grouper(parent_chunk_size = {self.parent_chunk_size}, child_chunk_size = {self.child_chunk_size})"


class Slicer(BaseEdge):
    """The parent nodes in one slice joined one-to-one with the child nodes in another."""

    def __init__(self, parent_slice: slice = slice(None), child_slice: slice = slice(None)):
        self.parent_slice, self.child_slice = parent_slice, child_slice

    def get_edges(self, parent: BaseNode, child: BaseNode, join_factory: JoinFactory) -> Iterable[Any]:
        ps, cs = self.parent_slice, self.child_slice
        for p, c in zip(itertools.islice(range(len(parent)), ps.start, ps.stop, ps.step),
                        itertools.islice(range(len(child)), cs.start, cs.stop, cs.step), strict=False):
            yield (p,), (c,)

    def __repr__(self) -> str:
        return f"Slicer(parent_slice = {self.parent_slice}, child_slice = {self.child_slice})"


class Edges:  # a namespace for the edge kinds, as the API list names them
    BaseEdge = BaseEdge
    ManyToMany = ManyToMany
    OneToOne = OneToOne
    Grouper = Grouper
    Slicer = Slicer
    JoinNode = JoinNode
    JoinFactory = JoinFactory


# ------------------------------------------------------------------ nodes
class Script:
    """A PRE or POST script: executable, arguments, and DEFER (retry, retry_status, retry_delay)."""

    def __init__(self, executable: str | Path, arguments: list[Any] | None = None, retry: bool = False,
                 retry_status: int = 1, retry_delay: int = 0):
        self.executable = executable
        self.arguments = [str(a) for a in (arguments or [])]
        self.retry, self.retry_status, self.retry_delay = retry, retry_status, retry_delay

    def __repr__(self) -> str:
        return (f"Script(executable = {self.executable}, arguments = {self.arguments}, retry = {self.retry}, "
                f"retry_status = {self.retry_status}, retry_delay = {self.retry_delay})")


class DAGAbortCondition:
    def __init__(self, node_exit_value: int, dag_return_value: int | None = None):
        self.node_exit_value, self.dag_return_value = node_exit_value, dag_return_value

    def __repr__(self) -> str:
        return f"DAGAbortCondition(node_exit_value = {self.node_exit_value}, dag_return_value = {self.dag_return_value})"


class BaseNode:
    """A logical node of a DAG; made by DAG.layer/subdag/final or a node's child_/parent_ methods."""

    def __init__(self, dag: DAG, *, name: str, dir: str | Path | None = None,
                 noop: bool | Mapping[int, bool] = False, done: bool | Mapping[int, bool] = False,
                 retries: int | None = None, retry_unless_exit: int | None = None, pre: Script | None = None,
                 post: Script | None = None, pre_skip_exit_code: int | None = None, priority: int = 0,
                 category: str | None = None, abort: DAGAbortCondition | None = None):
        self._dag = dag
        self.name = name
        self.dir = Path(dir) if dir is not None else None
        self.noop = {0: noop} if isinstance(noop, bool) else dict(noop)
        self.done = {0: done} if isinstance(done, bool) else dict(done)
        self.retries, self.retry_unless_exit = retries, retry_unless_exit
        self.pre, self.post, self.pre_skip_exit_code = pre, post, pre_skip_exit_code
        self.priority, self.category, self.abort = priority, category, abort

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[BaseNode]:
        yield self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name = {self.name})"

    def __hash__(self) -> int:
        return hash((type(self), self.name))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self._dag is other._dag and self.name == other.name

    def __lt__(self, other: BaseNode) -> bool:
        return self.name < other.name

    # -- building the graph
    def child_layer(self, edge: BaseEdge | None = None, **kwargs: Any) -> NodeLayer:
        node = self._dag.layer(**kwargs)
        self._dag._edges.add(self, node, edge)
        return node

    def parent_layer(self, edge: BaseEdge | None = None, **kwargs: Any) -> NodeLayer:
        node = self._dag.layer(**kwargs)
        self._dag._edges.add(node, self, edge)
        return node

    def child_subdag(self, edge: BaseEdge | None = None, **kwargs: Any) -> SubDAG:
        node = self._dag.subdag(**kwargs)
        self._dag._edges.add(self, node, edge)
        return node

    def parent_subdag(self, edge: BaseEdge | None = None, **kwargs: Any) -> SubDAG:
        node = self._dag.subdag(**kwargs)
        self._dag._edges.add(node, self, edge)
        return node

    def add_children(self, *nodes: Any, edge: BaseEdge | None = None) -> Self:
        for node in _flat(nodes):
            self._dag._edges.add(self, node, edge)
        return self

    def remove_children(self, *nodes: Any) -> BaseNode:
        for node in _flat(nodes):
            self._dag._edges.pop(self, node)
        return self

    def add_parents(self, *nodes: Any, edge: BaseEdge | None = None) -> Self:
        for node in _flat(nodes):
            self._dag._edges.add(node, self, edge)
        return self

    def remove_parents(self, *nodes: Any) -> BaseNode:
        for node in _flat(nodes):
            self._dag._edges.pop(node, self)
        return self

    @property
    def children(self) -> Nodes:
        return self._dag.node_to_children[self]

    @property
    def parents(self) -> Nodes:
        return self._dag.node_to_parents[self]

    def walk_ancestors(self, order: WalkOrder = WalkOrder.DEPTH_FIRST) -> Iterator[BaseNode]:
        return self._dag.walk_ancestors(self, order)

    def walk_descendants(self, order: WalkOrder = WalkOrder.DEPTH_FIRST) -> Iterator[BaseNode]:
        return self._dag.walk_descendants(self, order)


Node = BaseNode  # the name for the base of every logical node


class NodeLayer(BaseNode):
    """``JOB`` nodes sharing a submit description (a Submit, or the Path of a submit file), one per vars."""

    def __init__(self, dag: DAG, *, submit_description: Submit | Path | None = None,
                 vars: Iterable[Mapping[str, Any]] | None = None, **kwargs: Any):
        super().__init__(dag, **kwargs)
        self.submit_description = submit_description if submit_description is not None else Submit({})
        self.vars = list(vars) if vars is not None else [{}]

    def __len__(self) -> int:
        return len(self.vars)


class SubDAG(BaseNode):
    """A ``SUBDAG EXTERNAL`` node running the DAG file ``dag_file``."""

    def __init__(self, dag: DAG, *, dag_file: Path, **kwargs: Any):
        super().__init__(dag, **kwargs)
        self.dag_file = dag_file


class FinalNode(BaseNode):
    """The ``FINAL`` node: runs last, whatever happened to the others."""

    def __init__(self, dag: DAG, submit_description: Submit | Path | None = None, **kwargs: Any):
        super().__init__(dag, **kwargs)
        self.submit_description = submit_description if submit_description is not None else Submit({})


class Nodes:
    """A set of logical nodes that acts on all of them at once."""

    def __init__(self, *nodes: Any):
        self._nodes: dict[str, BaseNode] = {}
        for node in _flat(nodes):
            self._nodes[node.name] = node

    def __iter__(self) -> Iterator[BaseNode]:
        return iter(list(self._nodes.values()))

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        if isinstance(node, str):
            return node in self._nodes
        return isinstance(node, BaseNode) and self._nodes.get(node.name) is node

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Nodes) and self._nodes == other._nodes

    def __repr__(self) -> str:
        return "Nodes({})".format(", ".join(repr(n) for n in sorted(self._nodes.values(), key=lambda n: n.name)))

    def _first(self) -> BaseNode:
        return next(iter(self._nodes.values()))

    def child_layer(self, type: BaseEdge | None = None, **kwargs: Any) -> NodeLayer:
        return self._first()._dag.layer(**kwargs).add_parents(self, edge=type)

    def parent_layer(self, type: BaseEdge | None = None, **kwargs: Any) -> NodeLayer:
        return self._first()._dag.layer(**kwargs).add_children(self, edge=type)

    def child_subdag(self, type: BaseEdge | None = None, **kwargs: Any) -> SubDAG:
        return self._first()._dag.subdag(**kwargs).add_parents(self, edge=type)

    def parent_subdag(self, type: BaseEdge | None = None, **kwargs: Any) -> SubDAG:
        return self._first()._dag.subdag(**kwargs).add_children(self, edge=type)

    def add_children(self, *nodes: Any, type: BaseEdge | None = None) -> Nodes:
        for n in self:
            n.add_children(nodes, edge=type)
        return self

    def remove_children(self, *nodes: Any) -> Nodes:
        for n in self:
            n.remove_children(nodes)
        return self

    def add_parents(self, *nodes: Any, type: BaseEdge | None = None) -> Nodes:
        for n in self:
            n.add_parents(nodes, edge=type)
        return self

    def remove_parents(self, *nodes: Any) -> Nodes:
        for n in self:
            n.remove_parents(nodes)
        return self


# ------------------------------------------------------------------ the DAG
class DotConfig:
    def __init__(self, path: Path, update: bool = False, overwrite: bool = True, include_file: Path | None = None):
        self.path, self.update, self.overwrite = Path(path), update, overwrite
        self.include_file = Path(include_file) if include_file is not None else None


class NodeStatusFile:
    def __init__(self, path: Path, update_time: int | None = None, always_update: bool | None = False):
        self.path, self.update_time, self.always_update = Path(path), update_time, always_update


class _Edges:
    """(parent, child) -> edge, in the order they were made."""

    def __init__(self) -> None:
        self.edges: dict[tuple[BaseNode, BaseNode], BaseEdge] = {}

    def __iter__(self) -> Iterator[tuple[BaseNode, BaseNode]]:
        return iter(list(self.edges))

    def add(self, parent: BaseNode, child: BaseNode, edge: BaseEdge | None = None) -> None:
        self.edges[(parent, child)] = edge if edge is not None else ManyToMany()

    def get(self, parent: BaseNode, child: BaseNode) -> BaseEdge | None:
        return self.edges.get((parent, child))

    def pop(self, parent: BaseNode, child: BaseNode) -> BaseEdge | None:
        return self.edges.pop((parent, child), None)

    def items(self) -> Iterator[tuple[tuple[BaseNode, BaseNode], BaseEdge]]:
        return iter(list(self.edges.items()))


class DAG:
    """A DAGMan workflow: logical nodes, the edges between them, and the DAG-wide settings."""

    def __init__(self, dagman_config: Mapping[str, Any] | None = None,
                 dagman_job_attributes: Mapping[str, Any] | None = None,
                 max_jobs_by_category: Mapping[str, int] | None = None, dot_config: DotConfig | None = None,
                 jobstate_log: Path | None = None, node_status_file: NodeStatusFile | None = None):
        self._nodes: dict[str, BaseNode] = {}
        self._edges = _Edges()
        self._final_node: FinalNode | None = None
        self.jobstate_log = Path(jobstate_log) if jobstate_log is not None else None
        self.max_jobs_per_category = dict(max_jobs_by_category or {})
        self.dagman_config = dict(dagman_config or {})
        self.dagman_job_attrs = dict(dagman_job_attributes or {})
        self.dot_config = dot_config
        self.node_status_file = node_status_file

    def _unique(self, name: str) -> None:
        if name in self._nodes or (self._final_node is not None and self._final_node.name == name):
            raise DuplicateNodeName(f"the DAG already has a node named {name}")

    def layer(self, **kwargs: Any) -> NodeLayer:
        self._unique(kwargs["name"])
        node = NodeLayer(self, **kwargs)
        self._nodes[node.name] = node
        return node

    def subdag(self, **kwargs: Any) -> SubDAG:
        self._unique(kwargs["name"])
        node = SubDAG(self, **kwargs)
        self._nodes[node.name] = node
        return node

    def final(self, **kwargs: Any) -> FinalNode:
        if self._final_node is None or self._final_node.name != kwargs.get("name"):
            self._unique(kwargs["name"])
        self._final_node = FinalNode(self, **kwargs)
        return self._final_node

    def __contains__(self, node: object) -> bool:
        return isinstance(node, BaseNode) and self._nodes.get(node.name) is node

    @property
    def nodes(self) -> Nodes:
        return Nodes(list(self._nodes.values()))

    @property
    def edges(self) -> Iterator[tuple[tuple[BaseNode, BaseNode], BaseEdge]]:
        return self._edges.items()

    @property
    def node_to_children(self) -> dict[BaseNode, Nodes]:
        out: dict[BaseNode, list[BaseNode]] = {n: [] for n in self._nodes.values()}
        for parent, child in self._edges:
            out[parent].append(child)
        return {k: Nodes(v) for k, v in out.items()}

    @property
    def node_to_parents(self) -> dict[BaseNode, Nodes]:
        out: dict[BaseNode, list[BaseNode]] = {n: [] for n in self._nodes.values()}
        for parent, child in self._edges:
            out[child].append(parent)
        return {k: Nodes(v) for k, v in out.items()}

    @property
    def roots(self) -> Nodes:
        return Nodes([n for n, parents in self.node_to_parents.items() if len(parents) == 0])

    @property
    def leaves(self) -> Nodes:
        return Nodes([n for n, children in self.node_to_children.items() if len(children) == 0])

    def select(self, selector: Callable[[BaseNode], bool]) -> Nodes:
        return Nodes([n for n in self._nodes.values() if selector(n)])

    def glob(self, pattern: str) -> Nodes:
        return self.select(lambda n: fnmatch.fnmatchcase(n.name, pattern))

    def walk(self, order: WalkOrder = WalkOrder.DEPTH_FIRST) -> Iterator[BaseNode]:
        children = self.node_to_children
        return self._walk(list(self.roots), lambda n: children[n], order)

    def walk_ancestors(self, node: BaseNode, order: WalkOrder = WalkOrder.DEPTH_FIRST) -> Iterator[BaseNode]:
        parents = self.node_to_parents
        return self._walk(list(parents[node]), lambda n: parents[n], order)

    def walk_descendants(self, node: BaseNode, order: WalkOrder = WalkOrder.DEPTH_FIRST) -> Iterator[BaseNode]:
        children = self.node_to_children
        return self._walk(list(children[node]), lambda n: children[n], order)

    @staticmethod
    def _walk(start: list[BaseNode], more: Callable[[BaseNode], Nodes], order: WalkOrder) -> Iterator[BaseNode]:
        if not isinstance(order, WalkOrder):
            raise UnrecognizedWalkOrder(f"Unrecognized WalkOrder: {order}")
        seen: set[BaseNode] = set()
        pending = collections.deque(start)
        while pending:
            node = pending.pop() if order is WalkOrder.DEPTH_FIRST else pending.popleft()
            if node in seen:
                continue
            seen.add(node)
            pending.extend(more(node))
            yield node

    def describe(self) -> str:
        """A table of the logical nodes: type, name, nodes, children, parents and their edges, laid
        out as htcondor2's: columns two spaces apart, Type and Parents left-aligned and the others
        centred, no rule under the header, an empty cell for what is None (a SubDAG's node count,
        a root's parents); only the header line is stripped on the right."""
        headers = ("Type", "Name", "# Nodes", "# Children", "Parents")
        rows = []
        for n in self.walk(WalkOrder.BREADTH_FIRST):
            kind = "Layer" if isinstance(n, NodeLayer) else "SubDAG"
            size = str(len(n.vars)) if isinstance(n, NodeLayer) else ""
            parents = ", ".join(f"{p.name}[{self._edges.get(p, n)}]" for p in n.parents)
            rows.append((kind, n.name, size, str(len(n.children)), parents))
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(c.ljust(w) if i in (0, 4) else c.center(w)
                             for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

        return "\n".join([line(headers).rstrip(), *(line(r) for r in rows)])


# ------------------------------------------------------------------ writing
def write_dag(dag: DAG, dag_dir: str | Path, dag_file_name: str | None = DEFAULT_DAG_FILE_NAME,
              node_name_formatter: NodeNameFormatter | None = None) -> Path:
    """Write the DAG file, the layers' submit files (``<layer>.sub``), the join nodes' empty submit
    file and the CONFIG file into ``dag_dir``; returns the DAG file's path."""
    return _Writer(dag, node_name_formatter or SimpleFormatter()).write(Path(dag_dir), dag_file_name)


class _Writer:
    def __init__(self, dag: DAG, names: NodeNameFormatter):
        self.dag, self.names, self.joins = dag, names, JoinFactory()

    def write(self, dag_dir: Path, dag_file_name: str | None) -> Path:
        dag_dir = dag_dir.absolute()
        dag_dir.mkdir(parents=True, exist_ok=True)
        path = dag_dir / (dag_file_name or DEFAULT_DAG_FILE_NAME)
        path.write_text("".join(line + "\n" for line in self.lines()))
        for layer in self.dag._nodes.values():
            if isinstance(layer, NodeLayer) and isinstance(layer.submit_description, Submit):
                # str(Submit) ends with its queue statement, as htcondor2's does.
                (dag_dir / f"{layer.name}.sub").write_text(str(layer.submit_description))
        if self.joins.joins:
            (dag_dir / NOOP_SUBMIT_FILE_NAME).touch(exist_ok=True)
        if self.dag.dagman_config:
            (dag_dir / CONFIG_FILE_NAME).write_text(
                "\n".join(f"{k} = {v}" for k, v in self.dag.dagman_config.items()))
        return path

    def lines(self) -> Iterator[str]:
        yield "# BEGIN META"
        yield from self.meta()
        yield "# END META"
        yield "# BEGIN NODES AND EDGES"
        for node in self.dag.walk(WalkOrder.BREADTH_FIRST):
            yield from self.node(node)
            yield from self.edges(node)
        for join in self.joins.joins:
            yield f"JOB {self.join_name(join)} {NOOP_SUBMIT_FILE_NAME} NOOP"
        yield "# END NODES AND EDGES"
        final = self.dag._final_node
        if final is not None:
            yield "# FINAL NODE"
            yield f"FINAL {final.name} {final.name}.sub"
            yield from self.node_commands(final, final.name)
            yield "# END FINAL NODE"

    def meta(self) -> Iterator[str]:
        d = self.dag
        if d.dagman_config:
            yield f"CONFIG {CONFIG_FILE_NAME}"
        if d.jobstate_log is not None:
            yield f"JOBSTATE_LOG {d.jobstate_log.as_posix()}"
        if d.node_status_file is not None:
            nsf = d.node_status_file
            yield " ".join(["NODE_STATUS_FILE", nsf.path.as_posix(),
                            *([str(nsf.update_time)] if nsf.update_time is not None else []),
                            *(["ALWAYS-UPDATE"] if nsf.always_update else [])])
        if d.dot_config is not None:
            c = d.dot_config
            yield " ".join(["DOT", c.path.as_posix(), "UPDATE" if c.update else "DONT-UPDATE",
                            "OVERWRITE" if c.overwrite else "DONT-OVERWRITE",
                            *(["INCLUDE", c.include_file.as_posix()] if c.include_file is not None else [])])
        for k, v in d.dagman_job_attrs.items():
            yield f"SET_JOB_ATTR {k} = {v}"
        for category, value in d.max_jobs_per_category.items():
            # htcondor2.dags writes the category throttle this way; written alike for equal output.
            yield f"CATEGORY {category} {value}"

    def node(self, node: BaseNode) -> Iterator[str]:
        if isinstance(node, NodeLayer):
            for idx, vars in enumerate(node.vars):
                name = self.names.generate(node.name, idx)
                sub = (f"{node.name}.sub" if isinstance(node.submit_description, Submit)
                       else Path(node.submit_description).absolute().as_posix())
                yield " ".join([f"JOB {name} {sub}", *self.flags(node, idx)])
                if vars:
                    quoted = (f'{k}="{_escape(v)}"' for k, v in vars.items())
                    yield " ".join([f"VARS {name}", *quoted])
                yield from self.node_commands(node, name)
        elif isinstance(node, SubDAG):
            name = self.names.generate(node.name, 0)
            yield " ".join([f"SUBDAG EXTERNAL {name} {node.dag_file}", *self.flags(node, 0)])
            yield from self.node_commands(node, name)
        else:
            raise TypeError(f"unrecognized node type ({type(node)}) for node {node}")

    @staticmethod
    def flags(node: BaseNode, idx: int) -> list[str]:
        out = ["DIR", str(node.dir)] if node.dir is not None else []
        if node.noop.get(idx, False):
            out.append("NOOP")
        if node.done.get(idx, False):
            out.append("DONE")
        return out

    def node_commands(self, node: BaseNode, name: str) -> Iterator[str]:
        if node.retries is not None:
            yield f"RETRY {name} {node.retries}" + (
                f" UNLESS-EXIT {node.retry_unless_exit}" if node.retry_unless_exit is not None else "")
        for which, script in (("PRE", node.pre), ("POST", node.post)):
            if script is not None:
                defer = ["DEFER", script.retry_status, script.retry_delay] if script.retry else []
                yield " ".join(str(p) for p in ["SCRIPT", *defer, which, name, script.executable, *script.arguments])
        if node.pre_skip_exit_code is not None:
            yield f"PRE_SKIP {name} {node.pre_skip_exit_code}"
        if node.priority != 0:
            yield f"PRIORITY {name} {node.priority}"
        if node.category is not None:
            yield f"CATEGORY {name} {node.category}"
        if node.abort is not None:
            yield f"ABORT-DAG-ON {name} {node.abort.node_exit_value}" + (
                f" RETURN {node.abort.dag_return_value}" if node.abort.dag_return_value is not None else "")

    def indexes(self, node: BaseNode) -> dict[int, str]:
        if isinstance(node, SubDAG):
            return {0: self.names.generate(node.name, 0)}
        if isinstance(node, NodeLayer):
            return {i: self.names.generate(node.name, i) for i in range(len(node.vars))}
        raise TypeError(f"cannot name the nodes of {node}")

    def join_name(self, join: JoinNode) -> str:
        return self.names.generate("__JOIN__", join.id)

    def edges(self, parent: BaseNode) -> Iterator[str]:
        pnames = self.indexes(parent)
        for child in parent.children:
            cnames = self.indexes(child)
            edge = self.dag._edges.get(parent, child)
            assert edge is not None
            for p, c in edge.get_edges(parent, child, self.joins):
                left = [self.join_name(p)] if isinstance(p, JoinNode) else [pnames[i] for i in p]
                right = [self.join_name(c)] if isinstance(c, JoinNode) else [cnames[i] for i in c]
                yield f"PARENT {' '.join(left)} CHILD {' '.join(right)}"


def _escape(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


# ------------------------------------------------------------------ rescue
def rescue(dag: DAG, rescue_file: str | Path, formatter: NodeNameFormatter | None = None) -> None:
    """Mark the nodes a DAGMan rescue file lists as DONE on ``dag`` (replacing all DONE marks)."""
    formatter = formatter or SimpleFormatter()
    finished: dict[str, set[int]] = collections.defaultdict(set)
    for line in Path(rescue_file).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if len(words) == 2 and words[0] == "DONE":
            layer, index = formatter.parse(words[1])
            finished[layer].add(index)
    for node in dag._nodes.values():
        node.done = dict.fromkeys(sorted(finished.get(node.name, ())), True)


def find_rescue_file(dag_dir: str | Path, dag_file_name: str = DEFAULT_DAG_FILE_NAME) -> Path:
    """The newest ``<dag>.rescueNNN`` in ``dag_dir`` (the one DAGMan itself would use)."""
    found = sorted(Path(dag_dir).glob(f"{dag_file_name}.rescue[0-9][0-9][0-9]"))
    if not found:
        raise NoRescueFileFound(f"No rescue file for dag {dag_file_name} found in {dag_dir}")
    return found[-1]


__all__ = [
    "CONFIG_FILE_NAME", "DAG", "DEFAULT_DAG_FILE_NAME", "DEFAULT_SEPARATOR", "BaseEdge", "BaseNode",
    "DAGAbortCondition", "DotConfig", "Edges", "FinalNode", "Grouper", "JoinFactory", "JoinNode", "ManyToMany",
    "Node", "NodeLayer", "NodeNameFormatter", "NodeStatusFile", "Nodes", "OneToOne", "Script", "SimpleFormatter",
    "Slicer", "SubDAG", "WalkOrder", "exceptions", "find_rescue_file", "rescue", "write_dag",
]
