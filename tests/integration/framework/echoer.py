"""A small agent for the framework tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gridbus.agent import Agent, Call, method
from gridbus.schema import Schema, builtin

SCHEMA = builtin().merge(Schema.from_file(Path(__file__).with_name("testagent.toml")))


class Echoer(Agent):
    kind = "echoer"
    classes = ("echoer",)
    my_type = "Echoer"

    def __init__(self, name: str, url: str, color: str = "blue", **kw):
        super().__init__(name, url, schema=SCHEMA, **kw)
        self.color = color
        self.dripped = 0  # chunks Drip has made

    def object_properties(self) -> dict:
        return {**super().object_properties(), "Color": self.color}

    @method("echoer")
    async def Add(self, call: Call, A: int, B: int) -> dict:
        return {"Sum": A + B}

    @method("echoer")
    async def Echo(self, call: Call, Value) -> dict:
        return {"Value": Value}

    @method("echoer")
    async def WhoAmI(self, call: Call) -> dict:
        return {"User": call.require_user()}

    @method("echoer")
    async def Explode(self, call: Call) -> dict:
        raise RuntimeError("boom")

    @method("echoer")
    async def Count(self, call: Call, N: int):
        for start in range(0, N, 100):
            yield {"Items": list(range(start, min(N, start + 100)))}

    @method("echoer")
    async def Drip(self, call: Call, N: int, Pause: float):
        for i in range(N):
            await asyncio.sleep(Pause)
            self.dripped += 1
            yield {"Items": [i]}
