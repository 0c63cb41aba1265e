"""Decoded expressions are shared: every ad that carries the same expression text holds one
ExprTree, so a daemon holding many ads of a few distinct expressions does not hold (and walk, in
its garbage collector) one object per ad and attribute."""

from __future__ import annotations

import gc

from gridbus import wire
from gridbus.classad import ClassAd, ExprTree


def _slot_ads(n: int) -> list[dict]:
    return [{"Name": f"slot{i}@sim", "Memory": 1024 + i, "Requirements": ExprTree("START && TARGET.RequestMemory <= MY.Memory"),
             "Start": ExprTree("true")} for i in range(n)]


def test_every_decoded_ad_holds_the_same_expression_object():
    for ctype in (wire.MSGPACK, wire.JSON):
        first = wire.decode(wire.encode(_slot_ads(3), ctype), ctype)
        again = wire.decode(wire.encode(_slot_ads(2), ctype), ctype)
        reqs = {id(ad["Requirements"]) for ad in first + again}
        assert len(reqs) == 1, ctype
        assert first[0]["Start"] is again[1]["Start"]


def test_a_shared_expression_evaluates_against_each_ad_on_its_own():
    ads = wire.decode(wire.encode(_slot_ads(2)))  # Memory 1024 and 1025, one Requirements object
    assert ads[0]["Requirements"] is ads[1]["Requirements"]
    job = ClassAd({"RequestMemory": 1025})
    fits = [ad["Requirements"].eval(ClassAd({**ad, "START": True}), job) for ad in ads]
    assert fits == [False, True]


def test_decoding_many_ads_makes_no_expression_object_per_ad():
    body = wire.encode(_slot_ads(2000))
    # A full collection leaves the youngest generation empty, and with the collector off until the
    # count, every object the decoding made and left alive is there: counted without walking the
    # whole heap (which, in a session that has imported every test, took seconds).
    gc.collect()
    gc.disable()
    try:
        ads = wire.decode(body)
        made = sum(1 for o in gc.get_objects(generation=0) if type(o) is ExprTree)
    finally:
        gc.enable()
    assert len(ads) == 2000
    assert made <= 2  # the two distinct texts, at most
