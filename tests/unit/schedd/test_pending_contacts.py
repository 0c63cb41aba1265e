"""MAX_PENDING_STARTD_CONTACTS: a Match of many slots sends its RequestClaims a few at a time,
each answer starting the next, so the schedd's loop never holds thousands of calls and answers
ahead of a Query; every match is still claimed, and a Query is answered while they wait."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gridbus.rpc import MethodResult
from tests.unit.schedd.inproc import SLOT_AD, call, make_schedd, submit


class SlowStartds:
    """Holds every RequestClaim until released; counts how many are in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.claimed: list[str] = []
        self.release = asyncio.Event()

    async def call(self, address: str, method: str, args: dict[str, Any], timeout: float = 0) -> MethodResult:
        if method == "RequestClaim":
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            try:
                await self.release.wait()
            finally:
                self.in_flight -= 1
            self.claimed.append(args["ClaimId"])
            return MethodResult(0, "OK", {"ClaimId": args["ClaimId"], "Slot": "slot", "SlotAd": dict(SLOT_AD)})
        if method == "ActivateClaims":
            return MethodResult(0, "OK", {"Results": [{"ClaimId": a["ClaimId"], "Status": 0, "Text": "OK"}
                                                      for a in args["Activations"]]})
        return MethodResult(0, "OK", {})


def test_claims_wait_their_turn_and_all_are_made(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path, max_pending_contacts=3)
        startds = SlowStartds()
        schedd._client = startds  # type: ignore[assignment]
        await schedd.setup()
        submit(schedd, count=10)
        neg = call("GetResourceRequests", user="negotiator")
        reqs = await schedd.negotiation.GetResourceRequests(neg, Owner="alice", Limit=10, After=-1,
                                                           AutoClusterAttrs=[], WholeAds=False)
        acid = reqs["Requests"][0]["AutoClusterId"]
        # As the negotiator sends them: no SlotAd (the startd's answer brings it).
        matches = [{"AutoClusterId": acid, "ClaimId": f"c{i}", "Slot": f"slot{i}@a", "Startd": "startd@a"}
                   for i in range(10)]
        out = await schedd.negotiation.Match(call("Match", user="negotiator"), Matches=matches)
        assert out["Accepted"] == 10
        for _ in range(20):
            await asyncio.sleep(0)
        assert startds.in_flight == 3 and schedd.negotiation.claims_waiting == 7
        # The schedd answers a summary query while the claims wait.
        totals = [chunk async for chunk in schedd.queries.Query(
            call("Query"), Constraint="true", Projection=[], Limit=-1, Opts=8, Compact=False)]
        assert totals
        startds.release.set()
        for _ in range(200):
            if len(startds.claimed) == 10 and schedd.negotiation.claims_waiting == 0:
                break
            await asyncio.sleep(0)
        assert sorted(startds.claimed) == sorted(f"c{i}" for i in range(10))
        assert startds.most == 3
        assert [c.slot_ad for c in schedd.claims.by_id.values()] == [SLOT_AD] * 10
        await schedd.commits.close()

    asyncio.run(main())
