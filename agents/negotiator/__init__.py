"""The negotiator: matchmaking and the accountant (``python -m gridbus.agents.negotiator``).

Address ``negotiator@<name>``, management class ``negotiator``. See `agent.py` for the cycle,
`matchmaker.py` for matching (with `reach.py`, what attributes a match can look at, and
`prefilter.py`, slot indexes on the Requirements' simple clauses), `accountant.py` for priorities
and usage, `analyze.py` for the idle-job analysis.
"""

from __future__ import annotations

from gridbus.agents.negotiator.agent import CycleStats, Negotiator
from gridbus.agents.negotiator.main import build, main

__all__ = ["CycleStats", "Negotiator", "build", "main"]
