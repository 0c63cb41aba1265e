"""What the schedd's parts share: the state `Schedd.__init__` (agent.py) sets, named once.

The schedd is assembled from mixins, one per concern (submitting.py, jobstate.py, job_actions.py,
job_objects.py, queries.py, ads.py, policy_loop.py, shadows.py). Each subclasses `ScheddParts`
so the attributes it reads from the assembled agent are declared with their types in one place;
the class holds annotations only, so it adds nothing to the agent at run time.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gridbus.agents.schedd.jobevents import JobEvents
    from gridbus.agents.schedd.jobqueue import JobQueue
    from gridbus.agents.schedd.settings import ScheddSettings


class ScheddParts:
    # The agent framework's (gridbus.agent.Agent)
    name: str
    address: str
    log: logging.Logger
    stats: dict[str, Any]
    start_time: float
    # The schedd's (agent.py)
    settings: ScheddSettings
    queue: JobQueue
    events: JobEvents
    super_users: frozenset[str]
    cum: dict[str, int]  # JobsSubmitted, JobsStarted, ... since the start (ads.py)
    _rates: deque[tuple[float, str, int]]  # (time, counter, n) within RATE_WINDOW (ads.py)
    _policy_clusters: set[int]  # clusters with periodic policy expressions (policy_loop.py)
