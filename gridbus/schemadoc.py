"""docs/schema.md, the schema's reference in prose tables, generated from `schemas/*.toml`:

    python -m gridbus.schemadoc > docs/schema.md      (`make docs`)
"""

from __future__ import annotations

import sys

from gridbus.schema import ACCESS, DEFAULT_MAX_BYTES, TYPES, Arg, Field, Property, Schema, builtin


def type_text(item: Arg | Field | Property) -> str:
    """The type as the references print it: `list of Totals`, `map of int64`, `Totals`."""
    if item.shape:
        return item.shape
    if item.items:
        return f"{item.type} of {item.items}"
    if item.values:
        return f"{item.type} of {item.values}"
    return item.type


def _field_rows(fields: tuple[Field, ...]) -> list[str]:
    rows = ["| field | type | description |", "|---|---|---|"]
    for f in fields:
        notes = [f"{f.desc}." if f.desc and not f.desc.endswith(".") else f.desc]
        if f.optional:
            notes.append("Optional.")
        if f.nullable:
            notes.append("May be null.")
        if f.enum:
            notes.append("One of " + ", ".join(f"`{v}`" for v in f.enum) + ".")
        rows.append(f"| `{f.name}` | {type_text(f)} | {' '.join(n for n in notes if n)} |")
    return [*rows, ""]


def render_markdown(schema: Schema) -> str:
    """The reference page docs/schema.md, generated from the schema."""
    lines = [
        f"# gridbus management schema (package `{schema.package}`, version {schema.version})",
        "",
        "Generated from `schemas/*.toml` by `python -m gridbus.schemadoc > docs/schema.md`; do not edit. "
        "The same contract as an AsyncAPI 3.0 document with JSON Schema payloads: `docs/asyncapi.yaml`.",
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
                    lines.append(f"| `{p.name}`{key} | {type_text(p)} | {p.desc} |")
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
                        lines.append(f"| `{a.name}` | {a.dir} | {type_text(a)} | {a.desc}{opt} |")
                    lines.append("")
    if schema.shapes:
        lines += ["## Shapes", "", "Maps with named fields that arguments, events and ads refer to by name.", ""]
        for name, fields in schema.shapes.items():
            lines += [f"### `{name}`", "", schema.shape_descs.get(name, ""), "", *_field_rows(fields)]
    if schema.exchanges:
        lines += ["## Exchanges", "", "| exchange | type | what flows |", "|---|---|---|"]
        lines += [f"| `{x.name}` | {x.type} | {x.desc} |" for x in schema.exchanges.values()]
        lines.append("")
    if schema.messages:
        lines += ["## Messages", "", "Each message's AMQP `type` property is its name here.", ""]
        for msg in schema.messages.values():
            lines += [f"### `{msg.name}`", "", msg.desc, "", f"- exchange: `{msg.exchange}`"]
            if msg.routing_key:
                lines.append(f"- routing key: `{msg.routing_key}`")
            lines += ["", *_field_rows(msg.fields)]
            if msg.headers:
                lines += ["Headers:", "", *_field_rows(msg.headers)]
    for fam in schema.events.values():
        lines += [f"## Events `{fam.name}`", "", fam.desc, "", f"Routing key: `{fam.routing_key}`. "
                  "Every one carries these fields beside the envelope's (`event` message):", "",
                  *_field_rows(fam.fields)]
        if fam.batch:
            lines += ["The batched form carries these instead of one event's fields:", "", *_field_rows(fam.batch)]
        for e in fam.events.values():
            lines += [f"### `{fam.name}.{e.name}`", "", e.desc, ""]
            lines += _field_rows(e.fields) if e.fields else []
    if schema.ads:
        lines += ["## Ads", "", "Every published ad carries these attributes (an ad is an open ClassAd: "
                  "a pool's configuration may add more):", "", *_field_rows(schema.ad_fields),
                  "A daemon's own ad carries these too:", "", *_field_rows(schema.daemon_ad_fields)]
        for ad in schema.ads.values():
            own = " A daemon's own ad." if ad.daemon else ""
            lines += [f"### `{ad.name}`", "", ad.desc + own, "", f"Routing key: `{ad.routing_key}`.", "",
                      *_field_rows(ad.fields)]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_markdown(builtin()))
