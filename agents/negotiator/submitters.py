"""A cycle's submitters and the calls the cycle makes to their schedds.

Each submitter (``<owner>@<schedd name>``, from its Submitter ad) is asked for resource requests
(GetResourceRequests, NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE per round trip, one per autocluster),
and told its matches (Match, at most MATCHES_PER_CALL per call). A schedd that does not answer, or
refuses, is skipped for the rest of the cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gridbus.agents.negotiator.cycle_stats import CycleStats
from gridbus.agents.negotiator.matchmaker import REJECT_HOSTILE, REJECT_LIMIT, REJECT_NO_MATCH, get
from gridbus.rpc import CallTimeout, MethodResult

# Matches per Match call (a batch of 200 requests can make 20,000 matches in a large pool): the
# schedd takes its matches while the cycle goes on, a call at a time.
MATCHES_PER_CALL = 2000
# Requests that are not tried again in a later round of the same cycle.
SETTLED = (REJECT_NO_MATCH, REJECT_LIMIT, REJECT_HOSTILE)

CallFn = Callable[[str, str, dict[str, Any], float], Awaitable[MethodResult]]


@dataclass
class Submitter:
    name: str  # <owner>@<schedd name>
    owner: str
    address: str  # the schedd's agent address
    idle: int
    group: str = "<none>"  # the accounting group its jobs are charged to (groups.py)
    after: int = -1  # the last AutoClusterId seen this cycle
    exhausted: bool = False  # the schedd has no more requests this cycle
    requests: list[dict[str, Any]] = field(default_factory=list)  # fetched, with "Left" counts
    failed: bool = False
    hostile: int = 0  # requests rejected as hostile expressions this cycle

    def wants(self) -> bool:
        """Whether it may still take slots this cycle."""
        if self.failed:
            return False
        if any(r["Left"] > 0 and r.get("Reason") not in SETTLED for r in self.requests):
            return True
        return not self.exhausted

    def open_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["Left"] > 0 and r.get("Reason") not in SETTLED]


def submitters_of(ads: list[dict[str, Any]]) -> list[Submitter]:
    """The submitters with idle jobs among the Submitter ads."""
    out = []
    for ad in ads:
        name, owner, address, idle = (get(ad, k) for k in ("Name", "Owner", "MyAddress", "IdleJobs"))
        if not all(isinstance(v, str) and v for v in (name, owner, address)):
            continue
        if not isinstance(idle, int) or idle <= 0:
            continue
        out.append(Submitter(name, owner, address, idle))
    return out


class ScheddCalls:
    """GetResourceRequests and Match, through ``call(address, method, args, timeout)``."""

    def __init__(self, call: CallFn, request_list_size: int, schedd_timeout: float, log: logging.Logger):
        self._call = call
        self.request_list_size = request_list_size
        self.schedd_timeout = schedd_timeout
        self.log = log

    async def fetch(self, sub: Submitter, job_attrs: frozenset[str] | None, stats: CycleStats) -> list[dict[str, Any]]:
        """The submitter's next page of requests (added to ``sub.requests``); [] when none."""
        args: dict[str, Any] = {"Owner": sub.owner, "Limit": self.request_list_size, "After": sub.after}
        if job_attrs is None:
            args["WholeAds"] = True
        else:
            args["AutoClusterAttrs"] = sorted(job_attrs)
        stats.schedd_calls += 1
        try:
            result = await self._call(sub.address, "GetResourceRequests", args, self.schedd_timeout)
        except CallTimeout:
            self.log.warning("%s did not answer GetResourceRequests; skipping %s this cycle", sub.address, sub.name)
            sub.failed = True
            return []
        if not result.ok:
            self.log.warning("%s refused GetResourceRequests for %s: %s", sub.address, sub.owner, result.text)
            sub.failed = True
            return []
        requests = [r for r in result.outArgs.get("Requests", []) if isinstance(r, dict)]
        valid = []
        for r in requests:
            acid, count, ad = r.get("AutoClusterId"), r.get("Count"), r.get("Ad")
            if isinstance(acid, int) and isinstance(count, int) and count > 0 and isinstance(ad, dict):
                valid.append({"AutoClusterId": acid, "Count": count, "Ad": ad, "Left": count})
        if requests and isinstance(requests[-1].get("AutoClusterId"), int):
            sub.after = requests[-1]["AutoClusterId"]
        if len(requests) < self.request_list_size:
            sub.exhausted = True
        sub.requests.extend(valid)
        stats.requests += len(valid)
        return valid

    async def send_matches(self, sub: Submitter, matches: list[dict[str, Any]], stats: CycleStats) -> int:
        """Tell the schedd ``matches``; returns how many it accepted."""
        stats.schedd_calls += 1
        try:
            result = await self._call(sub.address, "Match", {"Matches": matches}, self.schedd_timeout)
        except CallTimeout:
            self.log.warning("%s did not answer Match (%d matches)", sub.address, len(matches))
            sub.failed = True
            return 0
        if not result.ok:
            self.log.warning("%s refused Match: %s", sub.address, result.text)
            return 0
        accepted = result.outArgs.get("Accepted", 0)
        return accepted if isinstance(accepted, int) else 0
