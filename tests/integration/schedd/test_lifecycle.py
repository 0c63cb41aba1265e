"""A job's life through the shadows' API: events on gridbus.events, the user log, policy, ads."""

from __future__ import annotations

import pika
import pytest

from gridbus import bus, wire
from gridbus.classad import ExprTree
from tests.integration.schedd.conftest import job_ad, wait_for


class Listener:
    """A queue bound to one of gridbus's exchanges, read with basic_get."""

    def __init__(self, amqp_url: str, exchange: str, key: str):
        self.conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
        self.ch = self.conn.channel()
        self.queue = self.ch.queue_declare("", exclusive=True).method.queue
        self.ch.queue_bind(self.queue, exchange, key)
        self.got: list[tuple[str, dict]] = []

    def drain(self) -> list[tuple[str, dict]]:
        while True:
            method, props, body = self.ch.basic_get(self.queue, auto_ack=True)
            if method is None:
                return self.got
            self.got.append((method.routing_key, wire.decode(body, props.content_type)))

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def events(schedd, amqp_url):
    listener = Listener(amqp_url, bus.EVENTS, "job.#")
    yield listener
    listener.close()


def submit(session, **extra) -> int:
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(**extra)})
    assert r.status == 0, r.text
    return r.ClusterId


def test_run_and_exit_write_htcondor_readable_user_log_and_events(schedd, session, events, tmp_path):
    import htcondor2

    c = submit(session, Iwd=str(tmp_path), UserLog="job.log", RequestMemory=64)
    agent = schedd.agent
    schedd.call(agent.state.job_started(c, 0, remote_host="startd@node1", slot="slot1@node1", claim_id="secret"))
    schedd.call(agent.state.job_update(c, 0, {"ImageSize": 2500, "MemoryUsage": 3, "ResidentSetSize": 2400}))
    ad = agent.queue.get(c, 0)
    assert (ad["JobStatus"], ad["RemoteHost"], ad["NumJobStarts"]) == (2, "slot1@node1", 1)
    assert "secret" not in str(ad)
    schedd.call(agent.state.job_exited(c, 0, {"ExitCode": 3, "RemoteUserCpu": 61.0, "RemoteSysCpu": 1.0}))
    assert agent.queue.get(c, 0) is None  # completed: left the queue for the history
    hist = session.call("schedd@s1", "History", {"Constraint": f"ClusterId == {c}"}).Jobs
    assert hist[0]["JobStatus"] == 4 and hist[0]["ExitCode"] == 3 and hist[0]["CompletionDate"] > 0
    assert hist[0]["RemoteUserCpu"] == 61.0 and hist[0]["LastRemoteHost"] == "slot1@node1"

    log = tmp_path / "job.log"
    wait_for(lambda: log.exists() and log.read_text().count("...") == 4, 5, "four events in the user log")
    parsed = list(htcondor2.JobEventLog(str(log)).events(0))
    assert [e.type for e in parsed] == [htcondor2.JobEventType.SUBMIT, htcondor2.JobEventType.EXECUTE,
                                        htcondor2.JobEventType.IMAGE_SIZE, htcondor2.JobEventType.JOB_TERMINATED]
    assert {e.cluster for e in parsed} == {c}
    assert parsed[1]["SlotName"] == "slot1@node1" and parsed[2]["Size"] == 2500
    assert parsed[3]["ReturnValue"] == 3 and parsed[3]["RunRemoteUsage"] == "Usr 0 00:01:01, Sys 0 00:00:01"
    # Byte for byte, as HTCondor's own tests check a log.
    assert "".join(str(e) + "...\n" for e in parsed) == log.read_text()

    got = wait_for(lambda: len(events.drain()) >= 4 and events.got, 5, "four job events")
    keys = [k for k, _ in got]
    assert keys[:4] == ["job.submit.guest", "job.execute.guest", "job.image_size.guest", "job.terminated.guest"]
    assert got[3][1]["ExitCode"] == 3 and got[1][1]["GlobalJobId"] == ad["GlobalJobId"]


def test_hold_release_remove_and_eviction_events_in_the_user_log(schedd, session, events, tmp_path):
    import htcondor2

    c = submit(session, Iwd=str(tmp_path), UserLog=str(tmp_path / "u.log"))
    agent = schedd.agent
    session.call("schedd@s1", "Hold", {"Ids": [f"{c}.0"], "Reason": "checking"}).check()
    ad = agent.queue.get(c, 0)
    assert (ad["HoldReason"], ad["HoldReasonCode"]) == ("checking (by user guest)", 1)
    session.call("schedd@s1", "Release", {"Ids": [f"{c}.0"]}).check()
    assert "HoldReason" not in agent.queue.get(c, 0) and agent.queue.get(c, 0)["JobStatus"] == 1
    schedd.call(agent.state.job_started(c, 0, remote_host="startd@n", slot="slot2@n", claim_id="x"))
    schedd.call(agent.state.job_evicted(c, 0, "the slot was vacated"))
    ad = agent.queue.get(c, 0)
    assert ad["JobStatus"] == 1 and ad["NumJobStarts"] == 1 and "RemoteHost" not in ad
    session.call("schedd@s1", "Remove", {"Ids": [f"{c}.0"]}).check()
    log = tmp_path / "u.log"
    wait_for(lambda: log.exists() and log.read_text().count("...") == 6, 5, "six events")  # written by the shadow
    parsed = list(htcondor2.JobEventLog(str(log)).events(0))
    T = htcondor2.JobEventType
    assert [e.type for e in parsed] == [T.SUBMIT, T.JOB_HELD, T.JOB_RELEASED, T.EXECUTE, T.JOB_EVICTED, T.JOB_ABORTED]
    assert parsed[1]["HoldReason"] == "checking (by user guest)" and parsed[1]["HoldReasonCode"] == 1
    assert parsed[5]["Reason"] == "via gridbus remove (by user guest)"
    assert "".join(str(e) + "...\n" for e in parsed) == log.read_text()
    wait_for(lambda: {k.split(".")[1] for k, _ in events.drain()} >= {"held", "released", "evicted", "aborted"}, 5,
             "held/released/evicted/aborted events")


def test_hold_of_a_running_job_asks_the_shadows_to_stop_it(schedd, session):
    agent = schedd.agent
    stopped = []

    async def stop_running_job(cluster, proc):
        stopped.append((cluster, proc))
        return True

    agent.stop_running_job = stop_running_job
    c = submit(session, Count=1)
    schedd.call(agent.state.job_started(c, 0, remote_host="startd@n", slot="slot1@n", claim_id="x"))
    session.call("schedd@s1", "Hold", {"Ids": [f"{c}.0"]}).check()
    wait_for(lambda: stopped == [(c, 0)], 5, "stop_running_job to be called")
    wait_for(lambda: "RemoteHost" not in agent.queue.get(c, 0), 5, "RemoteHost to be cleared")
    assert agent.queue.get(c, 0)["JobStatus"] == 5
    # The late exit report of the stopped job changes nothing but usage.
    schedd.call(agent.state.job_exited(c, 0, {"ExitBySignal": True, "ExitSignal": 15, "RemoteUserCpu": 2.0}))
    assert agent.queue.get(c, 0)["JobStatus"] == 5


def test_exit_policy_on_exit_hold_max_retries_and_memory(schedd, session, tmp_path):
    import htcondor2

    agent = schedd.agent

    def run_and_exit(c, report):
        schedd.call(agent.state.job_started(c, 0, remote_host="startd@n", slot="slot1@n", claim_id="x"))
        schedd.call(agent.state.job_exited(c, 0, report))
        return agent.queue.get(c, 0)

    held = submit(session, OnExitHold=ExprTree("ExitCode =!= 0"))
    ad = run_and_exit(held, {"ExitCode": 2})
    assert ad["JobStatus"] == 5 and ad["HoldReasonCode"] == 3 and "OnExitHold" in ad["HoldReason"]

    retried = submit(session, JobMaxRetries=2)
    assert run_and_exit(retried, {"ExitCode": 1})["JobStatus"] == 1
    assert run_and_exit(retried, {"ExitCode": 1})["JobStatus"] == 1
    assert run_and_exit(retried, {"ExitCode": 1}) is None  # third failure: done, to the history
    assert session.call("schedd@s1", "GetAd", {"Id": f"{retried}.0"}).JobAd["NumJobCompletions"] == 3

    log = tmp_path / "requeued.log"
    requeued = submit(session, OnExitRemove=ExprTree("ExitCode == 0"), Iwd=str(tmp_path), UserLog=str(log))
    assert run_and_exit(requeued, {"ExitCode": 9})["JobStatus"] == 1
    assert run_and_exit(requeued, {"ExitCode": 0}) is None
    # The first run's exit, requeued by its policy, is logged as HTCondor's shadow logs it: an
    # eviction "terminated and requeued", with how the job exited and why it stays in the queue.
    wait_for(lambda: log.exists() and log.read_text().count("...") == 5, 5, "five events")
    parsed = list(htcondor2.JobEventLog(str(log)).events(0))
    T = htcondor2.JobEventType
    assert [e.type for e in parsed] == [T.SUBMIT, T.EXECUTE, T.JOB_EVICTED, T.EXECUTE, T.JOB_TERMINATED]
    assert parsed[2]["TerminatedAndRequeued"] and parsed[2]["ReturnValue"] == 9
    assert parsed[2]["Reason"] == "The job attribute OnExitRemove expression 'ExitCode == 0' evaluated to FALSE"
    assert "".join(str(e) + "...\n" for e in parsed) == log.read_text()

    big = submit(session, RequestMemory=10)
    ad = run_and_exit(big, {"MemoryExceeded": True, "MemoryUsage": 50})
    assert ad["JobStatus"] == 5 and ad["HoldReasonCode"] == 34 and "memory limit of 10 megabytes" in ad["HoldReason"]


def test_periodic_policy_holds_releases_and_removes(schedd, session):
    agent = schedd.agent
    hold = submit(session, PeriodicHold=ExprTree("JobStatus == 1 && Marker =?= 1"), Marker=1)
    keep = submit(session)
    release = submit(session, JobStatus=5, PeriodicRelease=ExprTree("HoldReasonCode == 15"))
    remove = submit(session, PeriodicRemove=ExprTree("JobPrio < 0"), JobPrio=-1)
    assert schedd.call(_evaluate(agent)) == 3
    assert agent.queue.get(hold, 0)["JobStatus"] == 5 and agent.queue.get(hold, 0)["HoldReasonCode"] == 3
    assert agent.queue.get(release, 0)["JobStatus"] == 1 and agent.queue.get(keep, 0)["JobStatus"] == 1
    assert agent.queue.get(remove, 0) is None
    assert session.call("schedd@s1", "GetAd", {"Id": f"{remove}.0"}).JobAd["JobStatus"] == 3


async def _evaluate(agent):
    return await agent.policy.evaluate_periodic()


def test_scheduler_and_submitter_ads_are_advertised(schedd, session, amqp_url, user_url):
    from gridbus.console import Session

    listener = Listener(amqp_url, bus.ADS, "submitter.#")
    try:
        with Session(user_url("carol-s"), timeout=15) as carol:
            carol.call("schedd@s1", "Submit", {"Ad": job_ad(), "Count": 3}).check()
        c = submit(session)
        session.call("schedd@s1", "Hold", {"Ids": [f"{c}.0"]}).check()

        def latest():
            seen = {}
            for _key, body in listener.drain():
                for ad in body.get("ads", []):
                    seen[ad["Name"]] = ad
            return seen if {"carol-s@s1", "guest@s1"} <= set(seen) and seen["guest@s1"]["HeldJobs"] == 1 else None

        seen = wait_for(latest, 10, "Submitter ads for carol-s and guest")
        carol_ad = seen["carol-s@s1"]
        assert (carol_ad["IdleJobs"], carol_ad["RunningJobs"], carol_ad["HeldJobs"]) == (3, 0, 0)
        assert carol_ad["MyType"] == "Submitter" and carol_ad["ScheddName"] == "s1" and carol_ad["MyAddress"] == "schedd@s1"
    finally:
        listener.close()
    sched = schedd.agent.daemon_ad()
    assert sched["TotalIdleJobs"] == 3 and sched["TotalHeldJobs"] == 1 and sched["NumUsers"] == 2
    assert sched["JobsSubmitted"] == 4 and sched["JobSubmissionRate"] > 0
