"""How a queue found on the broker is judged against what this version declares, and how the
broker's refusal of a declaration is read."""

from __future__ import annotations

from gridbus.topology import (
    FIX_COMMAND,
    Consumers,
    Found,
    QueueSpec,
    current_of_refusal,
    judge,
    refusal,
    unseen_readers,
)

DEAD = QueueSpec("gridbus.dead", True, {"x-max-length": 10000, "x-overflow": "drop-head"})


def test_limits_only_are_adopted_and_a_quorum_queue_serves_where_classic_is_wanted() -> None:
    assert judge(DEAD, None).action == "declare"
    assert judge(DEAD, Found(True, dict(DEAD.arguments))).action == "same"
    assert judge(DEAD, Found(True, {"x-max-length": 5})).action == "adopt"
    verdict = judge(DEAD, Found(True, {"x-queue-type": "quorum"}))
    assert verdict.action == "adopt" and "x-max-length: 10000 wanted, none found" in verdict.differences


def test_a_type_that_cannot_change_in_place_is_migrated_unless_consumed() -> None:
    quorum = QueueSpec("q", True, {"x-queue-type": "quorum"})
    assert judge(quorum, Found(True, {})).action == "migrate"
    assert judge(DEAD, Found(True, {"x-queue-type": "stream"})).action == "migrate"
    assert judge(DEAD, Found(False, dict(DEAD.arguments))).action == "migrate"
    refused = judge(quorum, Found(True, {}, messages=2, consumers=1))
    assert refused.action == "refuse"
    assert refused.sentence == ("queue q exists as durable classic {} but this version needs durable quorum {}, and "
                                f"1 consumer(s) still use it: stop them and run `{FIX_COMMAND}`")


def test_a_refusal_names_the_consumers_and_says_apart_those_gridbus_does_not_own() -> None:
    stream = Found(True, {"x-queue-type": "stream"})
    was = "queue gridbus.dead exists as durable stream {} but this version needs durable classic {x-max-length=10000, "
    own = Consumers(1, (("gridbus schedd@old", "schedd"),))
    assert refusal(DEAD, stream, own) == (f"{was}x-overflow=drop-head}}, and 1 consumer(s) still use it (connection "
                                          f"'gridbus schedd@old' of user schedd): stop them and run `{FIX_COMMAND}`")
    mixed = Consumers(2, (("gridbus schedd@old", "schedd"), ("audit", "ops")))
    assert refusal(DEAD, stream, mixed) == (
        f"{was}x-overflow=drop-head}}, and 1 consumer(s) gridbus does not own read it (connection 'audit' of user ops): "
        f"it is not migrated, which would take its messages from under them; once they have stopped, run `{FIX_COMMAND}`")
    many = Consumers(5, tuple((f"reader {i}", "ops") for i in range(5)))
    assert "(connection 'reader 0' of user ops; connection 'reader 1' of user ops; connection 'reader 2' of user ops; " \
           "and 2 more)" in refusal(DEAD, stream, many)
    # The statistics count one the API does not list to this account: still a consumer.
    assert "2 consumer(s) still use it: stop them" in refusal(DEAD, stream, Consumers(2))
    assert not Consumers().any and Consumers(1).any and Consumers(0, (("a", "b"),)).any
    unknown = unseen_readers(DEAD, stream)
    assert unknown.startswith(was) and "who reads it is not known" in unknown and FIX_COMMAND in unknown


def test_the_brokers_refusals_name_the_current_value() -> None:
    def text(tail: str) -> str:
        return f"PRECONDITION_FAILED - inequivalent arg {tail}"
    assert current_of_refusal(text("'x-max-length' for queue 'q' in vhost 'v': received the value '10000' of type "
                                   "'signedint' but current is none")) == ("x-max-length", None)
    assert current_of_refusal(text("'x-queue-type' for queue 'q' in vhost 'v': received none but current is the "
                                   "value 'stream' of type 'longstr'")) == ("x-queue-type", "stream")
    assert current_of_refusal(text("'x-max-length' for queue 'q' in vhost 'v': received '10000' but current is "
                                   "'50'"), {"x-max-length": 10000}) == ("x-max-length", 50)
    assert current_of_refusal(text("'durable' for queue 'q' in vhost 'v': received 'true' but current is "
                                   "'false'")) == ("durable", False)
    assert current_of_refusal("NOT_FOUND - no queue 'q'") is None
