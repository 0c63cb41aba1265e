"""docs/asyncapi.yaml: generated from the schemas, valid AsyncAPI 3.0.0 (checked against the
specification's own JSON schema, from npm's @asyncapi/specs), and complete: every exchange, method,
event and ad of the schemas is in it, and its payload schemas take real bodies and refuse bad ones."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gridbus import bus
from gridbus.asyncapi import document, load_yaml, render_yaml
from gridbus.classad import ExprTree, Value
from gridbus.schema import Schema, builtin
from tests.asyncapi_contract import as_json, payload_validator

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "tests" / "node" / "node_modules" / "@asyncapi" / "specs" / "schemas" / "3.0.0.json"
NO_SPEC = ("the AsyncAPI 3.0.0 JSON schema (npm package @asyncapi/specs) is not installed: `make node-deps` "
           "installs it where node and npm are")


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return load_yaml((ROOT / "docs" / "asyncapi.yaml").read_text())


@pytest.fixture(scope="module")
def spec_validator() -> jsonschema.Draft7Validator:
    if not SPEC.exists():
        pytest.skip(NO_SPEC)
    return jsonschema.Draft7Validator(json.loads(SPEC.read_text()))


def test_docs_asyncapi_yaml_is_generated_from_the_schemas():
    # `make docs` regenerates it; a schema change without it fails here.
    assert (ROOT / "docs" / "asyncapi.yaml").read_text() == render_yaml(builtin()), "run `make docs`"


def test_a_schema_change_changes_the_document():
    # What the test above guards: an argument added to a method is in the document made from it.
    extra = Schema.from_toml('[classes.scheduler.methods.Submit]\naccess = "anyone"\n'
                             'args = [{ name = "Brand", dir = "I", type = "sstr", desc = "new" }]\n')
    changed = builtin().merge(extra)
    assert render_yaml(changed) != render_yaml(builtin())
    request = document(changed)["components"]["messages"]["scheduler.Submit.request"]["payload"]
    assert set(request["properties"]["args"]["properties"]) == {"Brand"}


def test_the_document_is_valid_asyncapi_3(doc, spec_validator):
    errors = sorted(spec_validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]]


def test_the_validator_refuses_a_broken_document(doc, spec_validator):
    # A validator that passes everything would prove nothing.
    broken = copy.deepcopy(doc)
    broken["operations"]["scheduler.Submit"]["action"] = "publish"  # AsyncAPI 2's word, gone in 3
    assert not spec_validator.is_valid(broken)
    broken = copy.deepcopy(doc)
    broken["channels"]["requests"]["bindings"]["amqp"]["exchange"]["type"] = "queue"
    assert not spec_validator.is_valid(broken)


def test_every_reference_resolves_and_every_payload_is_a_json_schema(doc):
    def refs(node: Any):
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                yield node["$ref"]
            for v in node.values():
                yield from refs(v)
        elif isinstance(node, list):
            for v in node:
                yield from refs(v)

    for ref in set(refs(doc)):
        assert ref.startswith("#/"), ref
        node: Any = doc
        for part in ref[2:].split("/"):
            assert part in node, f"{ref} does not resolve"
            node = node[part]
    for message in doc["components"]["messages"].values():
        jsonschema.Draft7Validator.check_schema(message["payload"])


def test_every_exchange_method_event_and_ad_is_in_the_document(doc):
    schema = builtin()
    exchanges = {ch["bindings"]["amqp"]["exchange"]["name"] for ch in doc["channels"].values()}
    assert {name for name, _ in bus.EXCHANGES} <= exchanges
    assert dict(bus.EXCHANGES) == {x.name: x.type for x in schema.exchanges.values() if x.name in dict(bus.EXCHANGES)}
    messages, operations = doc["components"]["messages"], doc["operations"]
    for c in schema.classes.values():
        for m in c.methods:
            assert f"{c.name}.{m}.request" in messages and f"{c.name}.{m}.reply" in messages
            assert operations[f"{c.name}.{m}"]["reply"]["messages"]
    for fam in schema.events.values():
        for e in fam.events:
            assert f"{fam.name}.{e}" in doc["channels"][f"{fam.name}Events"]["messages"]
    for ad in schema.ads:
        assert f"ad.{ad}" in messages
    assert not schema.unresolved()


def test_every_list_and_map_says_what_it_holds():
    # Nothing about the wire only in prose: a list names its items, a map its values or shape.
    schema = builtin()
    vague = [f"{c.name}.{m.name}({a.name})" for c in schema.classes.values() for m in c.methods.values()
             for a in m.args if a.type in ("list", "map") and not (a.items or a.values or a.shape)]
    vague += [f"{where}.{f.name}" for where, fields in schema.all_fields() for f in fields
              if f.type in ("list", "map") and not (f.items or f.values or f.shape)
              and not (where.startswith("messages.method_") and f.name in ("args", "out"))]
    assert not vague, f"lists and maps without items, values or shape: {vague}"


def test_payload_schemas_take_real_bodies_and_refuse_bad_ones(doc):
    submit = payload_validator("scheduler.Submit.request", doc)
    ad = {"Cmd": "/bin/true", "Requirements": ExprTree("true"), "Rank": Value.Undefined, "RequestCpus": 1}
    good = as_json({"object": "schedd@s", "method": "Submit", "args": {"Ad": ad, "Count": 3}})
    submit.validate(good)
    for bad in ({**good, "method": "Sumbit"}, {**good, "args": {"Ad": ad, "Count": "3"}},
                {**good, "args": {"Count": 3}}, {**good, "args": {"Ad": ad, "Cuont": 3}}):
        assert not submit.is_valid(bad), bad
    reply = payload_validator("scheduler.Submit.reply", doc)
    reply.validate({"status": 0, "text": "OK", "partial": False,
                    "out": {"ClusterId": 7, "FirstProc": 0, "NumProcs": 3, "Id": "s#7.0"}})
    assert not reply.is_valid({"status": 0, "text": "OK", "partial": False, "out": {"ClusterId": "7"}})
    held = payload_validator("job.held", doc)
    one = {"event": "held", "time": 1.5, "source": "schedd@s", "EventId": "e1", "GlobalJobId": "s#7.0#1",
           "ClusterId": 7, "ProcId": 0, "Owner": "alice", "JobStatus": 5, "HoldReason": "why",
           "HoldReasonCode": 1}
    held.validate(one)
    batch = {"event": "held", "time": 1.5, "source": "schedd@s", "EventId": "e2", "Owner": "alice",
             "Events": [{k: v for k, v in one.items() if k not in ("event", "time", "source", "EventId")}]}
    held.validate(batch)
    assert not held.is_valid({**one, "event": "released"})
    assert not held.is_valid({**batch, "Events": [{"ClusterId": 7}]})


def test_every_event_the_code_publishes_is_declared():
    # The events in schemas/events.toml are the ones the agents publish: a new one in the code
    # without its fields in the schema (and so in the document) fails here.
    published = set()
    for path in (ROOT / "agents").rglob("*.py"):
        text = path.read_text()
        published |= {("job", e) for e in re.findall(r"\.emit(?:_cluster)?\(\s*\"(\w+)\"", text)}
    for path in (ROOT / "gridbus").rglob("*.py"):
        published |= set(re.findall(r"publish_event\(\s*\"(job|daemon)\",\s*\"(\w+)\"", path.read_text()))
    declared = {(fam.name, e) for fam in builtin().events.values() for e in fam.events}
    assert ("job", "terminated") in published and ("daemon", "start") in published
    assert published <= declared, f"published but not in schemas/events.toml: {sorted(published - declared)}"
