"""The schedd: the job queue (SQLite), Submit/Query/actions, job policy, ads and events.

Run it with ``python -m gridbus.agents.schedd``; see agent.py for the job-state API the shadows use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Schedd"]


def __getattr__(name: str) -> Any:
    # Lazy, so `gridbus.agents.schedd.jobqueue` can be imported without the agent framework.
    if name == "Schedd":
        from gridbus.agents.schedd.agent import Schedd

        return Schedd
    raise AttributeError(f"module 'gridbus.agents.schedd' has no attribute {name!r}")
