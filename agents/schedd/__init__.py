"""The schedd: the job queue (SQLite), Submit/Query/actions, job policy, ads and events.

Run it with ``python -m gridbus.agents.schedd``; agent.py draws its parts and how they are composed.
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
