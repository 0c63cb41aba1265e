"""docs/asyncapi.yaml as the tests use it: a validator of one message's payload, and bodies in
their JSON wire form (what the document's payload schemas describe)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT7

from gridbus import wire
from gridbus.asyncapi import load_yaml

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "asyncapi.yaml"
URN = "urn:gridbus:asyncapi"


@functools.cache
def document() -> dict[str, Any]:
    return load_yaml(DOCUMENT.read_text())


def payload_validator(message: str, doc: dict[str, Any] | None = None) -> jsonschema.Draft7Validator:
    """A validator of the payload of ``message`` (a key of components/messages), its references
    resolved within the document."""
    doc = document() if doc is None else doc
    registry = Registry().with_resource(URN, DRAFT7.create_resource({**doc, "$id": URN}))
    return jsonschema.Draft7Validator({"$ref": f"{URN}#/components/messages/{message}/payload"}, registry=registry)


def as_json(body: Any) -> Any:
    """A decoded body in its JSON wire form, as a consumer reading application/json gets it."""
    return json.loads(wire.encode(body, wire.JSON))
