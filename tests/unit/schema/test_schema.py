"""The management schema: every file loads, every agent's handlers match it, the reference is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.schema import Schema, builtin, validate_args
from gridbus.schemadoc import render_markdown
from gridbus.status import MethodError, Status

ROOT = Path(__file__).resolve().parents[3]


def test_docs_schema_md_is_generated_from_the_schemas():
    # `make docs` regenerates it; a schema change without it leaves the reference untrue.
    assert (ROOT / "docs" / "schema.md").read_text() == render_markdown(builtin()), "run `make docs`"


def test_every_agent_serves_exactly_the_methods_its_schema_declares():
    from gridbus.agents.collector.agent import Collector
    from gridbus.agents.master.agent import Master
    from gridbus.agents.negotiator.agent import Negotiator
    from gridbus.agents.schedd.agent import Schedd
    from gridbus.agents.startd.agent import Startd

    schema = builtin()
    for agent in (Collector, Master, Negotiator, Schedd, Startd):
        handled = {key for key in agent._collect_handlers()}
        for class_name in {c for c, _m in handled}:
            declared = set(schema.cls(class_name).methods)
            served = {m for c, m in handled if c == class_name}
            assert served <= declared, f"{agent.__name__} serves undeclared {served - declared}"
        for class_name in agent.classes:
            declared = set(schema.cls(class_name).methods)
            served = {m for c, m in handled if c == class_name}
            assert declared <= served, f"{agent.__name__} declares but does not serve {declared - served}"


def test_a_bad_schema_type_is_refused_with_its_place():
    text = 'package = "gridbus"\n[classes.x.methods.M]\nargs = [{ name = "A", dir = "I", type = "strng" }]\n'
    with pytest.raises(ValueError, match=r"x\.M\(A\).*unknown type 'strng'"):
        Schema.from_toml(text, "bad.toml")


def test_arguments_are_validated_with_a_sentence_naming_the_argument():
    method = builtin().cls("collector").methods["Query"]
    assert validate_args(method, {})["Limit"] == -1
    with pytest.raises(MethodError) as err:
        validate_args(method, {"Limit": "ten"})
    assert err.value.status == Status.INVALID_PARAMETER and "'Limit'" in err.value.text
    with pytest.raises(MethodError, match="unknown argument 'Limt'"):
        validate_args(method, {"Limt": 3})


def test_every_method_declares_who_may_call_it_and_the_rule_is_known():
    # A method without `access` would be closed to all but administrators at run time; the
    # schema must say it, so the authorization matrix (tests/integration/security) covers it.
    from gridbus.schema import ACCESS

    undeclared = [f"{c.name}.{m.name}" for c in builtin().classes.values() for m in c.methods.values() if not m.access]
    assert not undeclared, f"methods without an access rule: {undeclared}"
    assert {m.rule for c in builtin().classes.values() for m in c.methods.values()} <= set(ACCESS)
    with pytest.raises(ValueError, match="unknown access 'everyone'"):
        Schema.from_toml('[classes.x.methods.M]\naccess = "everyone"\n')
