"""Claim leases checked from a heap of deadlines: at every check the startd finds exactly the
claims a walk over all of them would (lease run out, not being ended), however the claims were
renewed, ended or made in between, and the heap stays the size of the live claims."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.claims import Claims
from tests.hypothesis_profiles import examples

# Each step does one thing to the claims, then lets time pass and checks.
actions = st.lists(
    st.tuples(
        st.one_of(
            st.tuples(st.just("claim"), st.sampled_from([0.5, 2.0, 3.0, 2400.0])),
            st.tuples(st.sampled_from(["renew", "end", "ending", "nothing"]), st.integers(0, 50)),
        ),
        st.floats(0, 2.5),
    ),
    max_size=80,
)


def _claims() -> Claims:
    return Claims("startd@t", None, None, None, None, None, spawn=None, ads_changed=None)  # type: ignore[arg-type]


@settings(max_examples=examples(300), deadline=None)
@given(actions)
def test_the_heap_finds_what_a_walk_finds(steps) -> None:
    claims = _claims()
    now = 100.0
    made = 0
    for (kind, arg), gap in steps:
        live = list(claims.by_id.values())
        if kind == "claim":
            made += 1
            c = sl.Claim(id=f"c{made}", slot=None, schedd="schedd@s", lease=arg, owner="u", user="u",  # type: ignore[arg-type]
                         renewed=now)
            claims.by_id[c.id] = c
            claims.watch_lease(c)
        elif kind == "renew" and live:
            live[arg % len(live)].renewed = now
        elif kind == "end" and live:
            c = live[arg % len(live)]
            del claims.by_id[c.id]
            claims._ending.pop(c.id, None)
        elif kind == "ending" and live:
            claims._ending[live[arg % len(live)].id] = None  # type: ignore[assignment]
        now += gap
        walk = {c.id for c in claims.by_id.values() if c.expired(now) and c.id not in claims._ending}
        found = {c.id for c in claims.leases_run_out(now)}
        assert found == walk
        for cid in found:  # the loop ends them: their end takes them out of by_id
            del claims.by_id[cid]
        assert len(claims._deadlines) <= 2 * len(claims.by_id) + 65


def test_a_claim_being_ended_is_looked_at_again_until_it_is_gone() -> None:
    claims = _claims()
    c = sl.Claim(id="c1", slot=None, schedd="schedd@s", lease=2.0, owner="u", user="u", renewed=0.0)  # type: ignore[arg-type]
    claims.by_id[c.id] = c
    claims.watch_lease(c)
    assert [x.id for x in claims.leases_run_out(3.0)] == ["c1"]
    claims._ending["c1"] = None  # type: ignore[assignment]
    assert claims.leases_run_out(5.0) == []
    del claims._ending["c1"]  # its end failed: it is still live, and still due
    assert [x.id for x in claims.leases_run_out(7.0)] == ["c1"]
