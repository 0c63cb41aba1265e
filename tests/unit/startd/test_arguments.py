"""HTCondor's argument and environment syntax, as the starter reads it from the job ad."""

from __future__ import annotations

import pytest

from gridbus.agents.startd.arguments import (
    ArgumentError,
    job_argv,
    job_environment,
    parse_env_v1,
    parse_environment_v2,
    quoted_v2,
    split_v2,
)


@pytest.mark.parametrize(
    ("raw", "argv"),
    [
        ("3 simple arguments", ["3", "simple", "arguments"]),
        ("one 'two with spaces' 3", ["one", "two with spaces", "3"]),
        # the manual's example, after condor_submit undid the doubled double quotes
        ("""one "two" 'spacey ''quoted'' argument'""", ["one", '"two"', "spacey 'quoted' argument"]),
        ("  leading   and trailing  ", ["leading", "and", "trailing"]),
        ("''", [""]),
        ("a'b c'd", ["ab cd"]),
        ("it''s", ["its"]),  # outside quotes '' is an empty quoted part
        ("", []),
        ("tab\tsep\nnewline", ["tab", "sep", "newline"]),
    ],
)
def test_split_v2(raw, argv):
    assert split_v2(raw) == argv


def test_unterminated_quote_is_an_error_naming_the_text():
    with pytest.raises(ArgumentError, match="unterminated single quote"):
        split_v2("one 'two")


def test_quoted_v2_from_submit_syntax():
    assert quoted_v2('"one ""two"" \'x y\'"') == "one \"two\" 'x y'"
    assert split_v2(quoted_v2('"one ""two"" \'spacey \'\'quoted\'\' argument\'"')) == [
        "one",
        '"two"',
        "spacey 'quoted' argument",
    ]
    with pytest.raises(ArgumentError):
        quoted_v2("no quotes")
    with pytest.raises(ArgumentError, match="lone double quote"):
        quoted_v2('"a " b"')


def test_job_argv_prefers_arguments_over_args():
    assert job_argv({"Arguments": "'a b' c", "Args": "x y"}) == ["a b", "c"]
    assert job_argv({"args": "x  'y z'"}) == ["x", "'y", "z'"]  # old style: no quoting
    assert job_argv({}) == []
    with pytest.raises(ArgumentError, match="Arguments must be a string"):
        job_argv({"Arguments": 3})


def test_environment_both_forms():
    assert parse_environment_v2("one=1 two='2 2' three=\"3\" four='it''s'") == {
        "one": "1",
        "two": "2 2",
        "three": '"3"',
        "four": "it's",
    }
    assert parse_env_v1("A=1;B=x y;;C=") == {"A": "1", "B": "x y", "C": ""}
    assert job_environment({"Environment": "A=1", "Env": "B=2"}) == {"A": "1"}
    assert job_environment({"Env": "B=2;C=3"}) == {"B": "2", "C": "3"}
    with pytest.raises(ArgumentError, match="not NAME=value"):
        parse_environment_v2("novalue")
