"""A test schedd: the schedd's side of "Claiming and running" (docs/protocols.md), no queue.

It serves JobReports (recording every report, answering Unknown for claims it dropped), claims
and activates slots on request (``Run``), and keeps its claims alive with Alive every lease/3,
dropping a claim when the startd answers it unknown, or when no Alive was answered for a lease.
Runs in a thread (`AgentThread`) or as a process (``python -m tests.integration.startd.fakeschedd
--url URL --name NAME``), so a test can stop it with SIGSTOP.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from gridbus.agent import Agent, Call, method
from gridbus.schema import Schema, builtin

SCHEMA = builtin().merge(Schema.from_file(Path(__file__).with_name("fakeschedd.toml")))


class FakeSchedd(Agent):
    kind = "schedd"
    classes = ("fakeschedd",)
    my_type = "Scheduler"

    def __init__(self, name: str, url: str, **kw: Any):
        super().__init__(name, url, schema=SCHEMA, update_interval=kw.pop("update_interval", 30), **kw)
        self.reports: list[dict[str, Any]] = []
        self.held: dict[str, tuple[str, float]] = {}  # claim id -> (startd, lease)
        self.dropped: dict[str, str] = {}  # claim id -> why
        # (claim id, event, proc id) -> activations put as they are in the answer to the
        # JobReports call that carries that report (activations in the answer)
        self.answer_after: dict[tuple[str, str, int], list[Any]] = {}
        # Likewise for jobs queued ahead ({ClaimId, Seq, JobAd}, the answer's Ahead).
        self.ahead_after: dict[tuple[str, str, int], list[Any]] = {}
        self.changed = threading.Condition()

    def wait_for(self, predicate, timeout: float = 20.0) -> Any:
        """Block (test thread) until predicate(self) is truthy; return its value."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                value = predicate(self)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"condition not met within {timeout} s; reports: {self.reports}")
                self.changed.wait(remaining)

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    @method("fakeschedd")
    async def JobReports(self, call: Call, Reports: list) -> dict:
        unknown = []
        activations: list[Any] = []
        ahead: list[Any] = []
        for r in Reports:
            self.reports.append(r)
            cid = r.get("ClaimId")
            if cid in self.dropped:
                unknown.append(cid)
            else:
                activations += self.answer_after.pop((cid, r.get("Event"), r.get("ProcId")), [])
                ahead += self.ahead_after.pop((cid, r.get("Event"), r.get("ProcId")), [])
        self._notify()
        return {"Unknown": unknown, **({"Activations": activations} if activations else {}),
                **({"Ahead": ahead} if ahead else {})}

    @method("fakeschedd")
    async def Run(self, call: Call, Startd: str, ClaimId: str, JobAd: dict, Lease: int) -> dict:
        r = await self.client.call(Startd, "RequestClaim",
                                   {"ClaimId": ClaimId, "JobAd": JobAd, "Schedd": self.address, "LeaseDuration": Lease})
        if r.status:
            return {"ClaimId": f"refused {r.status}: {r.text}"}
        claim = r.ClaimId
        self.held[claim] = (Startd, float(Lease))
        self.spawn(self._keep_alive(claim))
        a = await self.client.call(Startd, "ActivateClaim", {"ClaimId": claim, "JobAd": JobAd})
        if a.status:
            return {"ClaimId": f"activation {a.status}: {a.text}"}
        return {"ClaimId": claim}

    async def _keep_alive(self, claim: str) -> None:
        startd, lease = self.held[claim]
        answered = time.monotonic()
        while claim in self.held:
            await asyncio.sleep(lease / 3)
            try:
                r = await self.client.call(startd, "Alive", {"ClaimIds": [claim]}, timeout=lease / 3)
            except Exception:
                r = None
            if r is not None and r.status == 0:
                answered = time.monotonic()
                if claim in r.Unknown:
                    self._drop(claim, "unknown to the startd")
                    return
            elif time.monotonic() - answered > lease:
                self._drop(claim, "lease expired")
                return

    def _drop(self, claim: str, why: str) -> None:
        self.held.pop(claim, None)
        self.dropped[claim] = why
        self._notify()

    @method("fakeschedd")
    async def State(self, call: Call) -> dict:
        return {"Reports": self.reports, "Held": list(self.held), "Dropped": self.dropped}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--name", required=True)
    args = p.parse_args()

    async def run() -> None:
        await FakeSchedd(args.name, args.url).run()

    asyncio.run(run())


if __name__ == "__main__":
    main()
