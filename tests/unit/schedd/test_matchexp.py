"""HTCondor's match-time substitution ($$) of a job's attributes for the slot it was matched to."""

from __future__ import annotations

import classad2
import pytest

from gridbus.agents.schedd.matchexp import CannotExpand, expand, needs_expansion
from gridbus.classad import ExprTree

SLOT = {"Name": "slot1@h", "OpSys": "LINUX", "Arch": "X86_64", "Memory": 2048, "HasFoo": True,
        "LoadAvg": 0.5, "Weird": "$$(OpSys)", "Start": ExprTree("KeyboardIdle > 15")}


def test_attributes_strings_and_defaults():
    job = {"Cmd": "povray.$$(OpSys).$$(arch)", "Arguments": "$$(HasFoo) $$(LoadAvg) $$(Start) $$(Gone:x y)",
           "RequestMemory": 100}
    out = expand(job, SLOT)
    assert out["Cmd"] == out["MATCH_EXP_Cmd"] == "povray.LINUX.X86_64"
    assert out["Arguments"] == "true 0.5 KeyboardIdle > 15 x y"
    # What was looked up is kept by the slot's own spelling; a default is not.
    assert out["MATCH_OpSys"] == "LINUX" and out["MATCH_Arch"] == "X86_64" and "MATCH_Gone" not in out
    assert "RequestMemory" not in out


def test_expressions_are_evaluated_with_the_job_as_my_and_the_slot_as_target():
    job = {"Arguments": '--mem $$([ Memory * 0.9 ]) --who $$([ strcat(MY.Owner, "-", TARGET.Name) ])',
           "Owner": "alice", "Tag": '$$([ ifThenElse(Memory > 1, "big]) (", "small") ])'}
    out = expand(job, SLOT)
    want = classad2.ExprTree("string(2048 * 0.9)").eval()  # HTCondor's own text of a real
    assert out["Arguments"] == f"--mem {want} --who alice-slot1@h"
    assert out["Tag"] == "big]) ("  # brackets and parentheses inside a quoted string do not end it


def test_quotes_inside_an_expression_in_a_string_and_in_an_expression_attribute():
    assert expand({"Arguments": '$$([ strcat("a", "b") ])'}, SLOT)["Arguments"] == "ab"
    # In an expression attribute the macro is inside a string literal: its quotes are escaped.
    out = expand({"Env": ExprTree('strcat("x=", "$$([ strcat(\\"a\\", TARGET.Arch) ])")')}, SLOT)
    assert out["Env"].eval() == "x=aX86_64"


def test_an_expression_attribute_is_expanded_in_its_text():
    job = {"Requirements": ExprTree('TARGET.Arch == "$$(Arch)"')}
    out = expand(job, SLOT)
    assert isinstance(out["Requirements"], ExprTree) and str(out["Requirements"]) == 'TARGET.Arch == "X86_64"'


def test_what_is_put_in_is_never_expanded_again_and_match_attributes_never_are():
    out = expand({"Arguments": "$$(Weird) $$(DOLLARDOLLAR)(OpSys)", "MATCH_EXP_Cmd": "$$(OpSys)"}, SLOT)
    assert out["Arguments"] == "$$(OpSys) $$(OpSys)"
    assert "MATCH_EXP_Cmd" not in out
    assert needs_expansion({"Cmd": "/bin/true", "MATCH_EXP_Cmd": "$$(x)"}) is False
    assert needs_expansion({"Cmd": "x.$$(OpSys)"}) and needs_expansion({"R": ExprTree('"$$(A)" == "x"')})


@pytest.mark.parametrize("text, name", [("$$(NoSuch)", "NoSuch"), ("$$(My.Name)", "My.Name"),
                                        ("$$([ NoSuchFn(1) ])", "[ NoSuchFn(1) ]"),
                                        ("$$([ undefined ])", "[ undefined ])"[:-1])])
def test_what_cannot_be_expanded_names_itself_as_htcondor_does(text, name):
    with pytest.raises(CannotExpand) as e:
        expand({"Cmd": text}, SLOT)
    assert e.value.reason == f"Cannot expand $$ expression ({name})."


def test_text_without_a_closing_parenthesis_is_left_alone():
    assert expand({"Arguments": "cost $$(5"}, SLOT) == {"Arguments": "cost $$(5", "MATCH_EXP_Arguments": "cost $$(5"}


def test_the_file_transfer_reads_the_job_as_last_expanded():
    from gridbus.agents.schedd.matchexp import as_matched

    job = {"Cmd": "p.$$(OpSys)", "Out": "o", "Iwd": "/w"}
    matched = as_matched({**job, **expand(job, SLOT)})
    assert matched["Cmd"] == "p.LINUX" and matched["Out"] == "o" and as_matched(job) == job


def test_a_macro_in_one_procs_own_attribute_is_expanded_for_that_proc(tmp_path):
    """The schedd looks for $$() once per cluster ad; a proc's own attribute (set by `gridbus
    edit` on that proc) is looked at apart, so its macro is expanded for it and not for the others."""
    from gridbus.agents.schedd.shadows import Claim
    from tests.unit.schedd.inproc import make_schedd, submit

    schedd = make_schedd(tmp_path)
    cid = submit(schedd, count=2, Arguments="plain")
    q = schedd.queue
    q.update(q.proc(cid, 1), {"Arguments": "cpus=$$(Cpus)"})
    claim = Claim("c1", "startd@a", "slot1@a", "alice", {"Name": "slot1@a", "Cpus": 4}, 1e18)
    assert schedd.shadows._idle_ad_for(claim, (cid, 0))["Arguments"] == "plain"
    assert schedd.shadows._idle_ad_for(claim, (cid, 1))["Arguments"] == "cpus=4"
    assert q.get(cid, 1)["MATCH_Cpus"] == 4 and "MATCH_Cpus" not in q.get(cid, 0)
