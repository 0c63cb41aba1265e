"""The personal pool with the real daemons, through the `gridbus` command.

`gridbus pool up --detach` starts the master and its collector, negotiator, schedd, startd and web
console;
the management API shows the exchanges of DESIGN.md and one named connection per daemon; a
daemon killed with -9 comes back; `gridbus pool down` leaves no process behind.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from gridbus.mgmt import Management
from tests.integration.master.helpers import (
    REPO,
    alive,
    env_for,
    gridbus,
    processes_mentioning,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

DAEMONS = ["COLLECTOR", "NEGOTIATOR", "SCHEDD", "STARTD", "WEB"]


def status_table(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines() if line.split() and line.split()[0] in DAEMONS}


def test_pool_up_status_kill_restart_and_down(tmp_path: Path, amqp_url: str, mgmt: Management, vhost: str):
    local = tmp_path / "local"
    env = env_for(local, amqp_url, UPDATE_INTERVAL="1", NEGOTIATOR_INTERVAL="1",
                  MASTER_BACKOFF_CONSTANT="0", MASTER_BACKOFF_FACTOR="0.5")
    env["PYTHONPATH"] = str(REPO)
    try:
        up = gridbus(env, tmp_path, "pool", "up", "--detach", "--timeout", "60")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "personal pool up" in up.stdout

        st = gridbus(env, tmp_path, "pool", "status")
        assert st.returncode == 0, st.stdout + st.stderr
        rows = status_table(st.stdout)
        assert sorted(rows) == sorted(DAEMONS) and all(r[1] == "Alive" for r in rows.values()), st.stdout
        master_pid = int((local / "run" / "master.pid").read_text())

        # The management API: DESIGN.md's exchanges, and one named connection per daemon.
        kinds = {e["name"]: e["type"] for e in mgmt.exchanges(vhost)}
        assert (kinds["gridbus.ads"], kinds["gridbus.rpc"], kinds["gridbus.events"]) == ("topic", "direct", "topic")

        def connection_names() -> list[str]:
            conns = mgmt.connections(vhost)
            return sorted(str((c.get("client_properties") or {}).get("connection_name", "")) for c in conns)

        def one_per_daemon() -> list[str]:
            names = [n for n in connection_names() if n.startswith("gridbus ")]
            per_kind = sorted(n.removeprefix("gridbus ").split("@")[0] for n in names)
            return names if per_kind == ["collector", "master", "negotiator", "schedd", "startd", "web"] else []

        wait_for(one_per_daemon, 30, "one named connection per daemon")

        # A second personal pool on the same vhost (another user's, named after the same host)
        # would split this pool's requests: it starts nothing, and says why.
        other = env_for(tmp_path / "other", amqp_url)
        second = gridbus(other, tmp_path, "pool", "up", "--detach", "--timeout", "60")
        assert second.returncode == 1, second.stdout + second.stderr
        assert "a personal pool already runs" in second.stderr and "gridbus pool down" in second.stderr, second.stderr
        assert f"LOCAL_DIR {local}" in second.stderr and "--local-dir DIR" in second.stderr, second.stderr
        assert not (tmp_path / "other" / "run" / "master.pid").exists()

        # kill -9 the schedd: the master starts a new one, and it connects again.
        schedd = int(rows["SCHEDD"][2])
        os.kill(schedd, signal.SIGKILL)

        def restarted() -> bool:
            rows = status_table(gridbus(env, tmp_path, "pool", "status").stdout)
            return rows.get("SCHEDD", [""] * 4)[1] == "Alive" and int(rows["SCHEDD"][2]) != schedd and rows["SCHEDD"][3] == "1"

        wait_for(restarted, 30, "the schedd restarted by the master", poll=0.5)
        wait_for(one_per_daemon, 30, "the new schedd's connection (and the old one gone)")

        pids = [master_pid, *(int(p.read_text()) for p in (local / "run").glob("*.pid"))]
        down = gridbus(env, tmp_path, "pool", "down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert "down" in down.stdout
        assert not [p for p in pids if alive(p)]
        assert processes_mentioning(str(local)) == []
        assert list((local / "run").glob("*.pid")) == []
        again = gridbus(env, tmp_path, "pool", "down")
        assert again.returncode == 0 and "no personal pool runs here" in again.stdout
        assert gridbus(env, tmp_path, "pool", "status").returncode == 1
    finally:
        for pid in processes_mentioning(str(local)):  # never leave a pool behind a failed test
            os.kill(pid, signal.SIGKILL)


def test_pool_up_says_what_to_do_when_no_broker_answers(tmp_path: Path):
    # A local port where nothing listens (not the default node's 5672), and a PATH without
    # RabbitMQ's sbin: pool up must not start anything and must say how to get a broker.
    url = "amqp://guest:guest@127.0.0.1:1/"
    env = env_for(tmp_path / "local", url)
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    out = gridbus(env, tmp_path, "pool", "up", "--detach", timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "does not answer" in out.stderr and "not this machine's default RabbitMQ node" in out.stderr
    assert not (tmp_path / "local" / "run" / "master.pid").exists()
