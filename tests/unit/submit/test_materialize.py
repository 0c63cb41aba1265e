"""The proc template of late materialization: the client's check and the schedd's substitution."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.submit import Submit, materialize


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("a.dat", "b.dat"):
        (tmp_path / name).write_text("")
    for i in range(4):
        (tmp_path / f"d{i}").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _made(late: dict) -> list[dict]:
    n = len(late["Items"]) * late["Steps"]
    return [materialize.proc_ad(late["Template"], materialize.proc_for(i, late["Items"], late["Steps"]))
            for i in range(n)]


def test_the_template_makes_exactly_the_procs_the_client_built(here: Path):
    sub = Submit("executable = /bin/echo\narguments = \"$(f) '$(Step) x'\"\ninitialdir = d$(Process)\n"
                 "output = o.$(Cluster).$(ProcId)\n+Row = $(Row)\n+Name = \"n-$(f)\"\nrequirements = Machine != \"m$(Process)\"\n"
                 "max_idle = 2\nqueue 2 f matching *.dat\n")
    built = sub.build(cluster_id=9)
    late = sub.late(built, 9)
    assert late is not None and late["Steps"] == 2 and [r for r, _ in late["Items"]] == [0, 1]
    assert late["Template"]["Out"] == ["str", "o.9.$(procid)"]
    made = _made(late)
    assert [m["Iwd"] for m in made] == [str(here / f"d{i}") for i in range(4)]
    assert [m["Row"] for m in made] == [0, 0, 1, 1] and made[3]["Name"] == "n-b.dat"
    assert str(made[2]["Requirements"]).startswith('(Machine != "m2")')
    assert made == [{k: v for k, v in p.items() if k != "ProcId"} for p in built.proc_ads]


def test_a_value_that_is_not_a_text_substitution_sends_the_procs_instead(here: Path):
    # request_memory with units is converted per proc (2GB -> 2048): no template can say that.
    sub = Submit("executable = /bin/true\nrequest_memory = $(m)\nmax_idle = 1\nqueue m in (1GB, 2GB)\n")
    built = sub.build(cluster_id=3)
    assert [p["RequestMemory"] for p in built.proc_ads] == [1024, 2048]
    assert sub.late(built, 3) is None


def test_substitution_knows_only_the_per_proc_macros():
    macros = materialize.proc_macros(4, 1, 2, {"Item": "x"})
    assert materialize.substitute("$(Process) $(ITEM) $(ENV(HOME)) $(Other) $$(Arch)", macros) == \
        "4 x $(ENV(HOME)) $(Other) $$(Arch)"


@pytest.mark.parametrize("template, items, steps, why", [
    ({}, [[0, {}]], 1, "non-empty map"),
    ({"Out": ["text", "x"]}, [[0, {}]], 1, "kind"),
    ({"Out": ["str", "x"]}, [], 1, "Items"),
    ({"Out": ["str", "x"]}, [[0, {"a": 1}]], 1, "Items\\[0\\]"),
    ({"Out": ["str", "x"]}, [[0, {}]], 0, "Steps"),
    ({"Rank": ["expr", "(("]}, [[0, {}]], 1, "does not make a job ad"),
])
def test_a_bad_template_is_refused_with_the_part_named(template, items, steps, why):
    with pytest.raises(materialize.TemplateError, match=why):
        materialize.check(template, items, steps)
