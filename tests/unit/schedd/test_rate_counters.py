"""The Scheduler ad's windowed counters (JobsStarted, JobStartRate, ...): the sums kept as counts
come and go equal the counts within the last RATE_WINDOW seconds, to the second."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gridbus.agents.schedd import ads
from gridbus.agents.schedd.ads import COUNTERS, RATE_WINDOW, Counters
from tests.hypothesis_profiles import examples

# Gaps below a second (entries shared) and around the window's edge (entries leaving).
gaps = st.one_of(st.floats(0, 1.5), st.floats(RATE_WINDOW - 2, RATE_WINDOW + 2), st.floats(0, 120))
steps = st.lists(st.tuples(gaps, st.sampled_from(COUNTERS), st.integers(1, 50)), max_size=60)


@settings(max_examples=examples(200), deadline=None)
@given(steps)
def test_the_window_holds_what_was_counted_in_it(steps_taken) -> None:
    clock = [1_000_000.0]
    real = ads.time.time
    ads.time.time = lambda: clock[0]
    try:
        c = Counters()
        seen: list[tuple[float, str, int]] = []
        for gap, what, n in steps_taken:
            clock[0] += gap
            c.count(what, n)
            seen.append((clock[0], what, n))
            got = c.window(clock[0])
            for name in COUNTERS:
                exact = sum(k for t, w, k in seen if w == name and t >= clock[0] - RATE_WINDOW)
                # Counts of one kind within a second share an entry, which leaves with its last.
                loose = sum(k for t, w, k in seen if w == name and t >= clock[0] - RATE_WINDOW - 1.0)
                assert exact <= got[name] <= loose
            assert c.cum == {name: sum(k for _, w, k in seen if w == name) for name in COUNTERS}
        clock[0] += RATE_WINDOW + 2
        assert c.window(clock[0]) == dict.fromkeys(COUNTERS, 0)
    finally:
        ads.time.time = real


def test_a_busy_window_keeps_a_few_entries_a_second() -> None:
    c = Counters()
    for _ in range(10_000):
        c.count("JobsStarted")
    assert len(c._rates) <= 3
    assert c.window(ads.time.time())["JobsStarted"] == 10_000
