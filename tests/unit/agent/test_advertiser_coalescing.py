"""When the advertiser sends a change: at once after a quiet window (a first submit reaches the
negotiator, a claimed slot the collector, without waiting), a burst as one update at the end of
the window."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

from gridbus.agent import advertising
from gridbus.agent.advertising import Advertiser
from tests import virtual_clock


class Source:
    name = "schedd@s"
    address = "schedd@s"
    my_type = "Scheduler"
    start_time = 1
    update_interval = 3600.0
    lifetime = 7200.0

    def __init__(self) -> None:
        self.version = 0

    def ads(self) -> list[dict[str, Any]]:
        return [{"Name": self.name, "Version": self.version}]

    def private_ads(self) -> list[dict[str, Any]]:
        return []

    def ad_extras(self) -> dict[str, Any]:
        return {}


def test_a_change_after_a_quiet_window_goes_at_once_and_a_burst_as_one_update(monkeypatch):
    monkeypatch.setattr(advertising, "COALESCE_WINDOW", 1.5)
    source = Source()
    sent: list[tuple[float, int]] = []
    clock = SimpleNamespace()

    async def publish(exchange: str, key: str, body: Any, mtype: str) -> None:
        for ad in body.get("ads", []):
            sent.append((clock.monotonic(), ad["Version"]))

    async def scenario() -> list[tuple[float, int]]:
        # The advertiser's clock is the loop's virtual one: the windows take no real time.
        clock.monotonic = asyncio.get_running_loop().time
        monkeypatch.setattr(advertising, "time", clock)
        adv = Advertiser(source, publish, logging.getLogger("test"))
        tasks: list[asyncio.Task] = []
        adv.start(lambda coro, name: tasks.append(asyncio.get_running_loop().create_task(coro)) or tasks[-1])
        while not sent:  # the first round
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.6)  # a quiet window
        source.version = 1
        changed = clock.monotonic()
        adv.changed()
        while len(sent) < 2:
            await asyncio.sleep(0.01)
        assert sent[1][1] == 1 and sent[1][0] - changed < 1.0  # at once, not at the window's end
        for version in (2, 3, 4):  # a burst right behind it
            source.version = version
            adv.changed()
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        assert len(sent) == 2  # held to the window's end...
        while len(sent) < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        await adv.stop()
        return sent

    sent = virtual_clock.run(scenario())
    assert [v for _, v in sent] == [0, 1, 4]  # ...and then one update with the last state
    assert sent[2][0] - sent[1][0] >= 1.4
