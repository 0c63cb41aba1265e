"""The bounds of one evaluation (gridbus.classad.limits): hostile expressions end quickly, with a
sentence naming the bound where the caller asks for it, and ordinary results do not change."""

from __future__ import annotations

import pytest

import gridbus.classad as classad
from gridbus.classad import limits


def _doubling(levels: int, first: str = "1", step: str = "a{p}+a{p}") -> str:
    attrs = [f"a0={first}"] + [f"a{i}=" + step.format(p=i - 1) for i in range(1, levels + 1)]
    return "[" + "; ".join(attrs) + f"].a{levels}"


def test_an_attribute_is_evaluated_once_per_evaluation():
    # 60 levels of doubling would be 2**60 additions if each reference evaluated its attribute.
    assert classad.compile(_doubling(60)).eval({}) == 2**60
    assert classad.compile(_doubling(60) + " > 0").test({})
    ad = classad.ClassAd({f"a{i}": classad.ExprTree(f"a{i - 1} * 2") for i in range(1, 61)})
    ad["a0"] = 1
    assert ad.eval("a60") == 2**60


def test_the_memo_does_not_change_a_cycle_or_my_and_target():
    assert classad.compile("a").eval({"a": classad.ExprTree("b"), "b": classad.ExprTree("a")}) is classad.Value.Undefined
    # The same attribute name in MY and in TARGET are two values.
    my = {"x": classad.ExprTree("y + 1"), "y": 1}
    target = {"x": classad.ExprTree("y + 1"), "y": 10}
    assert classad.compile("x + TARGET.x").eval(my, target) == 2 + 11


def test_a_backtracking_regular_expression_has_a_match_budget():
    expr = classad.compile('regexp("(a|aa)+$", "' + "a" * 60 + '!")')
    assert expr.eval({}) is classad.Value.Error  # matchmaking: error, as for any bad expression
    with pytest.raises(classad.EvaluationLimitExceeded, match="match budget"):
        expr.eval({}, strict=True)
    assert classad.compile('regexp("(a+)+$", "' + "a" * 60 + '!")').eval({}) is False
    assert classad.compile('regexp("^a.c$", "abc")').eval({}) is True


def test_strings_and_lists_that_functions_make_are_bounded():
    expr = classad.compile(_doubling(40, '"xx"', "strcat(a{p}, a{p})"))
    with pytest.raises(classad.EvaluationLimitExceeded, match="string of 2,097,152 characters"):
        expr.eval({}, strict=True)
    assert expr.test({}) is False
    big = ",".join(["x"] * (limits.MAX_LIST + 1))
    with pytest.raises(classad.EvaluationLimitExceeded, match="list of"):
        classad.compile("size(split(s))").eval({"s": big}, strict=True)
    assert classad.compile("size(split(s))").eval({"s": "a b c"}) == 3


def test_the_step_and_time_budgets(monkeypatch):
    ad = {f"a{i}": classad.ExprTree(f"{i} + 0") for i in range(3000)}
    total = classad.compile("sum({" + ", ".join(f"a{i}" for i in range(3000)) + "})")
    # Within the step budget the value comes out; the wall clock is taken out of this part (a
    # loaded machine may deschedule the test for longer than the time budget), and tested below.
    monkeypatch.setattr(limits, "MAX_SECONDS", 3600.0)
    assert total.eval(ad) == sum(range(3000))
    monkeypatch.setattr(limits, "MAX_STEPS", 2000)
    with pytest.raises(classad.EvaluationLimitExceeded, match="budget of 2,000 attribute evaluations"):
        total.eval(ad, strict=True)
    monkeypatch.setattr(limits, "MAX_STEPS", 1_000_000)
    monkeypatch.setattr(limits, "MAX_SECONDS", -1.0)
    with pytest.raises(classad.EvaluationLimitExceeded, match="time budget"):
        total.eval(ad, strict=True)


def test_nesting_is_a_parse_error_not_a_crash():
    with pytest.raises(classad.ClassAdParseError, match="nested deeper"):
        classad.compile("(" * 5000 + "1" + ")" * 5000)
    with pytest.raises(classad.ClassAdParseError):
        classad.compile("{" * 5000 + "}" * 5000)


def test_prefix_quotes_a_short_part_only():
    text = limits.prefix("x" * 10_000_000)
    assert len(text) < 100 and "10,000,000 characters" in text
