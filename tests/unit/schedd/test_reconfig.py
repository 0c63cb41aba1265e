"""A reconfig applies the schedd's knobs it names and names only those it applied: the super
users change at once, SCHEDD_INTERVAL sets the ad interval and UPDATE_INTERVAL does not, and a
knob that needs a restart is not reported as applied."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gridbus.config import Config
from tests.unit.schedd.inproc import make_schedd


def test_reconfig_applies_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    conf = tmp_path / "gridbus.toml"
    conf.write_text("SCHEDD_INTERVAL = 300\nUPDATE_INTERVAL = 300\n")
    monkeypatch.setenv("GRIDBUS_CONFIG", str(conf))

    async def main() -> None:
        schedd = make_schedd(tmp_path / "spool", update_interval=300.0)
        schedd.config = Config.load(daemon="schedd")
        conf.write_text('SCHEDD_INTERVAL = 42\nUPDATE_INTERVAL = 7\nQUEUE_SUPER_USERS = ["carol"]\n'
                        'SCHEDD_QUEUE_SYNC = "NORMAL"\nPERIODIC_EXPR_INTERVAL = 5\n')
        applied = await schedd.reconfig()
        assert set(applied) == {"SCHEDD_INTERVAL", "QUEUE_SUPER_USERS", "PERIODIC_EXPR_INTERVAL"}
        assert schedd.update_interval == 42 and schedd.lifetime == 126
        assert schedd.is_super("carol")
        assert schedd.settings.periodic_interval == 5 and schedd.settings.queue_sync == "FULL"
        schedd.queue.store.close()

    asyncio.run(main())
