"""The periodic job policy (PeriodicHold/Release/Remove every PERIODIC_EXPR_INTERVAL) and the
history pruning that runs with it. The expressions' meaning is policy.py's; the changes are the
job state's (jobstate.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from gridbus.agents.schedd import policy
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.jobqueue import Cluster, JobQueue, Proc
from gridbus.agents.schedd.jobstate import JobState
from gridbus.agents.schedd.settings import ScheddSettings

log = logging.getLogger("gridbus.schedd.policy")


class PeriodicPolicy:
    def __init__(self, queue: JobQueue, state: JobState, commits: Commits, settings: ScheddSettings,
                 ads_changed: Callable[[], None]):
        self.queue = queue
        self.state = state
        self.commits = commits
        self.settings = settings
        self._ads_changed = ads_changed
        # The clusters with a periodic expression in their ad or a proc's: the only ones evaluated.
        self.clusters: set[int] = {c.id for c in queue.clusters.values() if self.has_policy(c)}

    @staticmethod
    def has_policy(c: Cluster) -> bool:
        return policy.has_periodic(c.keys) or any(
            p.attrs and any(k.lower() in policy.POLICY_ATTRS_LOWER for k in p.attrs) for p in c.procs.values()
        )

    def watch(self, c: Cluster) -> None:
        """A new cluster: evaluated from now on if it has periodic expressions."""
        if self.has_policy(c):
            self.clusters.add(c.id)

    def attribute_set(self, cluster_id: int, name: str) -> None:
        """An attribute was set on a job of ``cluster_id`` (SetAttribute)."""
        if name.lower() in policy.POLICY_ATTRS_LOWER:
            self.clusters.add(cluster_id)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.periodic_interval)
            try:
                await self.evaluate_periodic()
                await self.prune_history()
            except Exception:
                log.exception("periodic policy evaluation failed")

    async def evaluate_periodic(self) -> int:
        """Evaluate PeriodicHold/Release/Remove of every job that has them; returns actions taken."""
        acted = 0
        now = time.time()
        stops: list[Proc] = []
        for cid in sorted(self.clusters):
            c = self.queue.clusters.get(cid)
            if c is None:
                self.clusters.discard(cid)
                continue
            for pid in sorted(c.procs):
                p = c.procs.get(pid)
                if p is None:
                    continue
                decision = policy.periodic(self.queue.ad(p))
                if decision is None:
                    continue
                acted += 1
                if decision.action == policy.HOLD:
                    self.state.hold_job(p, decision.reason, decision.code, decision.subcode, now, stops)
                elif decision.action == policy.RELEASE:
                    self.state.release_job(p, decision.reason, now)
                elif decision.action == policy.REMOVE:
                    self.state.remove_job(p, decision.reason, now, stops)
        if acted:
            await self.state.commit_and_stop(stops)
            self._ads_changed()
        return acted

    async def prune_history(self) -> int:
        older_than, most = time.time() - self.settings.history_retention, self.settings.history_max_jobs
        return await self.commits.exclusive(lambda: self.queue.store.prune_history(older_than, most))
