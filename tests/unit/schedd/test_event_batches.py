"""Job events batched per routing key without reordering any job's events (jobevents.batches)."""

from __future__ import annotations

import random

from gridbus.agents.schedd.jobevents import MAX_BATCH, batches


def ev(event: str, cluster: int, proc: int, owner: str = "alice") -> tuple[str, str, dict]:
    return (event, owner, {"ClusterId": cluster, "ProcId": proc, "Owner": owner})


def flatten(groups):
    return [(event, owner, body) for event, owner, bodies in groups for body in bodies]


def test_same_key_events_share_one_message_and_lone_ones_stay_alone():
    items = [ev("terminated", 1, 0), ev("execute", 1, 1), ev("terminated", 1, 2), ev("execute", 1, 3),
             ev("terminated", 1, 4, owner="bob")]
    groups = batches(items)
    assert [(e, o, [b["ProcId"] for b in bs]) for e, o, bs in groups] == [
        ("terminated", "alice", [0, 2]), ("execute", "alice", [1, 3]), ("terminated", "bob", [4])]


def test_a_job_started_and_ended_in_one_batch_keeps_execute_before_terminated():
    items = [ev("terminated", 1, 0), ev("execute", 1, 5), ev("terminated", 1, 5)]
    groups = batches(items)
    order = [(e, b["ProcId"]) for e, _o, b in flatten(groups)]
    assert order.index(("execute", 5)) < order.index(("terminated", 5))
    assert len(groups) == 3  # terminated 5 cannot join the first group, which goes out before execute 5


def test_submit_is_alone_and_precedes_its_cluster_events():
    items = [ev("execute", 1, 0), ("submit", "alice", {"ClusterId": 2, "ProcId": 0, "ProcIds": [0, 1]}),
             ev("execute", 2, 0), ev("execute", 1, 1)]
    groups = batches(items)
    assert [(e, [b["ClusterId"] for b in bs]) for e, _o, bs in groups] == [
        ("execute", [1]), ("submit", [2]), ("execute", [2, 1])]


def test_random_streams_keep_per_job_order_and_lose_nothing():
    rng = random.Random(7)
    for _ in range(200):
        items = []
        for _ in range(rng.randint(1, 60)):
            items.append(ev(rng.choice(["execute", "terminated", "held", "evicted"]), rng.randint(1, 3),
                            rng.randint(0, 4), rng.choice(["alice", "bob"])))
        out = flatten(batches(items))
        assert sorted(map(repr, out)) == sorted(map(repr, items))
        for job in {(b["ClusterId"], b["ProcId"]) for _e, _o, b in items}:
            assert [x for x in items if (x[2]["ClusterId"], x[2]["ProcId"]) == job] == \
                   [x for x in out if (x[2]["ClusterId"], x[2]["ProcId"]) == job]


def test_a_batch_holds_at_most_max_batch_events():
    groups = batches([ev("terminated", 1, p) for p in range(MAX_BATCH + 3)])
    assert [len(bs) for _e, _o, bs in groups] == [MAX_BATCH, 3]
