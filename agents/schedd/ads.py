"""The schedd's ads: the Scheduler ad (queue totals, windowed rates), one Submitter ad per owner,
and the management object's statistics."""

from __future__ import annotations

import time
from typing import Any

from gridbus.agents.schedd.jobattrs import HELD, IDLE, REMOVED, RUNNING
from gridbus.agents.schedd.parts import ScheddParts

RATE_WINDOW = 300.0  # seconds over which the Scheduler ad's rates are measured
COUNTERS = ("JobsSubmitted", "JobsStarted", "JobsCompleted", "JobsExited", "JobsRemoved")


class AdsMixin(ScheddParts):
    def _count(self, what: str, n: int = 1) -> None:
        self.cum[what] += n
        now = time.time()
        self._rates.append((now, what, n))
        while self._rates and self._rates[0][0] < now - RATE_WINDOW:
            self._rates.popleft()

    def object_statistics(self) -> dict[str, Any]:
        t = self.queue.totals()
        return {**self.stats, "TotalIdleJobs": t[IDLE], "TotalRunningJobs": t[RUNNING], "TotalHeldJobs": t[HELD],
                "TotalJobAds": sum(t)}

    def daemon_ad(self) -> dict[str, Any]:
        t = self.queue.totals()
        now = time.time()
        window = dict.fromkeys(self.cum, 0)
        for stamp, what, n in self._rates:
            if stamp >= now - RATE_WINDOW:
                window[what] += n
        span = max(1.0, min(RATE_WINDOW, now - self.start_time))
        return {
            **super().daemon_ad(),
            "ScheddName": self.name,
            "TotalIdleJobs": t[IDLE],
            "TotalRunningJobs": t[RUNNING],
            "TotalHeldJobs": t[HELD],
            "TotalRemovedJobs": t[REMOVED],
            "TotalJobAds": sum(t),
            "NumUsers": len(self.queue.owners()),
            "JobsSubmitted": window["JobsSubmitted"],
            "JobsStarted": window["JobsStarted"],
            "JobsCompleted": window["JobsCompleted"],
            "JobsExited": window["JobsExited"],
            "JobSubmissionRate": window["JobsSubmitted"] / span,
            "JobStartRate": window["JobsStarted"] / span,
            "JobCompletionRate": window["JobsCompleted"] / span,
            "JobsSubmittedCum": self.cum["JobsSubmitted"],
            "JobsStartedCum": self.cum["JobsStarted"],
            "JobsCompletedCum": self.cum["JobsCompleted"],
            "JobsExitedCum": self.cum["JobsExited"],
            "WindowedStatWidth": int(RATE_WINDOW),
        }

    def submitter_ads(self) -> list[dict[str, Any]]:
        out = []
        for owner in self.queue.owners():
            t = self.queue.totals(owner)
            out.append({
                "MyType": "Submitter",
                "Name": f"{owner}@{self.name}",
                "Owner": owner,
                "ScheddName": self.name,
                "MyAddress": self.address,
                "IdleJobs": t[IDLE],
                "RunningJobs": t[RUNNING],
                "HeldJobs": t[HELD],
            })
        return out

    def ads(self) -> list[dict[str, Any]]:
        return [self.daemon_ad(), *self.submitter_ads()]
