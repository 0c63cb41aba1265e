"""The steps of condor_q's expression analysis (gridbus.classad.analysis), by HTCondor's rules:
which sub-expressions are numbered, and how the table reduces to the deciding conditions."""

from __future__ import annotations

from gridbus.classad import ClassAd, analysis
from gridbus.classad.analysis import condition_table, numbered_steps, table_text

JOB = ClassAd({"RequestMemory": 100, "Project": "x"})
SLOTS = [{"Memory": m, "Arch": "X86_64", "Disk": 10} for m in (50, 200, 400)]


def test_a_chain_of_ands_numbers_each_operand_and_each_operator():
    assert numbered_steps(JOB, 'TARGET.Arch == "X86_64" && TARGET.Memory >= RequestMemory && TARGET.Disk > 5') == [
        '[0]    : TARGET.Arch == "X86_64"', "[1]    : TARGET.Memory >= RequestMemory", "[2]    : [0] && [1]",
        "[3]    : TARGET.Disk > 5", "[4]    : [2] && [3]"]


def test_parentheses_and_arithmetic_make_no_step_and_not_takes_over_its_operand():
    assert numbered_steps(JOB, "(TARGET.Memory + 1 > 2 * RequestMemory)") == ["[0]    : TARGET.Memory + 1 > 2 * RequestMemory"]
    assert numbered_steps(JOB, "!(TARGET.Memory > 10)") == ["[0]    :  !(TARGET.Memory > 10)"]
    # What parentheses enclose is analyzed as a condition, as HTCondor does (a default too).
    assert numbered_steps(JOB, "TARGET.Memory >= (MY.RequestMemory ?: 5)") == [
        "[0]    : MY.RequestMemory ?: 5", "[1]    : TARGET.Memory >= (MY.RequestMemory ?: 5)"]


def test_the_table_keeps_the_deciding_condition():
    rows = condition_table(JOB, "TARGET.Memory >= RequestMemory && TARGET.Disk > 5", SLOTS)
    assert rows == [{"Step": 0, "Matched": 2, "Condition": "TARGET.Memory >= RequestMemory"}]
    rows = condition_table(JOB, "TARGET.Memory >= RequestMemory || TARGET.Memory < 10", SLOTS)
    assert rows == [{"Step": 0, "Matched": 2, "Condition": "TARGET.Memory >= RequestMemory"}]
    # Neither operand decides alone: the && shows, with its operands' steps.
    rows = condition_table(JOB, "TARGET.Memory >= RequestMemory && TARGET.Memory < 300", SLOTS)
    assert rows == [{"Step": 0, "Matched": 2, "Condition": "TARGET.Memory >= RequestMemory"},
                    {"Step": 1, "Matched": 2, "Condition": "TARGET.Memory < 300"},
                    {"Step": 2, "Matched": 1, "Condition": "[0] && [1]"}]


def test_constant_conditions_read_no_slot_attribute():
    rows = condition_table(JOB, 'Project == "y" && TARGET.Memory >= RequestMemory', SLOTS)
    assert rows == [{"Step": 0, "Matched": "never", "Condition": 'Project == "y"'}]
    rows = condition_table(JOB, 'Project == "x" || TARGET.Memory >= RequestMemory', SLOTS)
    assert rows == [{"Step": 0, "Matched": "always", "Condition": 'Project == "x"'}]


def test_table_text_has_condor_qs_columns():
    text = table_text([{"Step": 0, "Matched": 12, "Condition": "A"}, {"Step": 10, "Matched": "never", "Condition": "B"}])
    assert text == ("        Slots\nStep   Matched  Condition\n----- --------- ---------\n"
                    "[0]          12  A\n[10]      never  B\n")


def test_an_analysis_past_its_budget_gives_no_table(monkeypatch):
    # Each step is evaluated against every slot: a slow condition (a backtracking regular
    # expression, each match bounded on its own) stops the whole analysis at its budget.
    monkeypatch.setattr(analysis, "MAX_SECONDS", 0.01)
    slots = [{"S": "a" * 40 + "!"} for _ in range(50)]
    assert condition_table(JOB, 'TARGET.S isnt undefined && regexp("(a|aa)+$", TARGET.S)', slots) == []
    monkeypatch.setattr(analysis, "MAX_SECONDS", 60.0)
    assert condition_table(JOB, "TARGET.S isnt undefined", slots) == [
        {"Step": 0, "Matched": 50, "Condition": "TARGET.S isnt undefined"}]


def test_a_long_expression_is_not_analyzed_step_by_step():
    text = f'TARGET.S == "{"x" * analysis.MAX_TEXT}"'
    assert condition_table(JOB, text, SLOTS) == [] and numbered_steps(JOB, text) == []
