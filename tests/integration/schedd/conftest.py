"""Fixtures for the schedd on the real broker: the agent in a thread, a console session, users."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.agents.schedd.agent import Schedd
from gridbus.agents.schedd.settings import ScheddSettings
from gridbus.classad import ExprTree
from gridbus.console import Session


def job_ad(iwd: str | Path = "/tmp", **extra: Any) -> dict[str, Any]:
    return {"Cmd": "/bin/sleep", "Args": "60", "Requirements": ExprTree("true"), "JobUniverse": 5,
            "Iwd": str(iwd), **extra}


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def make_schedd(amqp_url: str, tmp_path: Path, monkeypatch) -> Iterator[Callable[..., AgentThread]]:
    threads: list[AgentThread] = []
    # The tests run as root and their owners (broker users) have no Unix accounts: the owners'
    # shadows act as root (every owner mapped to root), as the e2e pools' daemons do (tests/e2e/pool.py).
    monkeypatch.setenv("GRIDBUS_STARTER_ALLOW_ROOT_JOBS", "true")
    monkeypatch.setenv("GRIDBUS_USER_MAP", "*=root")

    def make(name: str = "s1", **settings: Any) -> AgentThread:
        settings.setdefault("spool", tmp_path / f"spool-{name}")
        settings.setdefault("update_interval", 1.0)
        settings.setdefault("periodic_interval", 3600.0)
        t = AgentThread(Schedd(name, amqp_url, settings=ScheddSettings(**settings))).start()
        threads.append(t)
        return t

    yield make
    for t in threads:
        t.stop()


@pytest.fixture
def schedd(make_schedd) -> AgentThread:
    return make_schedd()


@pytest.fixture
def session(amqp_url: str) -> Iterator[Session]:
    with Session(amqp_url, timeout=15) as s:
        yield s


@pytest.fixture
def user_url(broker_url, mgmt, vhost) -> Iterator[Callable[[str], str]]:
    """Make a broker account that may call methods (like a person's), return its URL."""
    made: list[str] = []

    def make(user: str) -> str:
        password = f"pw-{user}"
        mgmt.put_user(user, password)
        made.append(user)
        mgmt.put_permissions(vhost, user, "^$", "^gridbus\\.rpc$", "^$")
        return broker_url.with_vhost(vhost).with_credentials(user, password).url

    yield make
    for user in made:
        mgmt.delete_user(user)
