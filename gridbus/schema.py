"""The management schema: classes, properties, statistics and methods, read from `schemas/`, and
the rest of the wire: exchanges, message envelopes, job and daemon events, published ads.

`schemas/*.toml` is the single source of truth: agents validate every call's arguments against it,
consoles learn method signatures from it, and both references are generated from it (`make docs`):
`docs/schema.md` (gridbus/schemadoc.py) and the AsyncAPI document `docs/asyncapi.yaml`
(gridbus/asyncapi.py).

A value whose structure is more than its type says names it: ``items`` (the type or shape of a
list's elements), ``values`` (of a map's values) or ``shape`` (a map with named fields, declared
under ``[shapes.<Name>]``), so that no field of the wire is described in prose only.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gridbus.classad.values import Value, is_number
from gridbus.status import invalid

# Argument types and the Python values they accept. `classad` is a map of attribute to ClassAd
# value (literal, expression, undefined, error); `expr` is ClassAd text or an ExprTree.
TYPES: dict[str, str] = {
    "sstr": "short string",
    "lstr": "long string",
    "bool": "boolean",
    "int32": "signed 32-bit integer",
    "uint32": "unsigned 32-bit integer",
    "int64": "signed 64-bit integer",
    "uint64": "unsigned 64-bit integer",
    "double": "floating point number",
    "absTime": "seconds since the epoch",
    "map": "map of string to any value",
    "list": "list of values",
    "classad": "a ClassAd as a map of attribute to typed value",
    "expr": "a ClassAd expression (text or typed expression)",
    "any": "any value",
}

INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}


# Who may call a method (every method declares one as ``access``): the framework checks it before
# the handler runs (gridbus/agent/access.py). The text ends the refusal's sentence.
ACCESS: dict[str, str] = {
    "anyone": "any broker user may",
    "owner": "only the owner of the object (or a queue super user, or an administrator) may",
    "superuser": "only a queue super user (QUEUE_SUPER_USERS) or an administrator may",
    "admin": "only administrators (ALLOW_ADMINISTRATOR) may",
    "daemon": "only daemons of the pool may",
}
UNDECLARED_ACCESS = "admin"  # a method without a rule is closed to all but administrators
EVENT_BODY = "<event>"  # a batch's list of event bodies (EventFamily.batch)

# The largest request a method takes, in bytes, unless it declares ``max_bytes``: the body is
# measured before it is decoded, so a 10 MB argument costs a daemon nothing but its receipt.
DEFAULT_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Arg:
    name: str
    dir: str
    type: str
    desc: str = ""
    optional: bool = False
    default: Any = None
    items: str = ""  # a list's elements: a type or a shape
    values: str = ""  # a map's values: a type or a shape
    shape: str = ""  # a map with named fields: a shape


@dataclass(frozen=True)
class Field:
    """One field of a message, an event, an ad or a shape. ``nullable``: it may be null (an
    absent value); ``enum``: the values it takes."""

    name: str
    type: str
    desc: str = ""
    optional: bool = False
    items: str = ""
    values: str = ""
    shape: str = ""
    nullable: bool = False
    enum: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Exchange:
    name: str
    type: str  # AMQP exchange type: topic, direct, fanout
    desc: str
    durable: bool = True


@dataclass(frozen=True)
class Message:
    """A message kind (AMQP ``type`` property): its exchange, routing key and body's fields."""

    name: str
    desc: str
    exchange: str
    routing_key: str = ""
    fields: tuple[Field, ...] = ()
    headers: tuple[Field, ...] = ()  # AMQP headers of its own (the properties are AMQP's)


@dataclass(frozen=True)
class Event:
    """One event of a family (``job`` or ``daemon``): its fields beside the family's common ones."""

    family: str
    name: str
    desc: str
    fields: tuple[Field, ...] = ()


@dataclass
class EventFamily:
    name: str
    desc: str
    routing_key: str
    fields: tuple[Field, ...] = ()
    daemon: bool = False  # it is a daemon's own ad: it carries the daemon ad fields too  # every event of the family carries them
    events: dict[str, Event] = field(default_factory=dict)
    # The batched form's fields, if the family has one; a list whose items are "<event>" holds
    # the bodies of events of the routing key's one event.
    batch: tuple[Field, ...] = ()


@dataclass(frozen=True)
class AdType:
    """An ad as it is published: its MyType, routing key and the attributes it carries (an ad is
    an open ClassAd: these are the ones gridbus sets; a pool's configuration may add more)."""

    name: str
    desc: str
    routing_key: str
    fields: tuple[Field, ...] = ()
    daemon: bool = False  # it is a daemon's own ad: it carries the daemon ad fields too

@dataclass(frozen=True)
class Method:
    name: str
    desc: str
    args: tuple[Arg, ...]
    access: str = ""  # a key of ACCESS; empty: not declared (the schema test fails on it)
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def rule(self) -> str:
        """The access rule in force: the declared one, else administrators only."""
        return self.access or UNDECLARED_ACCESS

    @property
    def admin(self) -> bool:
        return self.rule == "admin"

    @property
    def inputs(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if "I" in a.dir)

    @property
    def outputs(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if "O" in a.dir)


@dataclass(frozen=True)
class Property:
    name: str
    type: str
    desc: str = ""
    index: bool = False
    items: str = ""
    values: str = ""
    shape: str = ""


@dataclass
class ClassSchema:
    name: str
    agent: str
    desc: str
    properties: dict[str, Property] = field(default_factory=dict)
    statistics: dict[str, Property] = field(default_factory=dict)
    methods: dict[str, Method] = field(default_factory=dict)


@dataclass
class Schema:
    package: str
    version: int
    classes: dict[str, ClassSchema] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    exchanges: dict[str, Exchange] = field(default_factory=dict)
    shapes: dict[str, tuple[Field, ...]] = field(default_factory=dict)
    shape_descs: dict[str, str] = field(default_factory=dict)
    events: dict[str, EventFamily] = field(default_factory=dict)
    ad_fields: tuple[Field, ...] = ()  # every published ad carries them
    daemon_ad_fields: tuple[Field, ...] = ()  # every daemon's own ad carries them too
    ads: dict[str, AdType] = field(default_factory=dict)

    def cls(self, name: str) -> ClassSchema:
        return self.classes[name.lower()]

    def merge(self, other: Schema) -> Schema:
        merged = Schema(self.package, max(self.version, other.version))
        for part in ("classes", "messages", "exchanges", "shapes", "shape_descs", "events", "ads"):
            getattr(merged, part).update(getattr(self, part))
            getattr(merged, part).update(getattr(other, part))
        merged.ad_fields = other.ad_fields or self.ad_fields
        merged.daemon_ad_fields = other.daemon_ad_fields or self.daemon_ad_fields
        return merged

    def unresolved(self) -> list[str]:
        """References to shapes that no schema file declares, each with its place."""
        missing = []

        def check(where: str, item: Arg | Field | Property) -> None:
            for ref in (item.items, item.values, item.shape):
                if ref and ref not in TYPES and ref not in self.shapes and ref != EVENT_BODY:
                    missing.append(f"{where}: {ref}")

        for c in self.classes.values():
            for m in c.methods.values():
                for a in m.args:
                    check(f"{c.name}.{m.name}({a.name})", a)
            for p in (*c.properties.values(), *c.statistics.values()):
                check(f"{c.name}.{p.name}", p)
        for where, fields in self.all_fields():
            for f in fields:
                check(f"{where}.{f.name}", f)
        return missing

    def all_fields(self) -> list[tuple[str, tuple[Field, ...]]]:
        """Every field list with its place: messages, shapes, event families and events, ads."""
        out = [(f"messages.{m.name}", m.fields) for m in self.messages.values()]
        out += [(f"messages.{m.name}.headers", m.headers) for m in self.messages.values()]
        out += [(f"shapes.{n}", f) for n, f in self.shapes.items()]
        for fam in self.events.values():
            out.append((f"events.{fam.name}", fam.fields))
            out += [(f"events.{fam.name}.{e.name}", e.fields) for e in fam.events.values()]
            out.append((f"events.{fam.name}.batch", fam.batch))
        out += [("ads", self.ad_fields), ("ads.daemon", self.daemon_ad_fields)]
        out += [(f"ads.{a.name}", a.fields) for a in self.ads.values()]
        return out

    @classmethod
    def from_toml(cls, text: str, source: str = "<schema>") -> Schema:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{source}: {exc}") from exc
        schema = cls(raw.get("package", "gridbus"), int(raw.get("version", 1)))
        for cname, craw in raw.get("classes", {}).items():
            c = ClassSchema(cname.lower(), craw.get("agent", ""), craw.get("desc", ""))
            for section, target in (("properties", c.properties), ("statistics", c.statistics)):
                for pname, praw in craw.get(section, {}).items():
                    _check_type(praw["type"], f"{source}: {cname}.{pname}")
                    target[pname] = Property(pname, praw["type"], praw.get("desc", ""), praw.get("index", False),
                                             praw.get("items", ""), praw.get("values", ""), praw.get("shape", ""))
            for mname, mraw in craw.get("methods", {}).items():
                args = []
                for araw in mraw.get("args", []):
                    _check_type(araw["type"], f"{source}: {cname}.{mname}({araw['name']})")
                    args.append(
                        Arg(
                            araw["name"],
                            araw.get("dir", "I"),
                            araw["type"],
                            araw.get("desc", ""),
                            araw.get("optional", "default" in araw),
                            araw.get("default"),
                            araw.get("items", ""),
                            araw.get("values", ""),
                            araw.get("shape", ""),
                        )
                    )
                access = mraw.get("access", "admin" if mraw.get("admin") else "")
                if access and access not in ACCESS:
                    raise ValueError(
                        f"{source}: {cname}.{mname}: unknown access {access!r}; known: {', '.join(ACCESS)}"
                    )
                max_bytes = int(mraw.get("max_bytes", DEFAULT_MAX_BYTES))
                c.methods[mname] = Method(mname, mraw.get("desc", ""), tuple(args), access, max_bytes)
            schema.classes[c.name] = c
        for xname, xraw in raw.get("exchanges", {}).items():
            schema.exchanges[xname] = Exchange(xname, xraw["type"], xraw.get("desc", ""), xraw.get("durable", True))
        for mname, mraw in raw.get("messages", {}).items():
            schema.messages[mname] = Message(mname, mraw.get("desc", ""), mraw.get("exchange", ""),
                                             mraw.get("routing_key", ""),
                                             _fields(mraw.get("fields", {}), f"{source}: messages.{mname}"),
                                             _fields(mraw.get("headers", {}), f"{source}: messages.{mname}.headers"))
        for sname, sraw in raw.get("shapes", {}).items():
            sraw = dict(sraw)
            schema.shape_descs[sname] = sraw.pop("desc", "")
            schema.shapes[sname] = _fields(sraw, f"{source}: shapes.{sname}")
        for fname, fraw in raw.get("events", {}).items():
            where = f"{source}: events.{fname}"
            fam = EventFamily(fname, fraw.get("desc", ""), fraw.get("routing_key", ""),
                              _fields(fraw.get("fields", {}), where), batch=_fields(fraw.get("batch", {}), where))
            for ename, eraw in fraw.get("events", {}).items():
                fam.events[ename] = Event(fname, ename, eraw.get("desc", ""),
                                          _fields(eraw.get("fields", {}), f"{where}.{ename}"))
            schema.events[fname] = fam
        ads = raw.get("ads", {})
        schema.ad_fields = _fields(ads.get("fields", {}), f"{source}: ads")
        schema.daemon_ad_fields = _fields(ads.get("daemon_fields", {}), f"{source}: ads.daemon_fields")
        for aname, araw in ads.get("types", {}).items():
            schema.ads[aname] = AdType(aname, araw.get("desc", ""), araw.get("routing_key", ""),
                                       _fields(araw.get("fields", {}), f"{source}: ads.{aname}"),
                                       araw.get("daemon", False))
        return schema

    @classmethod
    def from_file(cls, path: str | Path) -> Schema:
        path = Path(path)
        return cls.from_toml(path.read_text(), str(path))


def _fields(raw: dict[str, Any], where: str) -> tuple[Field, ...]:
    out = []
    for name, spec in raw.items():
        if not isinstance(spec, dict) or "type" not in spec:
            raise ValueError(f"{where}.{name}: a field is a table with a type")
        _check_type(spec["type"], f"{where}.{name}")
        unknown = set(spec) - {"type", "desc", "optional", "items", "values", "shape", "nullable", "enum"}
        if unknown:
            raise ValueError(f"{where}.{name}: unknown keys {', '.join(sorted(unknown))}")
        out.append(Field(name, spec["type"], spec.get("desc", ""), spec.get("optional", False), spec.get("items", ""),
                         spec.get("values", ""), spec.get("shape", ""), spec.get("nullable", False),
                         tuple(spec.get("enum", ()))))
    return tuple(out)


def _check_type(type_name: str, where: str) -> None:
    if type_name not in TYPES:
        raise ValueError(f"{where}: unknown type {type_name!r}; known: {', '.join(TYPES)}")


_BUILTIN: Schema | None = None


def builtin() -> Schema:
    """gridbus's own schema, from the installed `gridbus.schemas` package (cached)."""
    global _BUILTIN
    if _BUILTIN is None:
        schema = Schema("gridbus", 1)
        files = sorted((f for f in resources.files("gridbus.schemas").iterdir() if f.name.endswith(".toml")),
                       key=lambda f: f.name)
        for f in files:
            schema = schema.merge(Schema.from_toml(f.read_text(), f.name))
        _BUILTIN = schema
    return _BUILTIN


def validate_args(method: Method, args: Any) -> dict[str, Any]:
    """Check a call's arguments against the method's schema; return them with defaults filled in.

    Raises MethodError(INVALID_PARAMETER) with a sentence naming the argument at fault.
    """
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise invalid(f"{method.name}: arguments must be a map of name to value, not {type(args).__name__}")
    inputs = {a.name: a for a in method.inputs}
    for name in args:
        if name not in inputs:
            known = ", ".join(inputs) or "none"
            raise invalid(f"{method.name}: unknown argument {name!r} (arguments: {known})")
    out: dict[str, Any] = {}
    for name, arg in inputs.items():
        if name not in args or args[name] is None:
            if not arg.optional:
                raise invalid(f"{method.name}: missing argument {name!r} ({arg.type})")
            out[name] = arg.default
            continue
        out[name] = check_value(method.name, arg, args[name])
    return out


def check_value(method: str, arg: Arg, value: Any) -> Any:
    t = arg.type
    bad = None
    if t in ("sstr", "lstr"):
        if not isinstance(value, str):
            bad = "a string"
    elif t == "bool":
        if not isinstance(value, bool):
            bad = "true or false"
    elif t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        if isinstance(value, (bool, Value)) or not isinstance(value, int) or not lo <= value <= hi:
            bad = f"an integer in [{lo}, {hi}]"
    elif t in ("double", "absTime"):
        if not is_number(value):
            bad = "a number"
        else:
            value = float(value) if t == "double" else value
    elif t in ("map", "classad"):
        if not isinstance(value, dict) and type(value).__name__ != "ClassAd":
            bad = "a map"
    elif t == "list":
        if not isinstance(value, list):
            bad = "a list"
    elif t == "expr":
        if not isinstance(value, str) and type(value).__name__ != "ExprTree":
            bad = "a ClassAd expression"
    if bad:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else f"{shown[:57]}... ({len(shown):,} characters)"
        raise invalid(f"{method}: argument {arg.name!r} must be {bad}, got {shown}")
    return value
