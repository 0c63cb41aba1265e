"""Shared pieces of the startd broker tests: a startd and a test schedd in threads."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from gridbus.agent.threaded import AgentThread
from gridbus.agents.startd import Startd, StartdSettings
from tests.helpers import wait_for
from tests.integration.startd.fakeschedd import FakeSchedd


def settings(tmp_path, **kw: Any) -> StartdSettings:
    base = dict(
        execute=str(tmp_path / "execute"),
        allow_runas_owner=False,
        allow_root_jobs=True,  # this test machine runs everything as root:
        user_map=("*=root",),  # every owner is mapped to root (none has an account)
        killing_timeout=1.0,
        memory_check_interval=0.1,
        report_timeout=2.0,
        report_retry=0.3,
        base_cgroup=f"gridbus-test/{uuid.uuid4().hex[:12]}",  # no other test's startd of the same name
    )
    base.update(kw)
    return StartdSettings(**base)


@contextlib.contextmanager
def startd_and_schedd(amqp_url: str, tmp_path, name: str = "s1", **kw: Any) -> Iterator[tuple[Startd, AgentThread, FakeSchedd]]:
    startd = Startd(name, amqp_url, settings=settings(tmp_path, **kw), update_interval=1)
    schedd = FakeSchedd("fake", amqp_url)
    with AgentThread(schedd), AgentThread(startd) as thread:
        yield startd, thread, schedd


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll a condition with a deadline (for state another thread changes without notifying)."""
    return wait_for(predicate, timeout, what, interval=0.02)


def reports_for(schedd: FakeSchedd, claim: str, event: str | None = None) -> list[dict[str, Any]]:
    return [r for r in list(schedd.reports) if r.get("ClaimId") == claim and (event is None or r.get("Event") == event)]


def exit_report(schedd: FakeSchedd, claim: str, n: int = 1, timeout: float = 20.0) -> dict[str, Any]:
    """The n-th distinct exit report of a claim (retries of one report count once)."""

    def found(s: FakeSchedd) -> Any:
        seen: dict[Any, dict[str, Any]] = {}
        for r in reports_for(s, claim, "exit"):
            seen.setdefault((r.get("ClusterId"), r.get("ProcId"), r.get("Time")), r)
        exits = list(seen.values())
        return exits[n - 1] if len(exits) >= n else None

    return schedd.wait_for(found, timeout)
