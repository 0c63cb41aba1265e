"""The wire codec: msgpack (and JSON) bodies carrying typed ClassAd values.

ClassAd literals travel as plain msgpack/JSON values. What JSON and msgpack cannot say on their
own travels with an explicit type, never through a side channel (QMF's ``!!descriptors`` map was
such a side channel, and a source of bugs):

=============  ===========================  ==========================
value          msgpack                      JSON
=============  ===========================  ==========================
expression     ext 1, its ClassAd text      ``{"$expr": "a + 1"}``
undefined      ext 2, empty                 ``{"$undefined": true}``
error          ext 3, empty                 ``{"$error": true}``
=============  ===========================  ==========================

Decoding yields ``gridbus.classad.ExprTree`` and ``gridbus.classad.Value`` members; a nested
``ClassAd`` is encoded as a map. ``Value`` is an IntEnum (as classad2's), so both encoders are kept
from their int shortcut: msgpack packs with ``strict_types`` (every int subclass comes to the
default hook, which sends Value members typed and other IntEnums as plain integers), and the JSON
side replaces the members before ``json.dumps`` sees them. The ClassAd package is imported lazily so the codec stays cheap to
import for tools that never meet an expression.
"""

from __future__ import annotations

import datetime as _dt
import enum
import json
from typing import Any

import msgpack

MSGPACK = "application/msgpack"
JSON = "application/json"
CONTENT_TYPES = (MSGPACK, JSON)

EXT_EXPR = 1
EXT_UNDEFINED = 2
EXT_ERROR = 3


class DecodeError(ValueError):
    """A body that cannot be decoded; the message says why."""


_CLASSAD: Any = None


def _classad() -> Any:  # lazy: see the module docstring; kept once imported (the hooks run per value)
    global _CLASSAD
    if _CLASSAD is None:
        from gridbus import classad

        _CLASSAD = classad
    return _CLASSAD


def _expr_text(value: Any) -> str | None:
    """ClassAd text for values that need a typed wire form, else None."""
    ca = _classad()
    if isinstance(value, ca.ExprTree):
        return str(value)
    if isinstance(value, _dt.datetime):
        return str(ca.ExprTree(f'absTime("{value.isoformat()}")'))
    return None


def _msgpack_default(value: Any) -> Any:
    ca = _classad()
    if value is ca.Value.Undefined:
        return msgpack.ExtType(EXT_UNDEFINED, b"")
    if value is ca.Value.Error:
        return msgpack.ExtType(EXT_ERROR, b"")
    if isinstance(value, ca.ClassAd):
        return {k: value.lookup(k) if _is_expr_attr(value, k) else value[k] for k in value.keys()}
    text = _expr_text(value)
    if text is not None:
        return msgpack.ExtType(EXT_EXPR, text.encode())
    return _plain_subclass(value, "on the wire")


def _plain_subclass(value: Any, where: str) -> Any:
    """The plain value of a container or of a subclass of a scalar (an IntEnum, a StrEnum)."""
    if isinstance(value, (set, frozenset, tuple, list)):
        return list(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool):
        return bool(value)
    for kind in (int, float, str, bytes, dict):  # a subclass (an IntEnum's int) goes as its base
        if isinstance(value, kind):
            return kind(value)  # type: ignore[arg-type]  # mypy widens the loop's kinds to their union
    raise TypeError(f"cannot encode a {type(value).__name__} {where}")


def _is_expr_attr(ad: Any, key: str) -> bool:
    ca = _classad()
    return isinstance(ad[key], ca.ExprTree)


def _msgpack_ext(code: int, data: bytes) -> Any:
    ca = _classad()
    if code == EXT_EXPR:
        return ca.exprtree.shared(data.decode())
    if code == EXT_UNDEFINED:
        return ca.Value.Undefined
    if code == EXT_ERROR:
        return ca.Value.Error
    return msgpack.ExtType(code, data)


def _json_default(value: Any) -> Any:
    ca = _classad()
    if value is ca.Value.Undefined:
        return {"$undefined": True}
    if value is ca.Value.Error:
        return {"$error": True}
    if isinstance(value, ca.ClassAd):
        return {k: value[k] for k in value.keys()}
    text = _expr_text(value)
    if text is not None:
        return {"$expr": text}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return _plain_subclass(value, "as JSON")


def _json_ready(obj: Any) -> Any:
    """``obj`` with every Value member replaced by its typed JSON form. json.dumps writes an int
    subclass as a bare number without asking the default hook, so the members go first."""
    ca = _classad()
    if isinstance(obj, ca.Value):
        return _json_default(obj)
    if isinstance(obj, dict):
        return {k: _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_ready(v) for v in obj]
    if isinstance(obj, ca.ClassAd):
        return {k: _json_ready(obj[k]) for k in obj.keys()}
    return obj


def _json_hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        ((key, val),) = obj.items()
        if key == "$expr" and isinstance(val, str):
            return _classad().exprtree.shared(val)
        if key == "$undefined":
            return _classad().Value.Undefined
        if key == "$error":
            return _classad().Value.Error
    return obj


def encode(obj: Any, content_type: str = MSGPACK) -> bytes:
    """Encode ``obj`` as ``content_type``."""
    if content_type == MSGPACK:
        return msgpack.packb(obj, default=_msgpack_default, use_bin_type=True, strict_types=True)
    if content_type == JSON:
        return json.dumps(_json_ready(obj), default=_json_default, separators=(",", ":")).encode()
    raise DecodeError(f"unsupported content type {content_type!r}; use {MSGPACK} or {JSON}")


def decode(body: bytes, content_type: str | None = MSGPACK) -> Any:
    """Decode a body; raises DecodeError with the reason when it cannot."""
    ctype = (content_type or MSGPACK).split(";")[0].strip().lower()
    try:
        if ctype in (MSGPACK, "application/x-msgpack"):
            return msgpack.unpackb(body, ext_hook=_msgpack_ext, raw=False, strict_map_key=False)
        if ctype in (JSON, "text/json", "text/plain"):
            return json.loads(body, object_hook=_json_hook)
    except Exception as exc:  # a malformed body must never take an agent down
        raise DecodeError(f"undecodable {ctype} body: {exc}") from exc
    raise DecodeError(f"unsupported content type {ctype!r}; use {MSGPACK} or {JSON}")


def typed_map_to_ad(ad: dict[str, Any]) -> dict[str, Any]:
    """Accept QMF's typed-map ad form, ``{"Cmd": {"TYPE": "STRING_TYPE", "VALUE": "/bin/sleep"}}``.

    MRG Grid's console scripts sent every value as a string with its type beside it; gridbus
    takes that form too, so the program of the QMF submission interface of Condor in Red Hat MRG runs unchanged but for its import.
    """
    out: dict[str, Any] = {}
    for name, spec in ad.items():
        if isinstance(spec, dict) and set(spec) == {"TYPE", "VALUE"}:
            out[name] = _typed_value(name, str(spec["TYPE"]).upper(), spec["VALUE"])
        else:
            out[name] = spec
    return out


def _typed_value(name: str, kind: str, value: Any) -> Any:
    kind = kind.removesuffix("_TYPE")
    try:
        if kind in ("STRING", "STR", "SSTR", "LSTR"):
            return str(value)
        if kind in ("INTEGER", "INT", "UINT32", "INT32", "UINT64", "INT64"):
            return int(value)
        if kind in ("FLOAT", "REAL", "DOUBLE"):
            return float(value)
        if kind in ("BOOLEAN", "BOOL"):
            return value if isinstance(value, bool) else str(value).strip().lower() == "true"
        if kind in ("EXPR", "EXPRESSION"):
            return _classad().ExprTree(str(value))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"attribute {name}: {value!r} is not a valid {kind} value") from exc
    raise ValueError(f"attribute {name}: unknown TYPE {kind!r}")
