"""docs/compat.md lists every public name of htcondor2 and classad2 (the pinned wheel's dir()),
and what it says holds: supported and partial names exist, a supported class has each public
method of htcondor2's, a partial class's note names each one it lacks, enumerations have
htcondor2's values, and an absent name that exists here refuses with a sentence."""

from __future__ import annotations

import enum
import functools
import inspect
import re
import subprocess
import sys
from pathlib import Path

import classad2
import htcondor2
import pytest

import gridbus.classad as ours_classad
import gridbus.console as ours_htcondor
from gridbus.errors import HTCondorNotImplementedError

TABLE = Path(__file__).resolve().parents[3] / "docs" / "compat.md"
ROW = re.compile(r"^\| `([^`]+)` \| (supported|partial|absent) \|(.*)\|$")
# Attributes htcondor2's JobEvent has on the class and gridbus's sets on each event it reads.
SET_ON_INSTANCES = {"JobEvent": {"cluster", "proc", "timestamp", "type"}}


def _rows(section: str) -> dict[str, tuple[str, str]]:
    text = TABLE.read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} is listed twice"
            rows[m.group(1)] = (m.group(2), m.group(3).strip())
    return rows


MODULES = {"htcondor2": (htcondor2, ours_htcondor), "classad2": (classad2, ours_classad)}
CASES = [(section, name, status, note)
         for section in MODULES for name, (status, note) in _rows(section).items()]


@functools.cache
def _public(module) -> set[str]:
    """The module's public names as a fresh interpreter sees them after `import module`: in this
    process another test's import of a submodule (htcondor2.personal, ...) adds its name to dir()."""
    out = subprocess.run([sys.executable, "-c", f"import {module.__name__} as m; print(' '.join(dir(m)))"],
                         capture_output=True, text=True, check=True, timeout=60)
    return {n for n in out.stdout.split() if not n.startswith("_")}


@pytest.mark.parametrize("section", list(MODULES))
def test_the_table_lists_exactly_the_wheels_names(section):
    theirs, _ = MODULES[section]
    listed = set(_rows(section))
    assert listed == _public(theirs), (
        f"missing from docs/compat.md: {sorted(_public(theirs) - listed)}; "
        f"not in {section}: {sorted(listed - _public(theirs))}")


def _missing_methods(theirs: type, ours: type, name: str) -> list[str]:
    have = SET_ON_INSTANCES.get(name, set())
    return sorted(a for a in dir(theirs) if not a.startswith("_") and not hasattr(ours, a) and a not in have)


@pytest.mark.parametrize("section,name,status,note", CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_each_row_holds(section, name, status, note):
    theirs_mod, ours_mod = MODULES[section]
    theirs = getattr(theirs_mod, name)
    if status == "partial":
        assert note, f"{name}: a partial name says what is missing"
    if status == "absent":
        assert note, f"{name}: an absent name says why"
        if not hasattr(ours_mod, name):
            return
        ours = getattr(ours_mod, name)
        assert callable(ours), f"{name} exists here but is marked absent and cannot refuse"
        with pytest.raises(HTCondorNotImplementedError) as refused:
            ours()
        assert len(str(refused.value)) > 40  # a sentence, not a bare name
        return
    assert hasattr(ours_mod, name), f"{name} is marked {status} but gridbus does not have it"
    ours = getattr(ours_mod, name)
    if inspect.isclass(theirs) and issubclass(theirs, enum.Enum):
        assert issubclass(ours, enum.Enum)
        assert {m.name: int(m) for m in ours} == {m.name: int(m) for m in theirs}
        assert (ours.__name__ == name) == (theirs.__name__ == name)  # an alias is an alias in both
    elif inspect.isclass(theirs):
        missing = _missing_methods(theirs, ours, name)
        if status == "supported":
            assert not missing, f"{name} is marked supported but lacks {missing}"
        else:
            unnamed = [m for m in missing if f"`{m}`" not in note]
            assert not unnamed, f"{name}'s note does not name what it lacks: {unnamed}"
    elif inspect.ismodule(theirs):
        assert inspect.ismodule(ours)
    else:
        assert callable(ours) == callable(theirs)


def test_console_names_are_plain_attributes():
    # Editors and type checkers read names from the module itself: no lazy module __getattr__.
    assert "__getattr__" not in vars(ours_htcondor)
    for name in ours_htcondor.__all__:
        assert name in vars(ours_htcondor), name
