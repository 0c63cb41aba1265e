"""Whole negotiation cycles over a simulated pool: fair share, rounds, request paging, limits."""

from __future__ import annotations

import asyncio

from gridbus import bus, wire
from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.collector_ads import AWAIT_CYCLES
from gridbus.agents.negotiator.simulate import SimClient, SimSchedd, job_ads, machine_ads


def negotiator(tmp_path, schedds, **kw):
    neg = Negotiator("test", "amqp://guest:guest@127.0.0.1:5672/", spool=tmp_path, **kw)
    neg._client = SimClient(schedds)  # the cycle's schedd calls go to the simulated schedds
    return neg


def cycle(neg, machines, schedds):
    ads = [a for s in schedds for a in s.submitter_ads()]
    return asyncio.run(neg.cycle.run(machines, ads))


def owners_of(schedd):
    out = {}
    for m in schedd.matched:
        owner = "alice" if m["Job"][0] < 1000 else "bob"
        out[owner] = out.get(owner, 0) + 1
    return out


def test_equal_priorities_split_the_pool_evenly(tmp_path):
    s = SimSchedd("s1", {"alice": job_ads("alice", 1, 100), "bob": job_ads("bob", 1, 100, first_cluster=1000)})
    neg = negotiator(tmp_path, [s])
    stats = cycle(neg, machine_ads(4, kinds=1, seed=3), [s])
    assert stats.matches == 4 and owners_of(s) == {"alice": 2, "bob": 2}
    assert stats.rejections == {"insufficient priority": 196}


def test_priority_factor_shifts_the_split(tmp_path):
    s = SimSchedd("s1", {"alice": job_ads("alice", 1, 100), "bob": job_ads("bob", 1, 100, first_cluster=1000)})
    neg = negotiator(tmp_path, [s])
    neg.accountant.set_factor("bob", 3.0)
    cycle(neg, machine_ads(4, kinds=1, seed=3), [s])
    assert owners_of(s) == {"alice": 3, "bob": 1}


def test_leftover_slots_go_to_whoever_still_wants_them(tmp_path):
    s = SimSchedd("s1", {"alice": job_ads("alice", 1, 1), "bob": job_ads("bob", 1, 50, first_cluster=1000)})
    neg = negotiator(tmp_path, [s])
    stats = cycle(neg, machine_ads(10, kinds=1), [s])
    assert owners_of(s) == {"alice": 1, "bob": 9} and stats.rounds >= 2


def test_requests_are_paged_many_per_round_trip(tmp_path):
    s = SimSchedd("s1", {"alice": job_ads("alice", 45, 1)})
    neg = negotiator(tmp_path, [s], request_list_size=20)
    stats = cycle(neg, machine_ads(100, kinds=3), [s])
    assert stats.matches == 45 and stats.requests == 45
    assert s.calls["GetResourceRequests"] == 3  # 20 + 20 + 5
    assert s.calls["Match"] == 3  # one Match call per batch
    assert len({m["ClaimId"] for m in s.matched}) == 45
    # A match names its slot; the slot's ad comes with the startd's answer to RequestClaim.
    assert all(set(m) - {"Job"} == {"AutoClusterId", "ClaimId", "Slot", "Startd"} for m in s.matched)  # Job: the simulator's


def test_matched_slots_stay_out_until_re_advertised(tmp_path):
    s = SimSchedd("s1", {"alice": job_ads("alice", 1, 10)})
    neg = negotiator(tmp_path, [s])
    machines = machine_ads(4, kinds=1)
    assert cycle(neg, machines, [s]).matches == 4
    assert cycle(neg, machines, [s]).matches == 0  # same ads, same sequence numbers: held back
    fresh = [{**m, "UpdateSequenceNumber": 2} for m in machines]
    assert cycle(neg, fresh, [s]).matches == 4


def test_concurrency_limits_cap_matches(tmp_path):
    jobs = job_ads("alice", 1, 10)
    for j in jobs:
        j["ConcurrencyLimits"] = "license"
    s = SimSchedd("s1", {"alice": jobs})
    neg = negotiator(tmp_path, [s], limits={"license": 3})
    stats = cycle(neg, machine_ads(10, kinds=1), [s])
    assert stats.matches == 3 and stats.rejections == {"concurrency limit reached": 7}


def test_usage_is_charged_from_claimed_slots_and_persisted(tmp_path):
    s = SimSchedd("s1", {})
    # A half-life long beside the test's own run time: the real seconds between the two cycles
    # (long on a loaded machine) must not count as a fifth of a half-life.
    neg = negotiator(tmp_path, [s], halflife=1000.0)
    claimed = [{**m, "State": "Claimed", "RemoteOwner": "alice@s1"} for m in machine_ads(3, kinds=1)]
    cycle(neg, claimed, [s])
    neg.accountant.last_update -= 1000.0  # one half-life ago
    cycle(neg, claimed, [s])
    rec = neg.accountant.user("alice")
    assert rec.ResourcesUsed == 3 and 1.6 < rec.Priority < 1.8 and rec.AccumulatedUsage > 2.9
    again = Negotiator("test", "amqp://guest:guest@127.0.0.1:5672/", spool=tmp_path)
    assert again.accountant.user("alice").Priority == rec.Priority


def test_partitionable_slots_serve_several_requests(tmp_path):
    s = SimSchedd("s1", {"alice": job_ads("alice", 2, 10)})
    neg = negotiator(tmp_path, [s])
    stats = cycle(neg, machine_ads(0, partitionable=1), [s])
    assert stats.matches == 8  # 8 cpus, one per job
    assert {m["Slot"] for m in s.matched} == {"slot1@big0.sim"}


class _Message:
    """What the negotiator reads of an ad message on gridbus.ads."""

    def __init__(self, mtype: str, body: dict):
        self.type, self.body, self.content_type = mtype, wire.encode(body), wire.MSGPACK


def test_a_submitter_back_with_fewer_idle_jobs_than_before_wakes_a_cycle(tmp_path):
    neg = negotiator(tmp_path, [])

    async def woken_by(*messages: _Message) -> bool:
        neg._wake = asyncio.Event()
        for m in messages:
            await neg.submitter_ads.on_message(m)
        return neg._wake.is_set()

    def ad(idle: int) -> _Message:
        return _Message(bus.T_AD, {"ads": [{"MyType": "Submitter", "Name": "alice@schedd@h", "IdleJobs": idle}]})

    gone = _Message(bus.T_INVALIDATE, {"mytype": "Submitter", "names": ["alice@schedd@h"]})
    assert asyncio.run(woken_by(ad(3)))
    assert not asyncio.run(woken_by(ad(1)))  # fewer idle jobs: nothing new to match
    # A cluster of 3 ran and finished between two updates (the schedd invalidates the submitter,
    # never advertising 0 idle); the next cluster, of 2, must wake a cycle.
    assert asyncio.run(woken_by(ad(3)))
    assert asyncio.run(woken_by(gone, ad(2)))


def test_idle_jobs_that_arrived_as_many_others_started_wake_a_cycle(tmp_path):
    """A DAG's next node submitted while its last ones started between two Submitter ads: the
    Idle count did not grow (2, then 1), but a job arrived (IdleJobsArrived 2, then 3); without a
    wake it waited a whole NEGOTIATOR_INTERVAL."""
    neg = negotiator(tmp_path, [])

    async def woken_by(idle: int, arrived: int) -> bool:
        neg._wake = asyncio.Event()
        await neg.submitter_ads.on_message(_Message(bus.T_AD, {"ads": [
            {"MyType": "Submitter", "Name": "alice@schedd@h", "IdleJobs": idle, "IdleJobsArrived": arrived}]}))
        return neg._wake.is_set()

    assert asyncio.run(woken_by(2, 2))
    assert asyncio.run(woken_by(1, 3))  # two started, one arrived
    assert not asyncio.run(woken_by(1, 3))  # the same again: nothing new
    assert not asyncio.run(woken_by(0, 3))
    assert not asyncio.run(woken_by(0, 4))  # arrived and started between two ads: nothing left to match
    assert asyncio.run(woken_by(1, 1))  # a restarted schedd counts from 0 again (idle grew: 0, 1)...
    assert not asyncio.run(woken_by(1, 1))
    assert asyncio.run(woken_by(1, 2))  # ...and its next arrival wakes a cycle


def test_no_free_slot_asks_no_schedd_for_requests(tmp_path):
    """A pool whose every slot is claimed (or matched, not yet re-advertised): the cycle does not
    prefetch resource requests from schedds busy with their claims."""
    s = SimSchedd("s1", {"alice": job_ads("alice", 3, 10)})
    neg = negotiator(tmp_path, [s])
    machines = machine_ads(5, kinds=1, seed=3)
    assert cycle(neg, machines, [s]).matches == 5 and s.calls["GetResourceRequests"] == 1
    stats = cycle(neg, machines, [s])  # the same ads again: every slot is still pending
    assert stats.matches == 0 and stats.slots == 0
    assert s.calls["GetResourceRequests"] == 1


def test_a_cycle_that_missed_the_submitter_ad_that_woke_it_looks_again(tmp_path):
    """The collector may answer a woken cycle's Query before it has ingested the Submitter ad
    that woke it (its ads and its queries come on different queues): the negotiator wakes
    again until it sees that ad or a newer one, for AWAIT_CYCLES cycles at most. Without
    this, the new jobs waited for NEGOTIATOR_INTERVAL."""
    s = SimSchedd("s1", {"alice": job_ads("alice", 3, 10)})
    neg = negotiator(tmp_path, [s])
    machines = machine_ads(5, kinds=1, seed=3)
    woke = [{**a, "DaemonStartTime": 100, "UpdateSequenceNumber": 7} for a in s.submitter_ads()]
    older = [{**a, "UpdateSequenceNumber": 6} for a in woke]
    newer = [{**a, "UpdateSequenceNumber": 8} for a in woke]

    def wakes(answers: list[list[dict]]) -> list[bool]:
        async def query(types: list[str], private: bool) -> list[dict]:
            return machines if types == ["Machine"] else answers.pop(0)

        async def main() -> list[bool]:
            neg.collector.query = query
            neg._wake = asyncio.Event()
            await neg.submitter_ads.on_message(_Message(bus.T_AD, {"ads": woke}))
            out = []
            while answers:
                neg._wake.clear()
                await neg.negotiate()
                out.append(neg._wake.is_set())
            return out

        neg.submitter_ads.idle_seen.clear()
        return asyncio.run(main())

    assert wakes([[], older, newer]) == [True, True, False]
    assert wakes([woke]) == [False]
    n = AWAIT_CYCLES
    assert wakes([[] for _ in range(n)]) == [True] * (n - 1) + [False]
