"""The shared quoting rules (gridbus.jobargs): what condor_submit's side writes, the starter reads back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridbus import jobargs
from gridbus.agents.startd import arguments as starter_side
from gridbus.submit import quoting as submit_side

_words = st.lists(st.text(alphabet=st.sampled_from("ab '\"\t=x"), max_size=6), max_size=5)


@given(_words)
def test_join_then_split_is_the_identity(words: list[str]):
    assert jobargs.split_v2(jobargs.join_v2(words)) == words


@given(_words)
def test_submit_writes_what_the_starter_reads(words: list[str]):
    # Write the words in submit syntax (raw V2 form, double quotes doubled, wrapped in quotes).
    submit_value = '"' + jobargs.join_v2(words).replace('"', '""') + '"'
    ad = submit_side.arguments_attrs(submit_value) if words else {"Arguments": ""}
    assert starter_side.job_argv(ad) == words


def test_both_sides_are_the_same_code():
    assert starter_side.split_v2 is jobargs.split_v2
    assert starter_side.job_environment is jobargs.job_environment
    assert submit_side.join_v2 is jobargs.join_v2


def test_environment_round_trip_and_old_form():
    env = {"B": "two words", "A": "it's", "C": ""}
    raw = jobargs.unparse_environment_v2(env)
    assert raw == "A=it''''s B=two' 'words C="  # a quote is a quoted part holding ''
    assert jobargs.parse_environment_v2(raw) == env
    assert jobargs.parse_env_v1(" A =1; B=x ;") == {"A": "1", "B": "x "}
    with pytest.raises(jobargs.ArgumentError, match=r"Env: entry '=1' is not NAME=value"):
        jobargs.parse_env_v1("=1")


def test_submit_syntax_errors_name_the_command():
    with pytest.raises(jobargs.ArgumentError, match=r"^arguments: a lone double quote"):
        jobargs.unquote_submit_v2('"a " b"')
    with pytest.raises(jobargs.ArgumentError, match="unterminated single quote"):
        jobargs.split_v2("a 'b", "arguments")
    with pytest.raises(jobargs.ArgumentError, match="must be a string"):
        jobargs.split_v2(3)  # type: ignore[arg-type]
