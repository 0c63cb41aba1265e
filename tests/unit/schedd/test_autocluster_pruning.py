"""Autocluster ids, attribute lists and request pages of an owner with no idle job left are
forgotten: the schedd's memory does not grow with every distinct job shape ever submitted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gridbus.classad import ExprTree
from tests.unit.schedd.inproc import call, make_schedd, submit


def test_an_owner_whose_jobs_are_gone_leaves_no_autocluster_behind(tmp_path: Path):
    async def main() -> None:
        schedd = make_schedd(tmp_path)
        await schedd.setup()
        negotiator = call("GetResourceRequests", user="negotiator")
        shapes = [submit(schedd, owner="alice", **{f"Knob{i}": i, "RequestMemory": ExprTree(f"Knob{i} + 1")})
                  for i in range(40)]
        out = await schedd.negotiation.GetResourceRequests(negotiator, Owner="alice", Limit=100, After=-1,
                                               AutoClusterAttrs=[], WholeAds=False)
        assert len(out["Requests"]) == 40
        assert len(schedd.autoclusters) == 40 and schedd.autoclusters.attribute_lists == 40
        for cid in shapes:  # alice's jobs all finish; she never asks again
            for p in list(schedd.queue.clusters[cid].procs.values()):
                schedd.queue.retire(p)
        submit(schedd, owner="bob")
        await schedd.negotiation.GetResourceRequests(negotiator, Owner="bob", Limit=100, After=-1,
                                         AutoClusterAttrs=[], WholeAds=False)
        assert len(schedd.autoclusters) == 1 and schedd.autoclusters.attribute_lists == 1
        assert schedd.negotiation.owners_paged == {"bob"}
        await schedd.commits.close()

    asyncio.run(main())
