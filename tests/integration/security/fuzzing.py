"""Hostile requests for the agents, from the schema: shared by the fuzz test and bench/bench_fuzz.py.

A request is (body bytes, content type, reply_to?, user_id?, routing key). The strategies make:
random bytes under any content type; maps that are not requests; calls of every declared method
with a wrong type for one argument or one missing; unknown methods, objects and arguments;
hostile expressions where a method takes one (doubling attribute chains, backtracking regular
expressions, nesting past the parser's depth); 10 MB strings; bodies nested 100,000 deep; lists of
100,000 elements; and requests without a reply_to. Nothing of it is a valid call, so an agent's
state (the job queue) must be the same afterwards.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import msgpack
import pika
from hypothesis import strategies as st

from gridbus import bus, wire
from gridbus.schema import Arg, Method, builtin

TEN_MB = "x" * (10 * 1024 * 1024)
_DEEP_MSGPACK = b"\x81\xa4args" + b"\x81\xa1a" * 100_000 + b"\xc0"  # {"args": {"a": {"a": ...}}}
_DEEP_JSON = ('{"method": "Query", "args": ' + '{"a": ' * 100_000 + "null" + "}" * 100_001).encode()
_DEEP_LIST = b"\x91" * 100_000 + b"\xc0"

HOSTILE_EXPRESSIONS = [
    "[" + "; ".join(["a0=1"] + [f"a{i}=a{i-1}+a{i-1}" for i in range(1, 40)]) + "].a39 > 0",
    'regexp("(a|aa)+$", "' + "a" * 200 + '!")',
    "(" * 5000 + "1" + ")" * 5000,
    "strcat(" * 150 + '"x"' + ")" * 150,
    "[" + "; ".join(['a0="xxxxxxxx"'] + [f"a{i}=strcat(a{i-1},a{i-1})" for i in range(1, 30)]) + "].a29",
    "size(split(" + '"' + "a," * 20_000 + '"' + "))",
    "{" * 3000 + "}" * 3000,
]

# A value of every wire type but the one an argument wants (schema-aware wrong types).
_WRONG: dict[str, list[Any]] = {
    "string": [7, 1.5, True, [], {"a": 1}],
    "bool": ["true", 1, 0.0, [], {}],
    "int": ["12", 1.5, True, 2**70, -(2**70), [], {}],
    "double": ["1.0", [], {}, True],
    "map": ["ad", 3, [1, 2], True],
    "list": ["a,b", 3, {"a": 1}, True],
    "expr": [3, [], {"a": 1}, True],
}
_KIND = {"sstr": "string", "lstr": "string", "bool": "bool", "int32": "int", "uint32": "int", "int64": "int",
         "uint64": "int", "double": "double", "absTime": "double", "map": "map", "classad": "map",
         "list": "list", "expr": "expr"}


# Methods whose hostile expressions are let through to evaluation (they change nothing).
READ_ONLY = {"Query", "History", "Locate", "Analyze", "GetResourceRequests"}


@dataclass(frozen=True)
class Request:
    body: bytes
    ctype: str
    reply: bool = True  # a reply_to is set
    as_user: bool = True  # user_id set (the broker checks it): the agent sees the connection's user


def methods_of(kind: str) -> list[tuple[str, Method]]:
    """(class, method) of every method an agent of ``kind`` serves, the daemon class included."""
    out = []
    for c in builtin().classes.values():
        if c.agent == kind or c.name == "daemon":
            out += [(c.name, m) for m in c.methods.values()]
    return out


def _encode(obj: Any, ctype: str) -> bytes:
    if ctype == wire.JSON:
        return json.dumps(obj, default=str).encode()
    return msgpack.packb(obj, use_bin_type=True, default=str)


def _wrong_value(arg: Arg) -> st.SearchStrategy[Any]:
    kind = _KIND.get(arg.type)
    if kind is None:  # "any" takes every value: send a huge one instead
        return st.sampled_from([list(range(2_000)), {"k": ["v"] * 1_000}])
    return st.sampled_from(_WRONG[kind])


@st.composite
def schema_call(draw: Any, kind: str) -> Request:
    """A call of a declared method with one argument of the wrong type, one missing, one unknown,
    or a hostile expression where an expression goes (which the method must refuse or bound)."""
    methods = methods_of(kind)
    cls, m = draw(st.sampled_from(methods))
    inputs = list(m.inputs)
    args: dict[str, Any] = {}
    for a in inputs:  # plausible values of the right type first
        args[a.name] = {"string": "x", "bool": True, "int": 1, "double": 1.0, "map": {}, "list": [],
                        "expr": "false"}.get(_KIND.get(a.type, ""), 1)
    how = draw(st.sampled_from(["wrong", "missing", "unknown", "expr", "huge"]))
    if how == "expr" and any(a.type == "expr" for a in inputs):
        a = next(a for a in inputs if a.type == "expr")
        args[a.name] = draw(st.sampled_from(HOSTILE_EXPRESSIONS))
    elif how == "wrong" and inputs:
        a = draw(st.sampled_from(inputs))
        args[a.name] = draw(_wrong_value(a))
    elif how == "missing" and any(not a.optional for a in inputs):
        a = draw(st.sampled_from([a for a in inputs if not a.optional]))
        del args[a.name]
    elif how == "huge":
        # (the 100,000-element lists are among the monsters, sent a few times)
        args[draw(st.sampled_from(["Constraint", "Name", "Ids", "x" * 300]))] = list(range(5_000))
    else:
        args["NoSuchArgument" + draw(st.text(max_size=20))] = 1
    if how in ("expr", "huge") and m.name not in READ_ONLY:
        args["NoSuchArgument"] = 1  # hostile values reach the handler only where they change nothing
    ctype = draw(st.sampled_from(wire.CONTENT_TYPES))
    body = {"method": m.name, "args": args}
    if cls == "job":
        body["object"] = draw(st.sampled_from(["1.0", "999999.0", "x.y", "-1.-1"]))
    return Request(_encode(body, ctype), ctype, reply=draw(st.sampled_from([True, True, True, False])),
                   as_user=draw(st.booleans()))


@st.composite
def garbage(draw: Any) -> Request:
    """Bytes that are no request: random, wrong content types, maps that are not calls."""
    what = draw(st.sampled_from(["bytes", "ctype", "notcall", "unknown", "noreply"]))
    if what == "bytes":
        return Request(draw(st.binary(max_size=300)), draw(st.sampled_from([*wire.CONTENT_TYPES, ""])))
    if what == "ctype":
        return Request(_encode({"method": "Query", "args": {}}, wire.MSGPACK),
                       draw(st.sampled_from(["text/plain", "application/xml", "image/png", "\x00" * 10])))
    if what == "notcall":
        v = draw(st.one_of(st.integers(), st.text(max_size=50), st.lists(st.integers(), max_size=20),
                           st.dictionaries(st.text(max_size=10), st.integers(), max_size=5)))
        ctype = draw(st.sampled_from(wire.CONTENT_TYPES))
        return Request(_encode(v, ctype), ctype)
    if what == "unknown":
        body = {"method": draw(st.text(max_size=40)), "object": draw(st.text(max_size=40)),
                "args": draw(st.dictionaries(st.text(max_size=10), st.integers(), max_size=3))}
        return Request(_encode(body, wire.MSGPACK), wire.MSGPACK)
    return Request(_encode({"method": "Query", "args": {"Constraint": 5}}, wire.MSGPACK), wire.MSGPACK, reply=False)


def request_strategy(kind: str) -> st.SearchStrategy[Request]:
    return st.one_of(garbage(), schema_call(kind))


def corpus(kind: str, n: int, seed: int = 14) -> list[Request]:
    """``n`` requests for an agent of ``kind`` drawn by hypothesis (derandomized by ``seed``)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    out: list[Request] = []

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(request_strategy(kind))
    def draw(req: Request) -> None:
        out.append(req)

    draw()
    return out


def monsters() -> list[Request]:
    """The few big ones, sent a few times each rather than drawn: 10 MB strings, 100,000-deep
    nesting, 100,000-element lists."""
    return [
        Request(_encode({"method": "Query", "args": {"Constraint": TEN_MB}}, wire.MSGPACK), wire.MSGPACK),
        Request(_encode({"method": TEN_MB, "args": {}}, wire.MSGPACK), wire.MSGPACK),
        Request(_encode({"method": "RemoteParam", "args": {"Names": [TEN_MB[:1_000_000]]}}, wire.MSGPACK), wire.MSGPACK),
        Request(_DEEP_MSGPACK, wire.MSGPACK),
        Request(_DEEP_JSON, wire.JSON),
        Request(_DEEP_LIST, wire.MSGPACK),
        Request(_encode({"method": "RemoteParam", "args": {"Names": ["UPDATE_INTERVAL"] * 60_000}}, wire.MSGPACK),
                wire.MSGPACK),
        Request(_encode({"method": "Query", "args": {"Projection": list(range(100_000))}}, wire.MSGPACK), wire.MSGPACK),
    ]


class Sender:
    """Publishes requests to one agent without waiting for answers (the answers go to a queue
    of ours that keeps only the last few, so the broker holds nothing for long)."""

    def __init__(self, url: str):
        self.conn = pika.BlockingConnection(pika.URLParameters(url))
        self.ch = self.conn.channel()
        self.user = pika.URLParameters(url).credentials.username
        self.reply_q = self.ch.queue_declare("", exclusive=True, arguments={
            "x-max-length": 100, "x-overflow": "drop-head"}).method.queue
        self.sent = 0

    def send(self, address: str, req: Request) -> None:
        props = pika.BasicProperties(
            content_type=req.ctype or None, reply_to=self.reply_q if req.reply else None,
            correlation_id=str(self.sent), user_id=self.user if req.as_user else None,
            type=bus.T_METHOD_REQUEST if hasattr(bus, "T_METHOD_REQUEST") else None)
        self.ch.basic_publish(bus.RPC, address, req.body, props)
        self.sent += 1
        if self.sent % 2000 == 0:
            self.conn.process_data_events(0)  # heartbeats, and let the broker's flow control act

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:
            pass


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_answering(call: Any, timeout: float) -> float:
    """Seconds until ``call()`` succeeds (the agent worked through its backlog), or raise."""
    start = time.monotonic()
    last: Exception | None = None
    while time.monotonic() - start < timeout:
        try:
            call()
            return time.monotonic() - start
        except Exception as exc:
            last = exc
            time.sleep(0.5)
    raise AssertionError(f"no answer after {timeout:.0f} s: {last}")
