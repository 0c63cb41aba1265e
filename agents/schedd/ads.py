"""The schedd's ads: the Scheduler ad's queue totals and windowed rates, one Submitter ad per
owner, and the counters the job state and the submission keep for them."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from gridbus.agents.schedd.jobattrs import HELD, IDLE, REMOVED, RUNNING
from gridbus.agents.schedd.jobqueue import JobQueue

RATE_WINDOW = 300.0  # seconds over which the Scheduler ad's rates are measured
COUNTERS = ("JobsSubmitted", "JobsStarted", "JobsCompleted", "JobsExited", "JobsRemoved")


class Counters:
    """JobsSubmitted, JobsStarted, ...: since the start, and within RATE_WINDOW.

    The window's sums are kept as counts come and go: the Scheduler ad is built at every
    advertisement, and summing a busy schedd's window (tens of thousands of starts and exits in
    five minutes) each time took a third of its cpu while 20,000 jobs ran. Counts of one kind
    within a second share one entry, so the window holds at most a few entries a second, and may
    count up to a second more than RATE_WINDOW."""

    def __init__(self) -> None:
        self.cum = dict.fromkeys(COUNTERS, 0)
        self._in_window = dict.fromkeys(COUNTERS, 0)
        # [first stamp, last stamp, what, n], oldest first; an entry leaves with its last count
        self._rates: deque[list[Any]] = deque()

    def count(self, what: str, n: int = 1) -> None:
        self.cum[what] += n
        self._in_window[what] += n
        now = time.time()
        last = self._rates[-1] if self._rates else None
        if last is not None and last[2] == what and 0 <= now - last[0] < 1.0:
            last[1] = now
            last[3] += n
        else:
            self._rates.append([now, now, what, n])
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self._rates and self._rates[0][1] < now - RATE_WINDOW:
            _, _, what, n = self._rates.popleft()
            self._in_window[what] -= n

    def window(self, now: float) -> dict[str, int]:
        self._expire(now)
        return dict(self._in_window)


class Ads:
    def __init__(self, name: str, address: str, queue: JobQueue, counters: Counters):
        self.name = name
        self.address = address
        self.queue = queue
        self.counters = counters

    def statistics(self) -> dict[str, Any]:
        t = self.queue.totals()
        return {"TotalIdleJobs": t[IDLE], "TotalRunningJobs": t[RUNNING], "TotalHeldJobs": t[HELD],
                "TotalJobAds": sum(t)}

    def scheduler(self, start_time: float) -> dict[str, Any]:
        """The Scheduler ad's own attributes (the agent's daemon ad adds the common ones)."""
        t = self.queue.totals()
        now = time.time()
        window = self.counters.window(now)
        cum = self.counters.cum
        span = max(1.0, min(RATE_WINDOW, now - start_time))
        return {
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
            "JobsSubmittedCum": cum["JobsSubmitted"],
            "JobsStartedCum": cum["JobsStarted"],
            "JobsCompletedCum": cum["JobsCompleted"],
            "JobsExitedCum": cum["JobsExited"],
            "WindowedStatWidth": int(RATE_WINDOW),
        }

    def submitters(self) -> list[dict[str, Any]]:
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
                "IdleJobsArrived": self.queue.idle_arrivals.get(owner, 0),
            })
        return out
