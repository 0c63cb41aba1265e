"""The negotiator: matchmaking and the accountant (``python -m gridbus.agents.negotiator``).

Address ``negotiator@<name>``, management class ``negotiator``. See `agent.py` for its parts:
`cycle.py` for the cycle, `collector_ads.py` for the ads it reads, `matchmaker.py` for matching (with `reach.py`, what attributes a match can look at, and
`prefilter.py`, slot indexes on the Requirements' simple clauses), `accountant.py` for priorities
and usage (`accountant_store.py` keeps them, `accountant_calls.py` serves them), `analyze.py` for the idle-job analysis.
"""

from __future__ import annotations

from gridbus.agents.negotiator.agent import Negotiator
from gridbus.agents.negotiator.cycle_stats import CycleStats
from gridbus.agents.negotiator.main import build, main

__all__ = ["CycleStats", "Negotiator", "build", "main"]
