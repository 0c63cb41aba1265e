"""The agents' failover connection over a list of brokers, against the real broker: a dead broker
first in the list is passed over, and a lost connection goes round the list (past the dead one)
back to a broker that answers, with its name unchanged."""

from __future__ import annotations

import asyncio
import time

from gridbus.agent import failover
from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from tests.helpers import wait_for

DEAD = "amqp://guest:guest@127.0.0.1:1/"  # nothing listens on port 1


def test_a_dead_broker_is_passed_over_and_a_lost_connection_comes_back(
        broker_url: BrokerURL, vhost: str, mgmt: Management) -> None:
    live = broker_url.with_vhost(vhost).url
    url = BrokerURL(f"{BrokerURL(DEAD).with_vhost(vhost).url},{live}")
    name = f"gridbus failover-test-{time.monotonic_ns()}"

    async def scenario() -> list[str]:
        conn = await failover.connect(url, name=name, reconnect_interval=0.2)
        seen = [conn.broker]
        reconnected = asyncio.Event()
        conn.reconnect_callbacks.add(lambda *_: reconnected.set())
        # Close it from the broker's side: the connection tries the next in the list (the dead
        # one), fails, and comes round to the live one again.
        found = await asyncio.to_thread(wait_for, lambda: [c["name"] for c in mgmt.connections(vhost)
                                                           if c["client_properties"].get("connection_name") == name],
                                        10, "the connection in the management API")
        await asyncio.to_thread(mgmt.close_connection, found[0])
        await asyncio.wait_for(reconnected.wait(), 20)
        seen.append(conn.broker)
        await conn.close()
        return seen

    assert asyncio.run(scenario()) == ["127.0.0.1:" + str(broker_url.port)] * 2
