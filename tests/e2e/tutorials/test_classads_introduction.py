"""HTCondor's ClassAds-Introduction tutorial, cell by cell (it needs no pool)."""

from __future__ import annotations

import pytest

from tests.e2e.tutorials.bindings import classad


def test_expressions_and_their_values(capsys):
    arith_expr = classad.ExprTree("1 + 4")
    print(f"{arith_expr} {type(arith_expr).__name__}")
    print(arith_expr.eval())
    function_expr = classad.ExprTree("ifThenElse(4 > 6, 123, 456)")
    value = function_expr.eval()
    print(function_expr, value, type(value).__name__)
    print(classad.ExprTree("foo").eval())
    print(classad.ExprTree('5 + "bar"').eval())
    print(classad.ExprTree("ifThenElse(1, 2, 3, 4, 5)").eval())
    out = capsys.readouterr().out.splitlines()
    # As recorded: the expression's text, 5, the function's value 456 (an int), then undefined
    # and error printed as classad2's Value numbers 2 and 1.
    assert out == ["1 + 4 ExprTree", "5", "ifThenElse(4 > 6,123,456) 456 int", "2", "1", "1"]


def _ad1():
    return classad.ClassAd("""
[
  a = 1;
  b = "foo";
  c = b;
  d = a + 4;
]""")


def test_ads_from_text_and_from_a_dict_print_alike(capsys):
    ad1 = _ad1()
    print(ad1)
    ad_from_dict = classad.ClassAd({
        "a": 1,
        "b": "foo",
        "c": classad.ExprTree("b"),
        "d": classad.ExprTree("a + 4"),
    })
    print(ad_from_dict)
    text = capsys.readouterr().out
    first, second = text[: len(text) // 2], text[len(text) // 2 :]
    assert first == second
    assert [line.strip() for line in first.strip().splitlines()] == [
        "[", "a = 1;", 'b = "foo";', "c = b;", "d = a + 4", "]"]


def test_lookups_updates_and_evaluation(capsys):
    ad1 = _ad1()
    print(ad1["a"])
    with pytest.raises(KeyError, match="not_here"):
        print(ad1["not_here"])
    print(ad1.get("not_here", 5))
    ad1.update({"e": 8, "f": True})
    print(ad1)
    print(ad1.eval("d"))
    ad1["g"] = classad.ExprTree("b + 5")
    print(ad1["g"])
    print(type(ad1["g"]).__name__)
    print(ad1.eval("g"))
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines == ["1", "5", "[", "a = 1;", 'b = "foo";', "c = b;", "d = a + 4;", "e = 8;", "f = true", "]",
                     "5", "b + 5", "ExprTree", "1"]
