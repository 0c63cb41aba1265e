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
