"""Attribute names in any case on plain-dict ads (gridbus/attrs.py), without a broker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gridbus.attrs import Spellings
from tests.hypothesis_profiles import examples

NAMES = ("OnExitHold", "OnExitRemove", "ExitCode", "JobMaxRetries")


def _reference(ad: dict, names: tuple[str, ...]) -> dict:
    """The plain algorithm: every key renamed to the name it spells, the name's own spelling
    winning where both are given."""
    by_lower = {n.lower(): n for n in names}
    out: dict = {}
    for key, value in ad.items():
        name = by_lower.get(key.lower(), key)
        if name in out and name != key:
            continue
        out[name] = value
    return out


def _recased(name: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if f else c for c, f in zip(name, flips[:len(name)] + [False] * (len(name) - len(flips)), strict=True))


keys = st.one_of(
    st.builds(_recased, st.sampled_from(NAMES), st.lists(st.booleans(), max_size=14)),
    st.sampled_from(("Cmd", "cmd", "Owner", "ExitBySignal", "exitcodeX", "OnExit")),
)
ads = st.dictionaries(keys, st.integers(), max_size=8)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(ads, min_size=1, max_size=6))
def test_spelled_equals_the_plain_rename_whatever_the_ads_seen_before(seq):
    """One Spellings across many ads (its memory of other keys filled by the earlier ones)
    answers each as the plain rename does; fails if a remembered key hid a spelling."""
    sp = Spellings(NAMES)
    for ad in seq:
        assert dict(sp.spelled(ad)) == _reference(ad, NAMES)
        assert list(sp.spelled(ad)) == list(_reference(ad, NAMES))  # the order of the keys kept too


def test_an_ad_spelling_every_name_as_given_is_returned_itself_not_copied():
    sp = Spellings(NAMES)
    ad = {"OnExitHold": False, "Cmd": "/bin/true", "Owner": "alice"}
    assert sp.spelled(ad) is ad
    assert sp.spelled(ad) is ad  # the other keys now remembered
    odd = {"onexithold": True, "Cmd": "/bin/true"}
    assert sp.spelled(odd) == {"OnExitHold": True, "Cmd": "/bin/true"} and "onexithold" in odd


def test_the_memory_of_other_keys_is_bounded():
    sp = Spellings(NAMES)
    sp.KNOWN_MAX = 50
    for i in range(500):
        assert sp.spelled({f"Attr{i}": i, "exitcode": 1}) == {f"Attr{i}": i, "ExitCode": 1}
    assert len(sp._others) <= 50
