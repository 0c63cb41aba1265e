"""Fixtures of the network fault tests: a cut-able link per test, removed in a finally."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.e2e.pool import Pool
from tests.integration.faults.netns import NetnsLink, unavailable


@pytest.fixture
def link() -> Iterator[NetnsLink]:
    """A namespace, a veth pair on a private /30 and a forwarder to the broker; always removed."""
    why = unavailable()
    if why:
        pytest.skip(why)
    net = NetnsLink()
    try:
        net.open()
        yield net
    finally:
        net.close()


@pytest.fixture
def make_netpool(amqp_url: str, link: NetnsLink, tmp_path) -> Iterator[Callable[..., Pool]]:
    """A pool whose schedd runs inside ``link``'s namespace; the rest on the host.

    The collector, the negotiator and one startd (``startd@a``, two static slots) talk to the broker
    directly; the schedd (``schedd@s``) reaches it only through the veth pair and the forwarder, so
    cutting the link cuts exactly the path between the schedd side and the startd. Leases are
    ``lease`` seconds (JOB_LEASE_DURATION: the schedd's Alive every lease/3, the startd's lease).
    """
    pools: list[Pool] = []

    def make(lease: float) -> Pool:
        # An unanswered report is retried within a fraction of the lease, not after the default 10 s.
        pool = Pool(amqp_url, tmp_path / f"pool{len(pools)}", GRIDBUS_JOB_LEASE_DURATION=str(lease),
                    GRIDBUS_STARTD_REPORT_TIMEOUT="2")
        pools.append(pool)
        pool.wrappers["schedd@s"] = link.command([])
        pool.start("collector", "c")
        pool.start("negotiator", "n")
        pool.start("startd", "a", GRIDBUS_NUM_CPUS="2", GRIDBUS_NUM_SLOTS="2", GRIDBUS_MEMORY="2048")
        pool.start("schedd", "s", GRIDBUS_URL=link.broker_url(amqp_url))
        pool.wait_slots(2)
        pool.wait_serving("schedd@s")  # the schedd in the namespace, through the forwarder
        return pool

    try:
        yield make
    finally:
        link.restore()  # a failed test may leave the link cut: let the schedd stop gracefully
        for pool in pools:
            pool.stop()
