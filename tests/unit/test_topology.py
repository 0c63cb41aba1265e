"""How a queue found on the broker is judged against what this version declares, and how the
broker's refusal of a declaration is read."""

from __future__ import annotations

from gridbus.topology import FIX_COMMAND, Found, QueueSpec, current_of_refusal, judge

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
