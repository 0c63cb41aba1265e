"""Ad messages the broker drops (the collector's ads queue is drop-head: under a flood its oldest
messages go) are noticed by their sender's message sequence, counted as UpdatesLost, and made good
at once: the collector asks that sender to advertise again, instead of holding the lost states
until the sender's next full round, minutes later, while the negotiator matches on them."""

from __future__ import annotations

from typing import Any

import pytest

from gridbus.agent.threaded import AgentThread
from gridbus.console.collector import AdType
from tests.integration.collector.advertiser import Advertiser
from tests.integration.collector.conftest import stats, wait_for

pytestmark = pytest.mark.broker


class SlotsByName(Advertiser):
    """An advertiser that re-sends only the ads that changed, as a startd re-sends its slots, and
    that is a managed object (as every daemon is) to be asked to Advertise."""

    classes = ("advertiser",)

    def ads_named(self, names: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return [a for a in self.extra_ads if a["Name"] in names], []


def slot(name: str, state: str) -> dict[str, Any]:
    return {"MyType": "Machine", "Name": name, "State": state}


def state(client, name: str) -> str | None:
    ads = client.query(AdType.Startd, f'Name == "{name}"', ["State"])
    return ads[0]["State"] if ads else None


def test_a_lost_update_is_made_good_by_asking_its_sender_again(collector, client, session, amqp_url):
    agent = SlotsByName("sim", amqp_url, ads=[slot("a@sim", "Unclaimed"), slot("b@sim", "Unclaimed")],
                        update_interval=600.0)  # no full round during the test but the first
    with AgentThread(agent) as thread:
        wait_for(lambda: state(client, "a@sim") == "Unclaimed" and state(client, "b@sim"), 10, "the first round")
        publish, dropped = agent.advertiser.publish, []

        async def lose_the_next(exchange, key, body, mtype):
            if not dropped:  # as the broker's drop-head would: the message never reaches the queue
                dropped.append(body)
                return
            await publish(exchange, key, body, mtype)

        agent.advertiser.publish = lose_the_next

        async def change(name: str, to: str) -> None:
            next(a for a in agent.extra_ads if a["Name"] == name)["State"] = to
            agent.ads_changed({name})

        thread.call(change("a@sim", "Claimed"))
        wait_for(lambda: dropped, 10, "the update of a@sim to be lost")
        assert state(client, "a@sim") == "Unclaimed"
        # The next update of another slot carries the next number: the gap tells the collector.
        thread.call(change("b@sim", "Claimed"))
        wait_for(lambda: state(client, "a@sim") == "Claimed", 10, "a@sim made good by a new round")
        assert state(client, "b@sim") == "Claimed"
        s = stats(session)
        assert s["UpdatesLost"] == 1 and s["ReadvertisementsAsked"] == 1
