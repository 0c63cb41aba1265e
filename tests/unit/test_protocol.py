"""Which protocol versions a daemon takes: its own major version, the previous minor version and
later; a message without the header is gridbus 0.1.0's (protocol 0.1). A caller reads answers of its own
major version; another major version's answer is the call's error, with a sentence."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from gridbus import protocol, wire
from gridbus.agent.client import AsyncClient
from gridbus.console.session import Session
from gridbus.rpc import Reply, answer_of
from gridbus.status import Status


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


def test_an_answer_of_its_own_major_version_is_read_and_another_majors_is_an_error_with_a_sentence() -> None:
    major, minor = protocol.VERSION
    assert protocol.answer_refusal(protocol.headers()) is None
    assert protocol.answer_refusal({}) is None  # gridbus 0.1.0 answered without the header
    assert protocol.answer_refusal({protocol.HEADER: f"{major}.{minor + 5}"}) is None
    assert protocol.answer_refusal({protocol.HEADER: f"{major}.0".encode()}) is None  # an older minor only lacks
    assert protocol.answer_refusal({protocol.HEADER: f"{major + 1}.0"}, "schedd@s") == (
        f"answer from schedd@s not read: gridbus protocol {major + 1}.0, another major version than this "
        f"caller's {major}.{minor} (its answer may mean something else): upgrade this caller")
    assert "is not a version" in str(protocol.answer_refusal({protocol.HEADER: b"x"}))


def test_a_caller_reads_an_answer_of_another_major_version_as_the_calls_error_not_its_body() -> None:
    major, _ = protocol.VERSION
    newer = {protocol.HEADER: f"{major + 1}.0"}
    # A body the caller could decode (and would misread), and one it could not: both end the call
    # with the same sentence, neither is decoded.
    for body in (wire.encode({"status": 0, "text": "OK", "out": {"ClusterId": 7}}), b"\xc1 not msgpack"):
        reply = Reply()
        reply.add(answer_of(body, wire.MSGPACK, newer, "schedd@s"))
        result = reply.result()
        assert reply.done and result.status == Status.EXCEPTION and result.outArgs == {}
        assert result.text.startswith(f"answer from schedd@s not read: gridbus protocol {major + 1}.0")
    ok = Reply()
    ok.add(answer_of(wire.encode({"status": 0, "out": {"ClusterId": 7}}), wire.MSGPACK, protocol.headers(), "s"))
    assert ok.done and ok.result().ClusterId == 7
    garbled = Reply()
    garbled.add(answer_of(b"\xc1", wire.MSGPACK, protocol.headers(), "s"))
    assert garbled.status == Status.EXCEPTION and garbled.text.startswith("garbled reply")


def test_both_clients_end_a_call_on_an_answer_of_another_major_version() -> None:
    major, _ = protocol.VERSION
    body = wire.encode({"status": 0, "text": "OK", "out": {"x": 1}})
    newer = {protocol.HEADER: f"{major + 1}.0"}

    async def asyncio_client() -> Reply:
        client = AsyncClient(channel=None, user=None, app_id="test")  # type: ignore[arg-type]
        reply, done = Reply(), asyncio.get_running_loop().create_future()
        client._pending["c1"] = (reply, done)
        message = SimpleNamespace(correlation_id="c1", body=body, content_type=wire.MSGPACK, headers=newer,
                                  app_id="schedd@s")
        await client._on_reply(message)  # type: ignore[arg-type]
        assert done.done()
        return reply

    for reply in (asyncio.run(asyncio_client()), _console_reply(body, newer)):
        assert reply.done and reply.status == Status.EXCEPTION and "gridbus protocol" in reply.text


def _console_reply(body: bytes, headers: dict[str, str]) -> Reply:
    session = Session()
    session._pending["c1"] = {}
    props = SimpleNamespace(correlation_id="c1", content_type=wire.MSGPACK, headers=headers, app_id="schedd@s")
    session._on_reply(None, None, props, body)
    return session._pending["c1"]["schedd@s"]
