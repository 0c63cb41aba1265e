"""Every expression of HTCondor's corpora gives the same type and value as HTCondor's library."""

from __future__ import annotations

import pytest

from tests.unit.classad.corpus import classad_test_cases, functional_expressions
from tests.unit.classad.oracle import classad2, norm, ours, ours_eval, parses_in_theirs, theirs_eval

FUNCTIONAL = [e for e in functional_expressions() if parses_in_theirs(e)]
ADS, EVALS, MATCHES = classad_test_cases()


def test_corpus_was_harvested():
    assert len(FUNCTIONAL) > 150
    assert len(ADS) >= 5 and len(EVALS) >= 10


# Known differences, kept visible (none at the moment; an entry here is an xfail(strict) case).
KNOWN: set[str] = set()


def _mark(exprs):
    return [pytest.param(e, marks=pytest.mark.xfail(strict=True, reason="known difference")) if e in KNOWN else e
            for e in exprs]


@pytest.mark.parametrize("expr", _mark(FUNCTIONAL))
def test_functional_expression(expr):
    assert norm(ours_eval(expr)) == norm(theirs_eval(expr)), expr


@pytest.mark.parametrize("ad,expr", [
    pytest.param(a, e, marks=pytest.mark.xfail(strict=True, reason="known difference")) if e in KNOWN else (a, e)
    for a, e in EVALS
])
def test_classad_tests_evaluate(ad, expr):
    if ad not in ADS or not parses_in_theirs(expr):
        pytest.skip("ad or expression unknown to the library")
    assert norm(ours_eval(expr, ADS[ad])) == norm(theirs_eval(expr, ADS[ad])), expr


@pytest.mark.parametrize("kind,left,right", MATCHES)
def test_classad_tests_match(kind, left, right):
    theirs_l, theirs_r = classad2.ClassAd(ADS[left]), classad2.ClassAd(ADS[right])
    ours_l, ours_r = ours.ClassAd(ADS[left]), ours.ClassAd(ADS[right])
    assert ours_l.symmetricMatch(ours_r) == theirs_l.symmetricMatch(theirs_r)
    assert ours_l.matches(ours_r) == theirs_l.matches(theirs_r)
    assert ours_r.matches(ours_l) == theirs_r.matches(theirs_l)


# The job argument and environment functions share `gridbus.jobargs` with the submit language and
# the starter; their edge cases (ordering, line ends, odd blanks, quoting runs) against the library.
JOBARGS_CASES = [
    'envV1ToV2("B=1;A=2")',
    'envV1ToV2("A=1\\nB=2")',
    'envV1ToV2("\\vA=1")',
    'envV1ToV2(" A=1 ; B = 2")',
    'mergeEnvironment("B=1 A=2", "C=1")',
    'mergeEnvironment("A=1", "A=2 B=3")',
    'listToArgs({"a b", "", "it\'s"})',
    'listToArgs({"plain", "two  spaces"})',
    'argsToList("a\\vb c")',
    'argsToList("\'a b\' c \'\'")',
]


@pytest.mark.parametrize("expr", JOBARGS_CASES)
def test_job_argument_and_environment_functions(expr):
    assert norm(ours_eval(expr)) == norm(theirs_eval(expr)), expr


# Number and time arithmetic at the edges, found by the random generator: relative times scale by
# numbers only (a boolean operand is error) and divide as C doubles (by zero: inf, -inf or nan).
TIME_ARITHMETIC_CASES = [
    "relTime(10) * true", "false * relTime(10)", "relTime(10) / true", "relTime(10) * 2.5",
    "relTime(10) / 0", "relTime(-5) / 0", "relTime(0) / 0", "relTime(10) / -0.0", "relTime(10) % 3",
    "absTime(100) + relTime(10)", "absTime(100) - absTime(40)", "absTime(100) * 2",
    # a real result of +inf is error, -inf and NaN are values
    'real("inf") * 2', "1e308 + 1e308", "-1e308 * 10", 'real("nan") + 1', "1e308 * 10 == 3", "-1.0 / 0",
    # a minus written against digits is read with them, as strtoll does
    "-03", "-0123 + 1", "{-010}", "-9223372036854775808", "5 - 9223372036854775808", 'eval("-07")',
    "eval(relTime(-3))", "eval(~9223372036854775807)",
]
PARSE_ERRORS = ["5-03", "-08", "-018", "- 03", "03"]


@pytest.mark.parametrize("text", PARSE_ERRORS)
def test_literals_the_library_refuses_are_refused(text):
    assert not parses_in_theirs(text)
    with pytest.raises(ours.ClassAdParseError):
        ours.ExprTree(text)


@pytest.mark.parametrize("expr", TIME_ARITHMETIC_CASES)
def test_time_arithmetic(expr):
    assert norm(ours_eval(expr)) == norm(theirs_eval(expr)), expr


@pytest.mark.parametrize("expr", [
    'string(splitTime(absTime("2024-01-02T03:04:05Z")))', "string(splitTime(relTime(-86401)))",
    "toLower(splitTime(relTime(-3.5)))",
])
def test_split_time_prints_in_the_library_order(expr):
    assert norm(ours_eval(expr)) == norm(theirs_eval(expr)), expr
