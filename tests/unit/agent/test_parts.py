"""An agent composed of parts serves the @method handlers of each part, bound to that part, with
the same request checks as its own; a method served twice, or a part not declared, is refused."""

from __future__ import annotations

import asyncio

import pytest

from gridbus.agent import Agent, method
from gridbus.agent.objects import Call

URL = "amqp://guest:guest@127.0.0.1:1/"  # never dialled


class Listing:
    def __init__(self, jobs: list[str]) -> None:
        self.jobs = jobs

    @method("scheduler")
    async def GetAd(self, call: Call, Id: str) -> dict:
        return {"JobAd": {"Id": Id, "Known": Id in self.jobs}}


class Other:
    @method("scheduler", "GetAd")
    async def AnotherGetAd(self, call: Call, Id: str) -> dict:
        return {}


class Composed(Agent):
    kind = "schedd"
    classes = ("scheduler",)
    part_classes = (Listing,)


def test_a_parts_handler_is_served_bound_to_the_part():
    agent = Composed("t", URL)
    part = Listing(["1.0"])
    agent.add_parts(part)
    assert ("scheduler", "GetAd") in Composed._collect_handlers()
    handler = agent._handlers[("scheduler", "GetAd")]
    assert handler.__self__ is part
    call = agent.dispatcher.make_call({"method": "GetAd", "args": {"Id": "1.0"}}, agent.url.user, None)
    assert asyncio.run(handler(call, **call.args)) == {"JobAd": {"Id": "1.0", "Known": True}}
    with pytest.raises(Exception, match="Id"):  # the schema's validation, as for the agent's own
        agent.dispatcher.make_call({"method": "GetAd", "args": {"Id": 12}}, agent.url.user, None)


def test_a_method_served_twice_or_an_undeclared_part_is_refused():
    agent = Composed("t", URL)
    agent.add_parts(Listing([]))
    with pytest.raises(TypeError, match="served twice"):
        agent.add_parts(Listing([]))
    with pytest.raises(TypeError, match="part_classes"):
        Composed("u", URL).add_parts(Other())

    class Both(Composed):
        part_classes = (Listing, Other)

    with pytest.raises(TypeError, match="served by both"):
        Both._collect_handlers()
