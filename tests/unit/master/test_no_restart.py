"""A daemon that exits with HTCondor's DAEMON_NO_RESTART status is not started again by its master,
which keeps the sentence it stopped with for its ad (LastExitReason)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agents.master.children import Backoff, DaemonProcess
from gridbus.topology import DAEMON_NO_RESTART

REPO = Path(__file__).resolve().parents[3]


def test_a_daemon_that_says_do_not_restart_stays_stopped(tmp_path: Path) -> None:
    async def scenario() -> DaemonProcess:
        changed = asyncio.Event()
        env = dict(os.environ, PYTHONPATH=str(REPO))
        daemon = DaemonProcess("refusing", "tests.unit.master.refusing_daemon", [], env=env, run_dir=tmp_path,
                               output=tmp_path / "out", backoff=Backoff(constant=0.0, factor=0.0),
                               stop_timeout=5, on_change=changed.set)
        daemon.wanted = True
        await daemon.start()
        while daemon.last_exit is None:
            changed.clear()
            await asyncio.wait_for(changed.wait(), 30)
        await asyncio.sleep(0)
        return daemon

    daemon = asyncio.run(scenario())
    assert daemon.last_exit == DAEMON_NO_RESTART
    assert daemon.state == "Stopped" and daemon.total_restarts == 0
    assert "needs durable quorum" in (tmp_path / "out").read_text()
    sentence = "queue q exists as durable classic {} but this version needs durable quorum {}"
    assert daemon.exit_reason == sentence
    assert daemon.record()["LastExitReason"] == sentence and daemon.record()["LastExitCode"] == DAEMON_NO_RESTART
