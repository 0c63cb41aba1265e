"""The end-to-end harness: a personal pool of real processes on a per-test vhost.

``pool`` starts a collector, a negotiator, a schedd and two startds (``a``: 4 static slots;
``b``: one partitionable slot of 4 cpus) and stops them all in a finally. Tests that need another
shape use ``make_pool`` and start the daemons they want.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.e2e.pool import Pool

pytestmark = pytest.mark.e2e

STATIC_STARTD = {"GRIDBUS_NUM_CPUS": "4", "GRIDBUS_NUM_SLOTS": "4", "GRIDBUS_MEMORY": "4096"}
PARTITIONABLE_STARTD = {"GRIDBUS_NUM_CPUS": "4", "GRIDBUS_MEMORY": "4096", "GRIDBUS_SLOT_TYPE_1": "100%",
                        "GRIDBUS_NUM_SLOTS_TYPE_1": "1", "GRIDBUS_SLOT_TYPE_1_PARTITIONABLE": "true"}


def start_standard(p: Pool, **a_env: str) -> Pool:
    """Start the standard pool's daemons in ``p`` (``a_env`` adds to startd ``a``'s settings) and
    wait for its 5 slots."""
    p.start("collector", "c")
    p.start("negotiator", "n")
    p.start("schedd", "s")
    p.start("startd", "a", **STATIC_STARTD, **a_env)
    p.start("startd", "b", **PARTITIONABLE_STARTD)
    p.wait_serving("collector@c", "schedd@s", "negotiator@n")
    p.wait_slots(5)
    return p


@pytest.fixture
def make_pool(amqp_url: str, tmp_path) -> Iterator[Callable[..., Pool]]:
    pools: list[Pool] = []

    def make(**env: str) -> Pool:
        p = Pool(amqp_url, tmp_path / f"pool{len(pools)}", **env)
        pools.append(p)
        return p

    try:
        yield make
    finally:
        for p in pools:
            p.stop()


@pytest.fixture
def pool(make_pool) -> Pool:
    return start_standard(make_pool())
