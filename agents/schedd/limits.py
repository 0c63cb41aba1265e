"""The schedd's limits on jobs, with HTCondor's knobs and sentences.

- MAX_JOBS_PER_SUBMISSION: a Submit that would add more procs is refused;
- MAX_JOBS_PER_OWNER: a Submit that would take its owner's jobs in the queue past it is refused;
  both as condor_submit reports them ("Number of submitted jobs would exceed ..."), the whole
  cluster refused, none of it queued, and logged as HTCondor's schedd logs them;
- MAX_JOBS_RUNNING: the schedd's jobs on claims (running, being activated, or matched and being
  claimed) stop there: Match accepts no more, GetResourceRequests offers none, and a claim whose
  job ends is released rather than reused, HTCondor's schedd logging "Reached MAX_JOBS_RUNNING:
  no more can run" once each time it gets there. Lowered by a reconfig below the jobs running,
  the excess is vacated (the last started first) and goes back to Idle. Scheduler and local
  universe jobs do not count (SCHEDD_MAX_SCHEDULER_JOBS limits those).

A late-materialization cluster's procs are made by its factory as it goes: MAX_JOBS_PER_SUBMISSION
bounds the procs it keeps in the queue at once (its JobMaterializeLimit, at most that), as it
bounds HTCondor's factories; MAX_JOBS_PER_OWNER is not applied to a factory's procs.
"""

from __future__ import annotations

import logging

from gridbus.agents.schedd.claims import RUNNING_JOB, Claims
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.status import app_error

log = logging.getLogger("gridbus.schedd.limits")

# Submit refusals (QMF's application errors, USER + n; submission.py holds 1 to 3).
E_MAX_JOBS_PER_OWNER = 4
E_MAX_JOBS_PER_SUBMISSION = 5

REACHED_MAX_JOBS_RUNNING = "Reached MAX_JOBS_RUNNING: no more can run"


def check_submit(settings: ScheddSettings, owner: str, owner_jobs: int, count: int) -> None:
    """Refuse a Submit of ``count`` procs by ``owner``, who has ``owner_jobs`` in the queue, that
    a submit limit forbids (MAX_JOBS_PER_SUBMISSION first, as HTCondor checks a new proc)."""
    per_submission = settings.max_jobs_per_submission
    if count > per_submission:
        log.warning("MAX_JOBS_PER_SUBMISSION exceeded, submit failed.  Current total is %d.  Limit is %d.",
                    count, per_submission)
        raise app_error(
            E_MAX_JOBS_PER_SUBMISSION,
            f"Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION: this submission has {count} jobs; "
            f"the limit is {per_submission}",
        )
    per_owner = settings.max_jobs_per_owner
    if owner_jobs + count > per_owner:
        log.warning("MAX_JOBS_PER_OWNER exceeded for %s, submit failed.  Current total is %d.  Limit is %d.",
                    owner, owner_jobs + count, per_owner)
        raise app_error(
            E_MAX_JOBS_PER_OWNER,
            f"Number of submitted jobs would exceed MAX_JOBS_PER_OWNER: {owner} has {owner_jobs} jobs in this "
            f"schedd's queue and submits {count}; the limit is {per_owner}",
        )


class RunningLimit:
    """MAX_JOBS_RUNNING: how many more jobs may start on claims, logged once when none may."""

    def __init__(self, settings: ScheddSettings):
        self.settings = settings
        self._warned = False

    def room(self, on_claims: int) -> int:
        """Jobs that may still start, given ``on_claims`` (running, starting, or being claimed)."""
        room = max(self.settings.max_jobs_running - on_claims, 0)
        if room == 0:
            if not self._warned:
                log.warning(REACHED_MAX_JOBS_RUNNING)
            self._warned = True
        else:
            self._warned = False
        return room



async def preempt_over_limit(claims: Claims, settings: ScheddSettings) -> int:
    """MAX_JOBS_RUNNING lowered below the jobs running: vacate the excess, the jobs started last
    first (their startds report evictions, and the jobs return to Idle). Answers how many."""
    excess = len(claims.by_job) - max(settings.max_jobs_running, 0)
    if excess <= 0:
        return 0
    log.warning("Preempting %d jobs due to MAX_JOBS_RUNNING change", excess)
    running = [c for c in claims.by_job.values() if c.state == RUNNING_JOB and not c.stopping and c.job]
    running.sort(key=lambda c: c.started_at, reverse=True)
    for claim in running[:excess]:
        if claim.job is not None:
            await claims.call_job_claim(*claim.job, "DeactivateClaim", {"Graceful": True})
    return min(excess, len(running))
