"""classad.Value is classad2's IntEnum, and the wire codec still never sends it as an integer."""

import enum

import classad2
import pytest

from gridbus import classad, wire
from gridbus.classad.values import is_number
from gridbus.jobstatus import JobStatus


def test_value_members_equal_classad2_numbers():
    for member in classad2.Value:
        ours = classad.Value[member.name]
        assert ours == member == int(member)
        assert isinstance(ours, int) and str(ours) == str(member)
    assert classad.Value.Undefined == 2 and classad.Value.Error == 1
    assert classad.ExprTree("foo").eval() == 2  # what classad2's tutorial prints


@pytest.mark.parametrize("ctype", [wire.MSGPACK, wire.JSON])
def test_codec_keeps_value_apart_from_integers(ctype):
    body = {
        "u": classad.Value.Undefined,
        "two": 2,
        "nested": [classad.Value.Error, {"x": classad.Value.Undefined}],
        "ad": classad.ClassAd({"a": classad.Value.Undefined, "b": 2}),
        "status": JobStatus.RUNNING,  # another IntEnum travels as its number
    }
    out = wire.decode(wire.encode(body, ctype), ctype)
    assert out["u"] is classad.Value.Undefined
    assert out["two"] == 2 and type(out["two"]) is int
    assert out["nested"][0] is classad.Value.Error and out["nested"][1]["x"] is classad.Value.Undefined
    assert out["ad"]["a"] is classad.Value.Undefined and type(out["ad"]["b"]) is int
    assert out["status"] == 2 and type(out["status"]) is int


@pytest.mark.parametrize("ctype", [wire.MSGPACK, wire.JSON])
def test_codec_sends_plain_values_of_enum_subclasses(ctype):
    class Colour(str, enum.Enum):  # noqa: UP042 - a str mixin, whose str() is not its value
        red = "r"

    out = wire.decode(wire.encode({"c": Colour.red, "t": (1, 2)}, ctype), ctype)
    assert out == {"c": "r", "t": [1, 2]}


def test_is_number_refuses_value_members_and_bools():
    assert is_number(2) and is_number(2.5)
    assert not is_number(classad.Value.Undefined)
    assert not is_number(True)
    assert not is_number("2")


def test_undefined_is_not_taken_for_two_by_the_evaluator():
    ad = classad.ClassAd({"x": classad.Value.Undefined, "plus": classad.ExprTree("x + 1"),
                          "same": classad.ExprTree("x =?= 2")})
    assert ad.eval("plus") is classad.Value.Undefined
    assert ad.eval("same") is False
    assert classad.ClassAd({"x": 2}).eval("x") == 2
