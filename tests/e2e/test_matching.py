"""Requirements, analysis, fair share and claim reuse in a real pool."""

from __future__ import annotations

import time

import pytest
from htcondor2 import JobEventLog, JobEventType

from tests.e2e.conftest import STATIC_STARTD, start_standard
from tests.e2e.pool import logged, wait_for

pytestmark = pytest.mark.e2e


def completed(pool, cluster, n):
    hist = pool.history("schedd@s", f"ClusterId == {cluster}")
    return hist if len(hist) >= n else None


def test_requirements_are_honoured_and_analysis_explains_an_unmatchable_job(make_pool):
    pool = start_standard(make_pool(), GRIDBUS_OPSYSANDVER="SpecialOS1")
    special = pool.submit("schedd@s", 12, requirements='TARGET.OpSysAndVer == "SpecialOS1"')
    never = pool.submit("schedd@s", 1, requirements='TARGET.OpSysAndVer =!= undefined && TARGET.Memory >= 100000000')
    hist = wait_for("12 completed jobs", lambda: completed(pool, special, 12), timeout=60)
    assert all(str(j.get("LastRemoteHost")).endswith("@a") for j in hist)
    (job,) = pool.jobs("schedd@s", f"ClusterId == {never}")
    assert job["JobStatus"] == 1
    out = pool.call("negotiator@n", "Analyze", {"Job": job}).outArgs
    assert out["Matching"] == 0 and out["RejectedByJob"] == out["Slots"] >= 5
    assert out["WorstClause"] == "TARGET.Memory >= 100000000"
    assert "no slot matches" in out["Summary"]
    # The 12 jobs may all run on claims reused within one cycle: wait for a later cycle, which must
    # leave the unmatchable job idle too.
    wait_for("a second negotiation cycle", lambda: pool.negotiator_stats().get("NegotiationCycles", 0) >= 2, timeout=30)
    (job,) = pool.jobs("schedd@s", f"ClusterId == {never}")
    assert job["JobStatus"] == 1


def running_by_owner(pool):
    jobs = pool.jobs("schedd@s", "JobStatus == 2", ["Owner"])
    out = {"alice": 0, "bob": 0}
    for j in jobs:
        out[j["Owner"]] = out.get(j["Owner"], 0) + 1
    return out


def sample_shares(pool, seconds):
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idle = pool.jobs("schedd@s", "JobStatus == 1", ["Owner"])
        owners_idle = {j["Owner"] for j in idle}
        if owners_idle != {"alice", "bob"}:
            break  # one owner ran out of idle jobs: no share to keep any more
        counts = running_by_owner(pool)
        if sum(counts.values()) >= 3:
            samples.append(counts)
        time.sleep(0.2)
    return samples


def fair_pool(make_pool, factor=None):
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.wait_serving("collector@c", "negotiator@n", "schedd@s")
    wait_for("the negotiator's ad", pool.negotiator_stats, 30)
    if factor:
        pool.call("negotiator@n", "SetPriorityFactor", {"Name": "bob", "PriorityFactor": factor})
    # Both owners' jobs are queued before the slots appear, so the first cycle sees both.
    a = pool.submit("schedd@s", 100, cmd="/bin/sleep", args="0.3", owner="alice")
    b = pool.submit("schedd@s", 100, cmd="/bin/sleep", args="0.3", owner="bob")
    pool.start("startd", "a", **STATIC_STARTD)
    return pool, a, b


def test_fair_share_two_owners_within_one_slot(make_pool):
    pool, _a, _b = fair_pool(make_pool)
    wait_for("jobs running", lambda: sum(running_by_owner(pool).values()) >= 3, 30)
    samples = sample_shares(pool, 6)
    assert len(samples) >= 5
    assert all(abs(s["alice"] - s["bob"]) <= 1 for s in samples), samples


def test_priority_factor_shifts_the_split(make_pool):
    pool, _a, _b = fair_pool(make_pool, factor=3.0)
    wait_for("jobs running", lambda: sum(running_by_owner(pool).values()) >= 3, 30)
    samples = sample_shares(pool, 6)
    assert len(samples) >= 5
    mean_alice = sum(s["alice"] for s in samples) / len(samples)
    mean_bob = sum(s["bob"] for s in samples) / len(samples)
    assert mean_alice > 2.4 and mean_bob < 1.6, samples  # 3 : 1 with bob's factor of 3
    prios = {p["Name"]: p for p in pool.call("negotiator@n", "GetPriorities").Priorities}
    assert prios["bob"]["PriorityFactor"] == 3.0


def test_claim_reuse_50_jobs_one_negotiation(make_pool, tmp_path):
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "one", GRIDBUS_NUM_CPUS="1", GRIDBUS_NUM_SLOTS="1", GRIDBUS_MEMORY="1024")
    pool.wait_slots(1)
    pool.wait_serving("schedd@s")
    log = tmp_path / "reuse.log"
    started = time.monotonic()
    cluster = pool.submit("schedd@s", 50, log=log)
    hist = wait_for("50 completed jobs", lambda: completed(pool, cluster, 50), timeout=60)
    elapsed = time.monotonic() - started
    assert all(j["ExitCode"] == 0 and j["NumJobStarts"] == 1 for j in hist)
    # The negotiator's ad of a cycle begun after the last job ended (its TotalMatches counts every
    # match up to then): the 50 jobs may end before the ad of the cycle that matched is published.
    done_at = time.time()
    stats = wait_for("the negotiator's ad of a cycle begun after the run", lambda: (s := pool.negotiator_stats()) and
                     s.get("LastNegotiationCycleTime0", 0) > done_at and s, 15)
    assert stats["TotalMatches"] == 1, stats  # one negotiation; the claim ran all 50
    # No activation waits: each job starts in the second the previous one ended.
    logged(log, JobEventType.JOB_TERMINATED, 50)  # the last events follow the history closely
    events = [(e.type, e.proc, e.timestamp) for e in JobEventLog(str(log)).events(0)
              if e.type in (JobEventType.EXECUTE, JobEventType.JOB_TERMINATED)]
    ends = {p: t for kind, p, t in events if kind == JobEventType.JOB_TERMINATED}
    starts = {p: t for kind, p, t in events if kind == JobEventType.EXECUTE}
    assert len(starts) == len(ends) == 50
    order = sorted(starts, key=lambda p: (starts[p], p))
    gaps = [starts[nxt] - ends[prev] for prev, nxt in zip(order, order[1:], strict=False)]
    assert max(gaps) <= 1, gaps
    assert elapsed < 30


def test_dollar_dollar_is_expanded_for_the_slot_the_job_runs_on(pool):
    # HTCondor's match-time substitution: $$(Attr) from the slot's ad (with a default after a
    # colon), $$([expression]) evaluated with the job and the slot; what was looked up is kept in
    # the job as MATCH_<Attr> and MATCH_EXP_<attribute>. A job the slot cannot expand is held.
    out = pool.workdir / "dd.$$(Arch)"
    static = 'regexp("@a$", TARGET.Name)'  # a static slot: its ad in the collector is the one matched
    cluster = pool.submit("schedd@s", 1, cmd="/bin/echo", requirements=static,
                          args="$$(Name) $$(OpSys) mem=$$([ Memory * 2 ]) $$(NoSuchAttr:fallback) $$(DOLLARDOLLAR)",
                          Out=str(out))
    held = pool.submit("schedd@s", 1, cmd="/bin/echo", args="$$(NoSuchAttr)")
    (ad,) = wait_for("the $$ job to complete", lambda: completed(pool, cluster, 1), timeout=60)
    slot = next(a for a in pool.ads("Machine") if a["Name"] == ad["LastRemoteHost"])
    written = pool.workdir / f"dd.{slot['Arch']}"
    assert written.read_text().split() == [slot["Name"], slot["OpSys"], f"mem={slot['Memory'] * 2}", "fallback", "$$"]
    assert ad["MATCH_Name"] == slot["Name"] and ad["MATCH_OpSys"] == slot["OpSys"]
    assert ad["MATCH_EXP_Out"] == str(written)
    assert ad["Arguments"].startswith("$$(Name)")  # the job keeps what was submitted
    (job,) = wait_for("the other job to be held",
                      lambda: pool.jobs("schedd@s", f"ClusterId == {held} && JobStatus == 5"), timeout=60)
    assert job["HoldReason"] == "Cannot expand $$ expression (NoSuchAttr)."
