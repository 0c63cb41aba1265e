"""A real schedd in this process without a broker, for the schedd's unit tests: its handlers are
called directly, its startds are a recording stand-in."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from gridbus.agent.objects import Call
from gridbus.agents.schedd.agent import Schedd
from gridbus.agents.schedd.owner_shadow import OwnerShadows
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.agents.schedd.shadows import RUNNING_JOB, Claim
from gridbus.agents.startd.accounts import Account
from gridbus.rpc import MethodResult

URL = "amqp://guest:guest@127.0.0.1:1/"  # never dialled
SLOT_AD = {"Name": "slot1@a", "Requirements": True, "Memory": 1024}


class Startds:
    """Answers the schedd's calls to startds with OK, and records them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def call(self, address: str, method: str, args: dict[str, Any], timeout: float = 0) -> MethodResult:
        self.calls.append((address, method, args))
        if method == "ActivateClaims":
            return MethodResult(0, "OK", {"Results": [{"ClaimId": a["ClaimId"], "Status": 0, "Text": "OK"}
                                                      for a in args["Activations"]]})
        return MethodResult(0, "OK", {})


def as_me(owner: str) -> Account:
    """Every owner's shadow runs as the test's own user."""
    return Account("me", os.geteuid(), os.getegid(), (), "/")


def make_schedd(spool: Path, **settings: Any) -> Schedd:
    settings = {"claim_worklife": 1e9, "lease_duration": 600.0, "shadow_call_timeout": 0.5, **settings}
    schedd = Schedd("t", URL, settings=ScheddSettings(spool=spool, **settings), owner_shadows=OwnerShadows(as_me))
    schedd._client = Startds()  # type: ignore[assignment]  # the framework's client, replaced
    return schedd


def call(method: str, user: str = "alice", obj: str = "schedd@t", **args: Any) -> Call:
    return Call(user, obj, method, args, None, False)


def submit(schedd: Schedd, owner: str = "alice", count: int = 1, **attrs: Any) -> int:
    """A cluster straight into the queue (the Submit handler's checks are not what is tested)."""
    cid = schedd.queue.new_cluster_id()
    ad = {"Owner": owner, "ClusterId": cid, "Cmd": "/bin/true", "Requirements": True, "JobUniverse": 5,
          "QDate": int(time.time()), **attrs}
    schedd.queue.add_cluster(cid, owner, ad, None, count)
    return cid


async def run_on_claim(schedd: Schedd, cluster: int, proc: int, claim_id: str = "c1") -> Claim:
    """Job cluster.proc running on a claim of slot1@a, as after its activation."""
    claim = Claim(claim_id, "startd@a", "slot1@a", "alice", dict(SLOT_AD), time.time() + 1e9)
    claim.job, claim.state, claim.jobs_run = (cluster, proc), RUNNING_JOB, 1
    schedd.claims.by_id[claim_id] = claim
    schedd.claims.by_job[(cluster, proc)] = claim
    await schedd.state.job_started(cluster, proc, remote_host="startd@a", slot="slot1@a", claim_id=claim_id)
    schedd.claims.changed(claim)
    await schedd.commits.now()
    return claim


def exit_report(cluster: int, proc: int, claim_id: str = "c1", **extra: Any) -> dict[str, Any]:
    return {"ClaimId": claim_id, "ClusterId": cluster, "ProcId": proc, "Event": "exit", "ExitCode": 0,
            "Time": time.time(), "ClaimEnded": True, **extra}


def event_texts(schedd: Schedd) -> dict[str, str]:
    """The user-log text of the last event of each kind the schedd emits from now on."""
    texts: dict[str, str] = {}
    emit = schedd.events.emit

    def keep(kind: str, ad: dict[str, Any], text: str | None, extra: dict[str, Any] | None = None) -> None:
        texts[kind] = text or ""
        emit(kind, ad, text, extra)

    schedd.events.emit = keep  # type: ignore[method-assign]
    return texts


async def settle(schedd: Schedd) -> None:
    """Let spawned work run (no timers)."""
    for _ in range(5):
        await asyncio.sleep(0)
