"""The management schema: classes, properties, statistics and methods, read from `schemas/`.

`schemas/*.toml` is the single source of truth: agents validate every call's arguments against it,
consoles learn method signatures from it, and `docs/schema.md` is generated from it
(`python -m gridbus.schema > docs/schema.md`).
"""

from __future__ import annotations

import sys
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

_INT_RANGES = {
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
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)

    def cls(self, name: str) -> ClassSchema:
        return self.classes[name.lower()]

    def merge(self, other: Schema) -> Schema:
        merged = Schema(self.package, max(self.version, other.version), dict(self.classes), dict(self.messages))
        merged.classes.update(other.classes)
        merged.messages.update(other.messages)
        return merged

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
                    target[pname] = Property(pname, praw["type"], praw.get("desc", ""), praw.get("index", False))
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
        schema.messages = raw.get("messages", {})
        return schema

    @classmethod
    def from_file(cls, path: str | Path) -> Schema:
        path = Path(path)
        return cls.from_toml(path.read_text(), str(path))


def _check_type(type_name: str, where: str) -> None:
    if type_name not in TYPES:
        raise ValueError(f"{where}: unknown type {type_name!r}; known: {', '.join(TYPES)}")


_BUILTIN: Schema | None = None


def builtin() -> Schema:
    """gridbus's own schema, from the installed `gridbus.schemas` package (cached)."""
    global _BUILTIN
    if _BUILTIN is None:
        schema = Schema("gridbus", 1)
        files = sorted(f for f in resources.files("gridbus.schemas").iterdir() if f.name.endswith(".toml"))
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
    elif t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
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


def render_markdown(schema: Schema) -> str:
    """The reference page docs/schema.md, generated from the schema."""
    lines = [
        f"# gridbus management schema (package `{schema.package}`, version {schema.version})",
        "",
        "Generated from `schemas/*.toml` by `python -m gridbus.schema > docs/schema.md`; do not edit.",
        "",
        "Argument types: " + "; ".join(f"`{k}` {v}" for k, v in TYPES.items()) + ".",
        "",
    ]
    for c in sorted(schema.classes.values(), key=lambda c: c.name):
        lines += [f"## Class `{c.name}` (agent: {c.agent or 'any'})", "", c.desc, ""]
        for title, props in (("Properties", c.properties), ("Statistics", c.statistics)):
            if props:
                lines += [f"### {title}", "", "| name | type | description |", "|---|---|---|"]
                for p in props.values():
                    key = " (index)" if p.index else ""
                    lines.append(f"| `{p.name}`{key} | {p.type} | {p.desc} |")
                lines.append("")
        if c.methods:
            lines += ["### Methods", ""]
            for m in c.methods.values():
                sig = ", ".join(f"{a.name} {a.dir} {a.type}{'?' if a.optional else ''}" for a in m.args)
                who = ACCESS[m.rule].removesuffix(" may")
                size = f" Requests up to {m.max_bytes:,} bytes." if m.max_bytes != DEFAULT_MAX_BYTES else ""
                lines += [f"#### `{m.name}({sig})`", "", m.desc, "", f"Who may call it: {who}.{size}", ""]
                if m.args:
                    lines += ["| argument | dir | type | description |", "|---|---|---|---|"]
                    for a in m.args:
                        opt = f" Optional, default `{a.default!r}`." if a.optional else ""
                        lines.append(f"| `{a.name}` | {a.dir} | {a.type} | {a.desc}{opt} |")
                    lines.append("")
    if schema.messages:
        lines += ["## Messages", ""]
        for name, spec in schema.messages.items():
            lines += [f"### `{name}`", "", spec.get("desc", ""), ""]
            for k in ("exchange", "routing_key", "type", "body"):
                if k in spec:
                    lines.append(f"- {k}: `{spec[k]}`")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_markdown(builtin()))
