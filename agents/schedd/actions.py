"""Job actions: the per-job totals answer (htcondor2's Schedd.act) and SetAttribute values."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gridbus.status import invalid

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


@dataclass
class Totals:
    success: int = 0
    not_found: int = 0
    denied: int = 0
    bad_status: int = 0
    already_done: int = 0
    error: int = 0
    job_ads: int = 0
    denials: list[str] = field(default_factory=list)
    factories: list[Any] = field(default_factory=list)  # clusters named whole by a Remove

    def add(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    @property
    def changed(self) -> int:
        return self.success

    def as_ad(self) -> dict[str, int]:
        return {
            "TotalSuccess": self.success,
            "TotalNotFound": self.not_found,
            "TotalPermissionDenied": self.denied,
            "TotalBadStatus": self.bad_status,
            "TotalAlreadyDone": self.already_done,
            "TotalError": self.error,
            "TotalJobAds": self.job_ads,
            "TotalChangedAds": self.success,
        }


def parse_value(value: Any, name: str) -> Any:
    """A SetAttribute value: typed values stay; a string is ClassAd text, as condor_qedit takes it.

    ``"\\"text\\""`` is the string text, ``12`` an integer, ``true`` a boolean, anything else an
    expression (which must parse).
    """
    if isinstance(value, (bool, int, float)) or type(value).__name__ == "ExprTree":
        return value
    if value is None or isinstance(value, (dict, bytes)):
        raise invalid(f"SetAttribute: the value of {name} must be ClassAd text or a typed value, got {value!r}")
    if isinstance(value, list):
        return value
    text = str(value).strip()
    if not text:
        raise invalid(f"SetAttribute: the value of {name} is empty (a string value must be quoted: '\"text\"')")
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    from gridbus import classad

    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        try:
            return classad.unquote(text)
        except Exception as exc:
            raise invalid(f"SetAttribute: the value of {name} is not a valid ClassAd string: {exc}") from None
    try:
        tree = classad.ExprTree(text)
    except Exception as exc:
        raise invalid(f"SetAttribute: the value of {name} is not a valid ClassAd expression ({text!r}): {exc}") from None
    return tree
