"""The fast predicate always agrees with the general ClassAd evaluator, and is faster."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridbus import classad
from gridbus.agents.collector.fastpath import fast_predicate
from tests.hypothesis_profiles import examples

CONSTRAINTS = [
    "Cpus >= 4",
    "Cpus >= 4 && Memory > 4096",
    '(State == "unclaimed") && MY.Activity != "Idle"',
    '4 < Cpus && "X86_64" == Arch',
    "Cpus =?= 4 && Memory isnt 2048",
    'Arch is "X86_64"',
    "LoadAvg <= 0.5 && LoadAvg > -1",
    "Cpus == 4.0",
    'State < "b"',  # string ordering: always the evaluator's
    "Cpus >= 4 || Memory > 4096",  # not a conjunction: the evaluator's
    "Cpus + 1 > 4",
    "TARGET.Cpus > 1",
]

values = st.one_of(
    st.none(),  # absent
    st.integers(-5, 10),
    st.integers(2**53 - 2, 2**53 + 2),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.booleans(),
    st.sampled_from(["Unclaimed", "UNCLAIMED", "idle", "Idle", "X86_64", "x86_64", "a", "b", "Ünclaimed", ""]),
    st.just([1, 2]),
    st.sampled_from(["expr:Memory / 2", "expr:undefined", "expr:1/0"]),
)
ATTRS = ["Cpus", "Memory", "State", "Activity", "Arch", "LoadAvg"]


def make_ad(draw_values: list, spell_lower: list[bool]) -> dict:
    ad = {}
    for attr, value, lower in zip(ATTRS, draw_values, spell_lower, strict=True):
        if value is None:
            continue
        if isinstance(value, str) and value.startswith("expr:"):
            value = classad.ExprTree(value[5:])
        ad[attr.lower() if lower else attr] = value
    return ad


@settings(max_examples=examples(250), deadline=None)
@given(st.lists(values, min_size=6, max_size=6), st.lists(st.booleans(), min_size=6, max_size=6))
def test_fast_predicate_agrees_with_the_evaluator(vals, lower):
    ad = make_ad(vals, lower)
    for text in CONSTRAINTS:
        compiled = classad.compile(text)
        assert fast_predicate(compiled)(ad) == compiled.test(ad), (text, ad)


class Counting:
    """A compiled expression that counts how often the general evaluator runs."""

    def __init__(self, text: str):
        self.compiled = classad.compile(text)
        self.node = self.compiled.node
        self.calls = 0

    def test(self, ad: dict, target: dict | None = None, strict: bool = False) -> bool:
        self.calls += 1
        return self.compiled.test(ad, target, strict)


@pytest.mark.parametrize("text", ["Cpus >= 4 && Memory > 4096", 'State == "Unclaimed"', "Cpus =?= 3"])
def test_plain_ads_never_reach_the_general_evaluator(text):
    ads = [{"Cpus": i % 8, "Memory": 1024 * (i % 9), "State": ("Unclaimed", "Claimed")[i % 2]} for i in range(2000)]
    counting = Counting(text)
    fast = fast_predicate(counting)
    assert [a for a in ads if fast(a)] == [a for a in ads if counting.compiled.test(a)]
    assert counting.calls == 0
    # An ad the fast path cannot decide goes to the evaluator, which gives the answer.
    odd = {"cpus": 5, "memory": 9000, "state": "unclaimed"}
    assert fast(odd) == counting.compiled.test(odd) and counting.calls == 1
