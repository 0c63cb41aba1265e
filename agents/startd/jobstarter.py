"""What the startd needs of a starter: the `JobStarter` protocol that both `Starter`
(starter.py: job processes) and `SimulatedStarter` (simulated.py: timers, STARTD_SIMULATE_JOBS)
meet, and that the activation and the claims are written against.

The split start of the fast spawn (`begin_beside`, `when_known`, `finish_known`, `cancel`,
`cancel_successor`) is part of it: a starter whose `spawns_beside` and `spawns_ahead` are false
is never asked to begin one, and answers as a starter with nothing beside the loop would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gridbus.agents.startd.job import Beside, Job


class JobStarter(Protocol):
    """Starts, stops, suspends and watches the jobs of one startd, on its event loop."""

    running: dict[str, Job]  # the jobs running, by claim id

    @property
    def spawns_beside(self) -> bool:
        """Whether a start may be split into `begin_beside` and `finish_known`."""
        ...

    @property
    def spawns_ahead(self) -> bool:
        """Whether a claim's next job may be spawned while the job before it runs."""
        ...

    def starts_now(self, ad: Mapping[str, Any]) -> bool:
        """Whether the job can be spawned without awaiting anything first."""
        ...

    def shares_output(self, ad: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        """Whether two jobs write the same output or error file."""
        ...

    async def start_async(self, key: str, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                          memory_limit_mib: int | None, sandbox: str | None = None) -> Job:
        """The job started (StartFailed with its hold reason if it cannot run). ``sandbox``: a
        scratch directory the caller made and filled, and removes."""
        ...

    def begin_beside(self, ad: Mapping[str, Any], slot: str, env_extra: Mapping[str, str],
                     memory_limit_mib: int | None, sandbox: str | None = None, *, after: Job | None = None) -> Beside:
        """The first half of a split start, done at once (StartFailed if it cannot begin)."""
        ...

    def when_known(self, beside: Beside, call: Callable[[], None]) -> None:
        """``call()`` once the outcome of ``beside`` is known."""
        ...

    def finish_known(self, key: str, ad: Mapping[str, Any], slot: str, memory_limit_mib: int | None,
                     beside: Beside) -> Job | Beside:
        """The second half, its outcome known: the job, a start made anew, or StartFailed."""
        ...

    def cancel(self, beside: Beside) -> None:
        """Stop a start begun by `begin_beside` now."""
        ...

    def cancel_successor(self, job: Job) -> None:
        """Stop ``job``'s successor, if any, before its exec."""
        ...

    def stop(self, job: Job, graceful: bool, reason: str) -> None:
        ...

    async def stop_and_wait(self, job: Job, graceful: bool, reason: str) -> None:
        ...

    def suspend(self, job: Job) -> int:
        """Suspend the job where it is; returns how many processes were suspended."""
        ...

    def resume(self, job: Job) -> None:
        ...

    async def monitor(self) -> None:
        """Sample the running jobs (usage, limits) while the startd runs; a starter with
        nothing to sample returns at once."""
        ...

    async def shutdown(self) -> None:
        """Stop every job (the startd is going away) and wait until they are gone."""
        ...
