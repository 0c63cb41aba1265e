"""The startd's claim and activation methods called directly, without a broker: what one bad entry,
a retried request or a reconfig does to the others."""

from __future__ import annotations

import asyncio
from typing import Any

from gridbus.agent import Call
from gridbus.agents.startd import Startd, StartdSettings
from gridbus.agents.startd.claims import CLAIM_REFUSED
from gridbus.rpc import MethodResult
from gridbus.status import MethodError, Status

URL = "amqp://guest:guest@127.0.0.1:5672/"
SCHEDD = "schedd@s1"
DAEMON = Call("gridbus", "startd@u1", "test", {}, admin=True)


def job(proc: int, **attrs: Any) -> dict[str, Any]:
    return {"ClusterId": 7, "ProcId": proc, "GlobalJobId": f"s1#7.{proc}#1", "Owner": "alice",
            "Cmd": "/bin/sleep", "Arguments": "30", "RequestCpus": 1, "RequestMemory": 64, **attrs}


class Schedd:
    """The JobReports calls a startd makes, answered OK."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    async def call(self, schedd: str, batch: list[dict[str, Any]], timeout: float) -> MethodResult:
        self.reports += batch
        return MethodResult(0, "OK", {"Unknown": []})


def startd(tmp_path, schedd: Schedd | None = None, **kw: Any) -> Startd:
    settings = dict(execute=str(tmp_path / "ex"), base_cgroup="", simulate_jobs=True,
                    overrides={"NUM_CPUS": 3, "MEMORY": 3072, "DISK": 3_000_000})
    s = Startd("u1", URL, settings=StartdSettings(**(settings | kw)))
    s.reporter.call = (schedd or Schedd()).call
    return s


async def settled(what: Any, timeout: float = 5.0) -> Any:
    """Wait on the loop until ``what()`` is truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := what()):
        assert asyncio.get_running_loop().time() < deadline, "condition not met"
        await asyncio.sleep(0.005)
    return value


async def claim_all(s: Startd) -> list[str]:
    claims = []
    for i, ad in enumerate(s.private_ads()):
        out = await s.claims.RequestClaim(DAEMON, ClaimId=ad["ClaimId"], JobAd=job(i), Schedd=SCHEDD, LeaseDuration=60)
        claims.append(out["ClaimId"])
    return claims


def test_one_activation_that_cannot_be_checked_fails_only_itself(tmp_path):
    """A job ad whose Requirements is no expression (a list) is refused with a sentence; the other
    activations of the same call start and are answered as started."""
    s = startd(tmp_path)

    async def scenario() -> dict[str, Any]:
        await s.on_start()
        try:
            claims = await claim_all(s)
            bad = job(1, Requirements=[1, 2])
            out = await s.activation.ActivateClaims(DAEMON, Activations=[
                {"ClaimId": claims[0], "JobAd": job(0)}, {"ClaimId": claims[1], "JobAd": bad},
                {"ClaimId": claims[2], "JobAd": job(2)}])
            running = sorted(j.ad["ProcId"] for j in s.starter.running.values())
            return {"out": out, "running": running}
        finally:
            await s.on_stop()

    got = asyncio.run(scenario())
    statuses = [r["Status"] for r in got["out"]["Results"]]
    assert statuses[0] == 0 and statuses[2] == 0 and statuses[1] != 0
    assert "Requirements" in got["out"]["Results"][1]["Text"]
    assert got["running"] == [0, 2]


def test_one_activation_in_an_answer_that_cannot_be_checked_is_reported_and_the_next_start(tmp_path):
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> list[dict[str, Any]]:
        await s.on_start()
        try:
            claims = await claim_all(s)
            s.activation.in_answer(SCHEDD, [{"ClaimId": claims[0], "JobAd": job(0, Requirements=[1, 2])},
                                       {"ClaimId": claims[1], "JobAd": job(1)}])
            return await settled(lambda: [r for r in schedd.reports if r["Event"] == "activated"][1:] and
                                 [r for r in schedd.reports if r["Event"] == "activated"])
        finally:
            await s.on_stop()

    activated = {r["ProcId"]: r for r in asyncio.run(scenario())}
    assert activated[0]["Status"] != 0 and "Requirements" in activated[0]["Text"]
    assert activated[1]["Status"] == 0


def test_a_retried_request_claim_is_recognised_whatever_the_case_of_global_job_id(tmp_path):
    """ClassAd names are case-insensitive: a retry of RequestClaim for the same job carves no
    second dynamic slot when the job ad spells the attribute globaljobid."""
    s = startd(tmp_path, partitionable=True)
    ad = {k.lower(): v for k, v in job(0).items()}

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        pslot_id = s.private_ads()[0]["ClaimId"]
        first = await s.claims.RequestClaim(DAEMON, ClaimId=pslot_id, JobAd=ad, Schedd=SCHEDD, LeaseDuration=60)
        again = await s.claims.RequestClaim(DAEMON, ClaimId=pslot_id, JobAd=ad, Schedd=SCHEDD, LeaseDuration=60)
        return first, again

    first, again = asyncio.run(scenario())
    assert again["ClaimId"] == first["ClaimId"] and again["Slot"] == first["Slot"]
    assert len(s.claims.by_id) == 1


def test_reconfig_applies_the_default_requests_and_does_not_claim_a_new_slot_layout(tmp_path, monkeypatch, caplog):
    from gridbus.config import Config

    conf = tmp_path / "gridbus.toml"
    conf.write_text(f'EXECUTE = "{tmp_path}/ex"\nNUM_SLOTS = 3\n')
    monkeypatch.setenv("GRIDBUS_CONFIG", str(conf))
    s = startd(tmp_path, partitionable=True)
    s.config = Config.load(daemon="startd")
    conf.write_text(f'EXECUTE = "{tmp_path}/ex"\nNUM_SLOTS = 1\nJOB_DEFAULT_REQUESTMEMORY = 256\n'
                    'SCHEDD_INTERVAL = 17\nALLOW_ADMINISTRATOR = ["ops"]\n')
    no_memory = {k: v for k, v in job(0).items() if k != "RequestMemory"}

    async def scenario() -> tuple[list[str], dict[str, Any]]:
        changed = await s.reconfig()
        pslot_id = s.private_ads()[0]["ClaimId"]
        out = await s.claims.RequestClaim(DAEMON, ClaimId=pslot_id, JobAd=no_memory, Schedd=SCHEDD, LeaseDuration=60)
        return changed, out

    changed, out = asyncio.run(scenario())
    # What the startd applied, and only that: another daemon's knob is none of its business.
    assert sorted(changed) == ["ALLOW_ADMINISTRATOR", "JOB_DEFAULT_REQUESTMEMORY"]
    assert out["SlotAd"]["Memory"] == 256
    # The slot layout is made at the start: the knob is named as waiting for a restart, not as applied.
    assert "NUM_SLOTS" not in changed
    assert any("NUM_SLOTS" in r.getMessage() and "restart" in r.getMessage() for r in caplog.records)


def test_an_administrator_of_the_configuration_may_drain_the_startd(tmp_path):
    """ALLOW_ADMINISTRATOR names who may call the admin methods (Drain, Vacate) of every daemon,
    read from the configuration in effect (a reconfig changes it)."""
    from gridbus.agent import access
    from gridbus.config import Config
    from gridbus.status import MethodError

    s = startd(tmp_path)
    s.config = Config({"ALLOW_ADMINISTRATOR": ["ops"]}, daemon="startd")
    drain = s.dispatcher.schema_methods("startd")["Drain"]
    access.check(s, drain, "startd", s.address, "ops")
    try:
        access.check(s, drain, "startd", s.address, "alice")
    except MethodError as exc:
        assert "alice" in exc.text
    else:
        raise AssertionError("a user who is no administrator drained the startd")


def test_no_job_starts_once_the_startd_shuts_its_starter_down(tmp_path):
    """An activation that comes as the startd stops (one in the answer to the exit reports of the
    jobs it kills) is refused: a job started then would run unwatched."""
    s = startd(tmp_path)

    async def scenario() -> tuple[dict[str, Any], int]:
        await s.on_start()
        claims = await claim_all(s)
        await s.on_stop()
        out = await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claims[0], "JobAd": job(0)}])
        return out, len(s.starter.running)

    out, running = asyncio.run(scenario())
    assert out["Results"][0]["Status"] != 0 and "shutting down" in out["Results"][0]["Text"]
    assert running == 0


def test_the_exits_of_the_jobs_a_shutdown_kills_reach_their_schedd(tmp_path):
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> None:
        await s.on_start()
        claims = await claim_all(s)
        await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": c, "JobAd": job(i)} for i, c in enumerate(claims)])
        await s.on_stop()

    asyncio.run(scenario())
    exits = sorted(r["ProcId"] for r in schedd.reports if r["Event"] == "exit")
    assert exits == [0, 1, 2]


def test_a_job_being_launched_is_stopped_by_deactivate_claim(tmp_path):
    """DeactivateClaim on a claim whose job is still being spawned (an activation in the answer
    to JobReports) stops that job once it runs, and is answered only then."""
    schedd = Schedd()
    s = startd(tmp_path, schedd)

    async def scenario() -> int:
        await s.on_start()
        try:
            claims = await claim_all(s)
            s.activation.in_answer(SCHEDD, [{"ClaimId": claims[0], "JobAd": job(0)}])
            await s.activation.DeactivateClaim(DAEMON, ClaimId=claims[0], Graceful=False)
            await settled(lambda: s.activation.counters["JobsStarted"] == 1)
            return len(s.starter.running)
        finally:
            await s.on_stop()

    assert asyncio.run(scenario()) == 0
    exits = [r for r in schedd.reports if r["Event"] == "exit"]
    assert [(r["ProcId"], r.get("EvictReason")) for r in exits] == [(0, "deactivate")]


def test_the_exit_of_a_job_whose_claim_ended_is_retried_until_its_schedd_answers(tmp_path):
    """A job that ends on a retiring claim (a graceful drain) ends the claim at once; if the call
    carrying its exit report goes unanswered (a schedd restarting), the report is sent again, not
    dropped with the claim: without it the schedd would run the finished job again."""

    class AwaySchedd(Schedd):
        def __init__(self) -> None:
            super().__init__()
            self.refused_exits = 0

        async def call(self, schedd: str, batch: list[dict[str, Any]], timeout: float) -> MethodResult:
            if any(r["Event"] == "exit" for r in batch) and not self.refused_exits:
                self.refused_exits += 1
                raise TimeoutError("JobReports: no answer (the schedd restarts)")
            return await super().call(schedd, batch, timeout)

    schedd = AwaySchedd()
    s = startd(tmp_path, schedd, report_retry=0.05)

    async def scenario() -> list[dict[str, Any]]:
        await s.on_start()
        try:
            claims = await claim_all(s)
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claims[0], "JobAd": job(0, Arguments="0.05")}])
            await s.claims.Drain(DAEMON, HowFast="graceful", OnCompletion="nothing", Reason="maintenance")
            await settled(lambda: not s.claims.by_id)  # the job ended, and its retired claim with it
            return await settled(lambda: [r for r in schedd.reports if r["Event"] == "exit"], timeout=3)
        finally:
            await s.on_stop()

    (exit_report,) = asyncio.run(scenario())
    assert schedd.refused_exits == 1
    assert exit_report["ProcId"] == 0 and exit_report["ExitCode"] == 0 and exit_report["ClaimEnded"] is True


def test_a_retried_request_claim_for_a_claim_being_ended_is_refused(tmp_path, monkeypatch):
    """RequestClaim again (its first answer lost) while the startd ends that claim (a release
    waiting for the claim's job to die) is told so, not granted a claim about to go."""
    s = startd(tmp_path)
    dying = asyncio.Event()
    stop_and_wait = s.starter.stop_and_wait

    async def slow_stop(job: Any, graceful: bool, reason: str) -> None:
        await dying.wait()  # a job that takes its time to die (KILLING_TIMEOUT)
        await stop_and_wait(job, graceful, reason)

    monkeypatch.setattr(s.starter, "stop_and_wait", slow_stop)

    async def scenario() -> Any:
        await s.on_start()
        try:
            ad = s.private_ads()[0]
            out = await s.claims.RequestClaim(DAEMON, ClaimId=ad["ClaimId"], JobAd=job(0), Schedd=SCHEDD, LeaseDuration=60)
            claim = s.claims.by_id[out["ClaimId"]]
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claim.id, "JobAd": job(0)}])
            release = asyncio.ensure_future(s.claims.ReleaseClaim(DAEMON, ClaimId=claim.id))
            await settled(lambda: s.claims.is_ending(claim))
            try:
                return await s.claims.RequestClaim(DAEMON, ClaimId=ad["ClaimId"], JobAd=job(0), Schedd=SCHEDD, LeaseDuration=60)
            except MethodError as exc:
                return exc
            finally:
                dying.set()
                await release
        finally:
            await s.on_stop()

    got = asyncio.run(scenario())
    assert isinstance(got, MethodError) and got.status == Status.USER + CLAIM_REFUSED, got
    assert "ended" in got.text


def test_a_job_still_being_spawned_when_the_startd_stops_is_stopped_with_the_others(tmp_path, monkeypatch):
    """A launch in flight when the startd stops (a fork/exec on a spawner thread) ends in a job
    the shutdown stops too, not one left running unwatched after the startd is gone."""
    s = startd(tmp_path)
    spawned = asyncio.Event()
    start_async = s.starter.start_async

    async def slow_start(*args: Any) -> Any:
        await spawned.wait()
        return await start_async(*args)

    monkeypatch.setattr(s.starter, "start_async", slow_start)

    async def scenario() -> int:
        await s.on_start()
        claims = await claim_all(s)
        s.activation.in_answer(SCHEDD, [{"ClaimId": claims[0], "JobAd": job(0)}])
        await asyncio.sleep(0)  # the launch is under way
        stopping = asyncio.ensure_future(s.on_stop())
        await settled(lambda: s.activation.shutting_down)
        spawned.set()  # the spawn ends once the startd is stopping
        await stopping
        await settled(lambda: s.activation.counters["JobsStarted"] == 1)
        return len(s.starter.running)

    assert asyncio.run(scenario()) == 0


def test_a_slot_whose_job_outlives_its_kill_stays_preempting_until_the_job_is_gone(tmp_path, monkeypatch):
    """Ending a claim whose job does not die (a process stuck in the kernel past SIGKILL) leaves the
    slot Preempting, not free for a second job beside the first; it is freed when the job is gone."""
    from gridbus.agents.startd import claims as claims_module

    monkeypatch.setattr(claims_module, "KILL_GRACE", 0.05)
    s = startd(tmp_path, killing_timeout=0.05)
    stop_and_wait = s.starter.stop_and_wait

    async def stuck(job: Any, graceful: bool, reason: str) -> None:
        await asyncio.Event().wait()  # SIGKILL sent; the process never goes

    monkeypatch.setattr(s.starter, "stop_and_wait", stuck)

    async def scenario() -> tuple[str, str, str]:
        await s.on_start()
        try:
            claims = await claim_all(s)
            await s.activation.ActivateClaims(DAEMON, Activations=[{"ClaimId": claims[0], "JobAd": job(0)}])
            claim = s.claims.by_id[claims[0]]
            running = claim.job
            await s.claims.ReleaseClaim(DAEMON, ClaimId=claims[0])
            after_release = claim.slot.state
            in_private = ",".join(a["Name"] for a in s.private_ads())
            await stop_and_wait(running, False, "release")  # at last the job is gone
            await settled(lambda: claims[0] not in s.claims.by_id)
            return after_release, in_private, claim.slot.state
        finally:
            await s.on_stop()

    after_release, in_private, at_last = asyncio.run(scenario())
    assert after_release == "Preempting"
    assert "slot1@u1" not in in_private  # its claim id is not handed out while the job lives
    assert at_last == "Unclaimed"
