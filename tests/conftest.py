"""Shared fixtures: the broker, a vhost per test, agents run in threads.

Tests talk to a real RabbitMQ: GRIDBUS_TEST_AMQP_URL if set, else the local broker if it answers,
else a testcontainers RabbitMQ where Docker works; otherwise broker tests fail with a message that
says how to start one.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from tests import tiers_report
from tests.hypothesis_profiles import register_profiles

register_profiles()  # before hypothesis's plugin loads the one --hypothesis-profile names

# The previous tagged release, for the upgrade tests (its fixture, `previous_release`).
pytest_plugins = ("tests.previous_release",)

LOCAL_URL = "amqp://guest:guest@127.0.0.1:5672/"
HOW_TO = (
    "no RabbitMQ for the tests: set GRIDBUS_TEST_AMQP_URL, or start a local broker with "
    "`rabbitmq-server -detached && rabbitmq-plugins enable rabbitmq_management`, or install Docker "
    "for testcontainers"
)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def broker_url() -> Iterator[BrokerURL]:
    env = os.environ.get("GRIDBUS_TEST_AMQP_URL")
    if env:
        yield BrokerURL(env)
        return
    if _answers("127.0.0.1", 5672):
        yield BrokerURL(LOCAL_URL)
        return
    try:
        from testcontainers.rabbitmq import RabbitMqContainer
    except ImportError:
        pytest.fail(HOW_TO)
    try:
        container = RabbitMqContainer("rabbitmq:3-management").with_exposed_ports(5672, 15672)
        container.start()
    except Exception as exc:  # no Docker engine
        pytest.fail(f"{HOW_TO} ({exc})")
    host = container.get_container_host_ip()
    os.environ["GRIDBUS_MGMT_URL"] = f"http://{host}:{container.get_exposed_port(15672)}"
    yield BrokerURL(f"amqp://guest:guest@{host}:{container.get_exposed_port(5672)}/")
    container.stop()


@pytest.fixture(scope="session")
def mgmt(broker_url: BrokerURL) -> Management:
    m = Management.for_broker(broker_url)
    try:
        m.overview()
    except Exception as exc:
        pytest.fail(f"the RabbitMQ management API does not answer ({exc}); run `rabbitmq-plugins enable rabbitmq_management`")
    return m


@pytest.fixture
def vhost(mgmt: Management, broker_url: BrokerURL, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh vhost for one test, created and removed through the management API."""
    name = f"gridbus-test-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(name)
    mgmt.put_permissions(name, broker_url.user, ".*", ".*", ".*")
    yield name
    mgmt.delete_vhost(name)


@pytest.fixture
def amqp_url(broker_url: BrokerURL, vhost: str) -> str:
    """The broker URL of this test's own vhost."""
    return broker_url.with_vhost(vhost).url


# The tiers (`make test-fast` selects `-m "not broker and not e2e"`): a test is marked by where it
# lives and by what it asks for, not by a line each file must remember. Everything outside
# tests/unit talks to a broker; tests/e2e and tests/cluster run real pools; a test anywhere that asks for the
# broker (its fixtures, however deep) is a broker test. tests/unit/test_tiers.py checks the result.
_BROKER_DIRS = ("integration", "e2e", "cluster", "multihost")


# Tests that share something of the machine run in one worker, one after the other, when the suite
# runs in pytest-xdist workers (`pytest -n 4`; the scheduler below): the 3-node test cluster
# (fixed ports), network namespaces (the harnesses check that none is left behind), the podman
# images and containers, and the previous release's git worktree. Any other test runs with its
# module, so a module's shared pool is started once.
_SHARED_GROUPS = (
    ("cluster", ("cluster",)),
    ("netns", ("integration", "faults")),
    ("netns", ("e2e", "multihost")),
    ("containers", ("e2e", "test_containers.py")),
    ("containers", ("unit", "startd", "test_containers.py")),
    ("containers", ("unit", "compose")),
    ("previous-release", ("e2e", "test_mixed_versions.py")),
    ("previous-release", ("integration", "schedd", "test_store_upgrade.py")),
    ("web", ("e2e", "web")),  # (one package-scoped pool)
)


def xdist_group(parts: list[str]) -> str:
    """The worker group of a test at ``parts`` (its path under tests/, split)."""
    for group, prefix in _SHARED_GROUPS:
        if tuple(parts[:len(prefix)]) == prefix:
            return group
    return "/".join(parts)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist hands out whole groups (`xdist_group` above), each to one worker. (Its own
    ``--dist loadgroup`` renames test ids, which pytest 9 no longer allows; the groups here are
    named by path, so they are told from the test id alone.)"""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0].split("/")
            return xdist_group(path[1:] if path[0] == "tests" else path)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = os.path.dirname(__file__)
    for item in items:
        parts = os.path.relpath(str(item.path), root).split(os.sep)
        if parts[0] in _BROKER_DIRS or "broker_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
        if parts[0] in ("e2e", "cluster"):  # a real pool (tests/cluster: on a cluster of brokers)
            item.add_marker(pytest.mark.e2e)
    tiers_report.record(config, items)  # (before -m deselects any: tests/unit/test_tiers.py reads them)
