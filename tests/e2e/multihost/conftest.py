"""One multi-host pool per module: the submit host here, execute hosts ``exec1`` and ``exec2``.

Leases are short (JOB_LEASE_DURATION 5 s), so a host cut off loses its claims within seconds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.multihost.helpers import LEASE, STALL, all_unclaimed
from tests.e2e.pool import wait_for
from tests.multihost import SCHEDD, Host, MultiHostPool, multihost_pool, unavailable


@pytest.fixture(scope="module")
def hosts(broker_url, mgmt, tmp_path_factory, request) -> Iterator[MultiHostPool]:
    why = unavailable()
    if why:
        pytest.skip(why)
    name = request.module.__name__.rsplit(".", 1)[-1][:30]
    with multihost_pool(broker_url, mgmt, tmp_path_factory.mktemp(name), name, {"exec1": {}, "exec2": {}},
                        env={"GRIDBUS_JOB_LEASE_DURATION": str(LEASE), "GRIDBUS_STARTD_REPORT_TIMEOUT": "2",
                             "GRIDBUS_TRANSFER_STALL_TIMEOUT": str(STALL)}) as pool:
        yield pool


@pytest.fixture
def settled(hosts: MultiHostPool) -> MultiHostPool:
    """The module's pool with every link up, no job in the queue and every slot unclaimed (what a
    failed test left in the queue is removed, so the next one starts clean)."""
    for host in hosts.hosts.values():
        host.link_up()
    left = sorted({j["ClusterId"] for j in hosts.jobs(SCHEDD)})
    if left:
        hosts.call(SCHEDD, "Remove", {"Ids": [str(c) for c in left], "Reason": "left by an earlier test"})
    wait_for("an empty queue", lambda: not hosts.jobs(SCHEDD), 60)
    wait_for("every slot unclaimed", lambda: all_unclaimed(hosts), 60)
    return hosts



@pytest.fixture(scope="module")
def laptop(hosts: MultiHostPool) -> Host:
    """A host with no daemon of the pool: a user's machine that runs the console only."""
    return hosts.hosts.get("laptop") or hosts.add_host("laptop")
