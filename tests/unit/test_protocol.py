"""Which protocol versions a daemon takes: its own major version, the previous minor version and
later; a message without the header is gridbus 0.1.0's (protocol 0.1)."""

from __future__ import annotations

from gridbus import protocol


def test_this_and_the_previous_minor_version_are_taken_and_others_refused_with_a_sentence() -> None:
    major, minor = protocol.VERSION
    assert protocol.headers({"a": 1}) == {protocol.HEADER: f"{major}.{minor}", "a": 1}
    assert protocol.refusal(protocol.headers()) is None
    assert protocol.refusal({protocol.HEADER: f"{major}.{minor - 1}"}) is None
    assert protocol.refusal({protocol.HEADER: f"{major}.{minor + 3}".encode()}) is None  # a newer minor only adds
    assert protocol.of(None) == protocol.WITHOUT_HEADER == (0, 1)
    assert protocol.refusal({}) is None  # gridbus 0.1.0, the previous minor version
    assert protocol.refusal({protocol.HEADER: f"{major + 1}.0"}, "startd@x") == (
        f"message from startd@x refused: gridbus protocol {major + 1}.0, but this daemon speaks {major}.{minor} and "
        f"takes {major}.{minor - 1} and later of major version {major}: upgrade the sender")
    assert "is not a version" in str(protocol.refusal({protocol.HEADER: "new"}))
