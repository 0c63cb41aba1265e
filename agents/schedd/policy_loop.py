"""The periodic job policy (PeriodicHold/Release/Remove every PERIODIC_EXPR_INTERVAL) and the
history pruning that runs with it. The expressions' meaning is policy.py's."""

from __future__ import annotations

import asyncio
import time

from gridbus.agents.schedd import policy
from gridbus.agents.schedd.jobqueue import Cluster, Proc
from gridbus.agents.schedd.parts import ScheddParts


class PolicyLoopMixin(ScheddParts):
    def _cluster_has_policy(self, c: Cluster) -> bool:
        return policy.has_periodic(c.keys) or any(
            p.attrs and any(k.lower() in policy.POLICY_ATTRS_LOWER for k in p.attrs) for p in c.procs.values()
        )

    async def _periodic_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.periodic_interval)
            try:
                self.evaluate_periodic()
                self.prune_history()
            except Exception:
                self.log.exception("periodic policy evaluation failed")

    def evaluate_periodic(self) -> int:
        """Evaluate PeriodicHold/Release/Remove of every job that has them; returns actions taken."""
        acted = 0
        now = time.time()
        stops: list[Proc] = []
        for cid in sorted(self._policy_clusters):
            c = self.queue.clusters.get(cid)
            if c is None:
                self._policy_clusters.discard(cid)
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
                    self._hold_job(p, decision.reason, decision.code, decision.subcode, now, stops)
                elif decision.action == policy.RELEASE:
                    self._release_job(p, decision.reason, now)
                elif decision.action == policy.REMOVE:
                    self._remove_job(p, decision.reason, now, stops)
        if acted:
            self._commit_and_stop(stops)
            self.ads_changed()
        return acted

    def prune_history(self) -> int:
        return self.queue.store.prune_history(time.time() - self.settings.history_retention,
                                              self.settings.history_max_jobs)
