"""The bus's contract as an AsyncAPI 3.0 document with JSON Schema payloads, made from `schemas/`.

    python -m gridbus.asyncapi > docs/asyncapi.yaml      (`make docs`)

Every exchange and routing key is a channel, every method a `send` operation with its request and
its reply, every event and every ad a message a service may `receive`. Payloads are JSON Schema
(draft 07, AsyncAPI's default schema format) of the JSON form of a body (application/json, which
every agent accepts and answers in kind); the msgpack form is the same with an expression,
undefined and error as ext types 1, 2 and 3 instead of ``{"$expr": ...}``, ``{"$undefined": true}``
and ``{"$error": true}`` (gridbus/wire.py).

A documentation tool: it needs PyYAML (the test extras), which the daemons never import.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

from gridbus import bus
from gridbus.schema import (
    ACCESS,
    EVENT_BODY,
    INT_RANGES,
    AdType,
    Arg,
    EventFamily,
    Field,
    Method,
    Property,
    Schema,
    builtin,
)

AMQP_BINDING = "0.3.0"
SCHEMAS = "#/components/schemas/"

# The JSON Schema of each argument type (docs/schema.md lists what each takes).
TYPE_SCHEMAS: dict[str, dict[str, Any]] = {
    "sstr": {"type": "string"},
    "lstr": {"type": "string"},
    "bool": {"type": "boolean"},
    **{t: {"type": "integer", "minimum": lo, "maximum": hi} for t, (lo, hi) in INT_RANGES.items()},
    "double": {"type": "number"},
    "absTime": {"type": "number", "description": "seconds since the epoch"},
    "map": {"type": "object"},
    "list": {"type": "array"},
    "classad": {"$ref": SCHEMAS + "ClassAd"},
    "expr": {"anyOf": [{"type": "string", "description": "ClassAd text"}, {"$ref": SCHEMAS + "Expression"}]},
    "any": {},
}

# The typed values of gridbus/wire.py, and a ClassAd made of them.
VALUE_SCHEMAS: dict[str, dict[str, Any]] = {
    "Expression": {
        "description": "A ClassAd expression: its text (msgpack: ext type 1 holding the UTF-8 text).",
        "type": "object", "required": ["$expr"], "additionalProperties": False,
        "properties": {"$expr": {"type": "string"}},
    },
    "Undefined": {
        "description": "ClassAd's undefined (msgpack: ext type 2, empty).",
        "type": "object", "required": ["$undefined"], "additionalProperties": False,
        "properties": {"$undefined": {"const": True}},
    },
    "Error": {
        "description": "ClassAd's error (msgpack: ext type 3, empty).",
        "type": "object", "required": ["$error"], "additionalProperties": False,
        "properties": {"$error": {"const": True}},
    },
    "ClassAdValue": {
        "description": "A ClassAd value: a literal, a list or nested ad of values, or a typed expression, undefined or error.",
        "anyOf": [
            {"type": ["string", "number", "boolean", "null"]},
            {"$ref": SCHEMAS + "Expression"}, {"$ref": SCHEMAS + "Undefined"}, {"$ref": SCHEMAS + "Error"},
            {"type": "array", "items": {"$ref": SCHEMAS + "ClassAdValue"}},
            {"$ref": SCHEMAS + "ClassAd"},
        ],
    },
    "ClassAd": {
        "description": "A ClassAd: attribute name (case-insensitive) -> value.",
        "type": "object", "additionalProperties": {"$ref": SCHEMAS + "ClassAdValue"},
    },
}


def _ref_or_type(name: str) -> dict[str, Any]:
    """The schema of a type name or of a shape."""
    if name in TYPE_SCHEMAS:
        return dict(TYPE_SCHEMAS[name])
    return {"$ref": SCHEMAS + name}


def value_schema(item: Arg | Field | Property, event_body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON Schema of one argument, field or property."""
    out: dict[str, Any]
    if item.shape:
        out = {"$ref": SCHEMAS + item.shape}
    else:
        out = dict(TYPE_SCHEMAS[item.type])
        if item.items:
            out["items"] = event_body if item.items == EVENT_BODY and event_body else _ref_or_type(item.items)
        if item.values:
            out["additionalProperties"] = _ref_or_type(item.values)
    enum = getattr(item, "enum", ())
    if enum:
        out["enum"] = list(enum)
    if getattr(item, "nullable", False):
        out = {"anyOf": [out, {"type": "null"}]}
    if item.desc:
        out = {**out, "description": item.desc} if "$ref" not in out else {"allOf": [out], "description": item.desc}
    return out


def object_schema(fields: tuple[Field, ...] | list[Field] | tuple[Arg, ...], *, closed: bool = False, required: bool = True,
                  event_body: dict[str, Any] | None = None, **const: str) -> dict[str, Any]:
    """An object of ``fields`` (the non-optional ones required); ``const`` pins fields' values."""
    props = {f.name: value_schema(f, event_body) for f in fields}
    for name, value in const.items():
        props[name] = {**props.get(name, {}), "const": value}
    out: dict[str, Any] = {"type": "object", "properties": props}
    needed = [f.name for f in fields if required and not f.optional]
    if needed:
        out["required"] = needed
    if closed:
        out["additionalProperties"] = False
    return out


def _field(schema: Schema, message: str, name: str) -> Field:
    return next(f for f in schema.messages[message].fields if f.name == name)


def method_request_payload(schema: Schema, method: Method) -> dict[str, Any]:
    env = schema.messages["method_request"].fields
    args = object_schema(method.inputs, closed=True, required=True)
    payload = object_schema([f for f in env if f.name != "args"], method=method.name)
    payload["properties"]["args"] = {**args, "description": _field(schema, "method_request", "args").desc}
    if any(not a.optional for a in method.inputs):
        payload["required"] = [*payload.get("required", []), "args"]
    return payload


def method_reply_payload(schema: Schema, method: Method) -> dict[str, Any]:
    env = schema.messages["method_response"].fields
    payload = object_schema([f for f in env if f.name != "out"])
    out = object_schema(method.outputs, closed=False, required=False)
    payload["properties"]["out"] = {**out, "description": _field(schema, "method_response", "out").desc}
    return payload


def event_payload(schema: Schema, fam: EventFamily, event: str) -> dict[str, Any]:
    """A job or daemon event's message: the one-event form, or (for a family that batches) the
    batched form."""
    env = schema.messages["event"].fields
    own = fam.events[event].fields
    lone = object_schema([*env, *fam.fields, *own], event=event)
    if not fam.batch:
        return lone
    body = object_schema([*fam.fields, *own])
    batched = object_schema([*env, *fam.batch], event=event, event_body=body)
    return {"anyOf": [{**lone, "title": "one event"}, {**batched, "title": "a batch of events"}]}


def ad_schema(schema: Schema, ad: AdType) -> dict[str, Any]:
    fields = [*schema.ad_fields, *(schema.daemon_ad_fields if ad.daemon else ()), *ad.fields]
    mytype = "Machine" if ad.name == "MachinePrivate" else ad.name
    out = object_schema(fields, MyType=mytype)
    out["additionalProperties"] = {"$ref": SCHEMAS + "ClassAdValue"}
    out["description"] = ad.desc
    return out


def _message(name: str, title: str, summary: str, payload: dict[str, Any], mtype: str, *,
             correlated: bool = False, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"name": name, "title": title, "summary": summary, "payload": payload,
                           "bindings": {"amqp": {"messageType": mtype, "bindingVersion": AMQP_BINDING}}}
    if correlated:
        msg["correlationId"] = {"location": "$message.header#/correlation_id",
                                "description": "echoed from the request to its answer"}
    if headers is not None:
        msg["headers"] = headers
    return msg


def _channel(address: str | None, exchange: str, xtype: str, desc: str, messages: list[str],
             parameters: dict[str, str] | None = None) -> dict[str, Any]:
    ch: dict[str, Any] = {
        "address": address, "description": desc,
        "messages": {m: {"$ref": f"#/components/messages/{m}"} for m in messages},
        "bindings": {"amqp": {"is": "routingKey", "bindingVersion": AMQP_BINDING,
                              "exchange": {"name": exchange, "type": xtype, "durable": True, "autoDelete": False,
                                           "vhost": "/"}}},
    }
    if parameters:
        ch["parameters"] = {k: {"description": v} for k, v in parameters.items()}
    return ch


def _operation(action: str, channel: str, messages: list[str], summary: str, *, desc: str = "",
               reply: list[str] | None = None, persistent: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"action": action, "channel": {"$ref": f"#/channels/{channel}"}, "summary": summary,
                          "messages": [{"$ref": f"#/channels/{channel}/messages/{m}"} for m in messages]}
    if desc:
        op["description"] = desc
    if reply is not None:
        op["reply"] = {"address": {"location": "$message.header#/reply_to",
                                   "description": "direct reply-to (amq.rabbitmq.reply-to)"},
                       "channel": {"$ref": "#/channels/replies"},
                       "messages": [{"$ref": f"#/channels/replies/messages/{m}"} for m in reply]}
    if persistent:
        op["bindings"] = {"amqp": {"deliveryMode": 2, "bindingVersion": AMQP_BINDING}}
    return op


def document(schema: Schema) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of ``schema``."""
    xt = dict(schema.exchanges)
    xtype = {name: t for name, t in bus.EXCHANGES}
    components: dict[str, Any] = {"schemas": dict(VALUE_SCHEMAS), "messages": {}}
    for name, fields in schema.shapes.items():
        components["schemas"][name] = {**object_schema(fields), "description": schema.shape_descs.get(name, "")}
    messages = components["messages"]
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}

    requests, replies = [], []
    request_headers = object_schema(schema.messages["method_request"].headers)
    for c in sorted(schema.classes.values(), key=lambda c: c.name):
        props = [Field(p.name, p.type, p.desc, True, p.items, p.values, p.shape)
                 for p in (*c.properties.values(), *c.statistics.values())]
        components["schemas"][f"{c.name}.object"] = {**object_schema(props),
                                                    "description": f"getObjects' properties and statistics of a {c.name}: {c.desc}"}
        for m in c.methods.values():
            who = ACCESS[m.rule].removesuffix(" may")
            req, rep = f"{c.name}.{m.name}.request", f"{c.name}.{m.name}.reply"
            messages[req] = _message(req, f"{c.name}.{m.name}", m.desc, method_request_payload(schema, m),
                                     bus.T_METHOD_REQUEST, correlated=True, headers=request_headers)
            messages[rep] = _message(rep, f"{c.name}.{m.name} answer", f"The answer to {m.name}.",
                                     method_reply_payload(schema, m), bus.T_METHOD_RESPONSE, correlated=True)
            requests.append(req)
            replies.append(rep)
            where = "on every agent's own object" if c.name == "daemon" else f"on a {c.name} object"
            operations[f"{c.name}.{m.name}"] = _operation(
                "send", "requests", [req], f"{m.name} {where}; who may call it: {who}.", desc=m.desc, reply=[rep])
            # Machine-readable: the access rule (gridbus/schema.py ACCESS) and the largest request.
            operations[f"{c.name}.{m.name}"].update({"x-access": m.rule, "x-max-bytes": m.max_bytes})
    q_req, q_rep = schema.messages["query_request"], schema.messages["query_response"]
    messages["getObjects.request"] = _message("getObjects.request", "getObjects", q_req.desc,
                                              object_schema(q_req.fields), bus.T_QUERY_REQUEST, correlated=True,
                                              headers=request_headers)
    messages["getObjects.reply"] = _message("getObjects.reply", "getObjects answer", q_rep.desc,
                                            object_schema(q_rep.fields), bus.T_QUERY_RESPONSE, correlated=True)
    rpc = xt[bus.RPC]
    channels["requests"] = _channel("{address}", bus.RPC, xtype[bus.RPC], rpc.desc,
                                    [*requests, "getObjects.request"],
                                    {"address": "an agent's address, <kind>@<name> (schedd@host, collector@pool)"})
    channels["classRequests"] = _channel("class.{class}", bus.RPC, xtype[bus.RPC],
                                         "every agent serving a management class", ["getObjects.request"],
                                         {"class": "a management class: " + ", ".join(sorted(schema.classes))})
    channels["broadcast"] = _channel(bus.BROADCAST_KEY, bus.RPC, xtype[bus.RPC], "every agent",
                                     ["getObjects.request", "daemon.Advertise.request"])
    channels["replies"] = _channel(bus.REPLY_TO, "", "direct", schema.messages["method_response"].desc,
                                   [*replies, "getObjects.reply"])
    operations["getObjects"] = _operation("send", "requests", ["getObjects.request"],
                                          "getObjects on one agent", desc=q_req.desc, reply=["getObjects.reply"])
    operations["getObjectsOfClass"] = _operation("send", "classRequests", ["getObjects.request"],
                                                 "getObjects on every agent serving a class", reply=["getObjects.reply"])
    operations["broadcast"] = _operation("send", "broadcast", ["getObjects.request", "daemon.Advertise.request"],
                                         "getObjects on every agent, or Advertise (a starting collector's)",
                                         reply=["getObjects.reply"])

    # Ads
    ad_msg, inv = schema.messages["ad"], schema.messages["invalidate"]
    public: list[str] = []
    private: list[str] = []
    for ad in schema.ads.values():
        name = f"ad.{ad.name}"
        payload = object_schema(ad_msg.fields)
        payload["properties"]["ads"] = {"type": "array", "items": ad_schema(schema, ad),
                                        "description": _field(schema, "ad", "ads").desc}
        messages[name] = _message(name, f"{ad.name} ads", f"{ad.desc} Routing key {ad.routing_key}.", payload,
                                  bus.T_AD)
        (private if ad.routing_key.startswith("private.") else public).append(name)
    messages["invalidate"] = _message("invalidate", "invalidation", inv.desc, object_schema(inv.fields),
                                      bus.T_INVALIDATE)
    ads_x = xt[bus.ADS]
    channels["ads"] = _channel("{mytype}.{name}", bus.ADS, xtype[bus.ADS], ads_x.desc, [*public, "invalidate"],
                               {"mytype": "the ads' MyType, lower case", "name": "the publishing daemon's name (dots as underscores)"})
    channels["privateAds"] = _channel("private.{mytype}.{name}", bus.ADS, xtype[bus.ADS],
                                      "the secret side of ads (claim ids)", private,
                                      {"mytype": "the ads' MyType, lower case", "name": "the publishing daemon's name"})
    operations["receiveAds"] = _operation("receive", "ads", [*public, "invalidate"], "the pool's ads, as the collector hears them")
    operations["receivePrivateAds"] = _operation("receive", "privateAds", private, "claim ids (daemon accounts only)")

    # Events
    ev = schema.messages["event"]
    for fam in schema.events.values():
        names = []
        for e in fam.events.values():
            name = f"{fam.name}.{e.name}"
            messages[name] = _message(name, f"{fam.name} event {e.name}", e.desc, event_payload(schema, fam, e.name),
                                      bus.T_EVENT)
            messages[name]["description"] = ("AMQP message_id: the EventId. Sent persistent, with publisher "
                                              "confirms, again with the same EventId when unconfirmed: a consumer "
                                              "drops a repeated one.")
            names.append(name)
        params = {"event": ", ".join(fam.events), ("owner" if fam.name == "job" else "kind"):
                  "the job's owner (dots as underscores)" if fam.name == "job" else "the daemon's kind"}
        cname = f"{fam.name}Events"
        channels[cname] = _channel(fam.routing_key.replace("<", "{").replace(">", "}"), bus.EVENTS,
                                   xtype[bus.EVENTS], fam.desc, names, params)
        operations[f"receive{fam.name.capitalize()}Events"] = _operation(
            "receive", cname, names, f"{fam.name} events: bind a queue of your own to {bus.EVENTS}",
            desc=ev.desc, persistent=True)

    # Dead letters and file transfers
    channels["deadLetters"] = _channel(None, bus.DEAD, xtype[bus.DEAD], xt[bus.DEAD].desc, ["deadLetter"])
    messages["deadLetter"] = _message("deadLetter", "dead letter", "A request no agent could process, as it was sent "
                                      "(its x-death header says from which queue and why).", {}, bus.T_METHOD_REQUEST)
    operations["receiveDeadLetters"] = _operation("receive", "deadLetters", ["deadLetter"], "what no agent could process")
    tr = schema.messages["transfer"]
    messages["transfer"] = _message("transfer", "file transfer", tr.desc,
                                    {"type": "string", "format": "binary", "description": "the bytes, or empty"},
                                    "", headers=object_schema(tr.fields))
    del messages["transfer"]["bindings"]
    channels["transfer"] = _channel("{queue}", "", "direct", xt["(default)"].desc, ["transfer"],
                                    {"queue": "the other end's exclusive, server-named queue"})
    operations["transfer"] = _operation("send", "transfer", ["transfer"], "a file transfer's messages, daemon to daemon")

    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "gridbus",
            "version": str(schema.version),
            "description": (
                "An HTCondor-style pool whose daemons are agents on RabbitMQ. Generated from schemas/*.toml "
                "by `python -m gridbus.asyncapi` (make docs); do not edit. Bodies are application/msgpack, "
                "or application/json (accepted everywhere and answered in kind); the payloads here are the "
                "JSON form. Methods: a request on gridbus.rpc with reply-to amq.rabbitmq.reply-to and a "
                "correlation_id; an answer may come in several messages (partial=true) whose list "
                "out-arguments concatenate. docs/schema.md says the same in prose tables."),
        },
        "defaultContentType": "application/msgpack",
        "servers": {"local": {"host": "127.0.0.1:5672", "protocol": "amqp", "protocolVersion": "0.9.1",
                              "description": "a personal pool's broker (GRIDBUS_URL names yours)"}},
        "channels": channels,
        "operations": operations,
        "components": components,
    }


def render_yaml(schema: Schema) -> str:
    # Through JSON first: a schema used twice becomes two objects, written twice, where PyYAML
    # would write an anchor and an alias. libyaml's emitter where PyYAML has it (ten times faster
    # than the pure one; both write the same text).
    fresh = json.loads(json.dumps(document(schema)))
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(fresh, Dumper=dumper, sort_keys=False, width=120, allow_unicode=True)


def load_yaml(text: str) -> Any:
    """The document read back (libyaml's parser where PyYAML has it)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


if __name__ == "__main__":
    sys.stdout.write(render_yaml(builtin()))
