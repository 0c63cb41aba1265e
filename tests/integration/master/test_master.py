"""The master on the real broker: it runs daemons as processes, restarts one killed with -9,
serves Start/Stop/Restart/Reconfig, and leaves nothing behind when it stops."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from gridbus.console import Session
from gridbus.status import Status
from tests.integration.master.helpers import alive, env_for, start_master, stop_process, wait_for

pytestmark = pytest.mark.broker

ECHO = "tests.integration.master.echo_daemon"


def write_config(path: Path, daemons: list[str], update_interval: float = 1.0) -> None:
    lines = [
        f"DAEMON_LIST = {['MASTER', *daemons]!r}".replace("'", '"'),
        f"UPDATE_INTERVAL = {update_interval}",
        # Restart at once in the tests: constant 0, factor 0.5 -> 1 s, 0.5 s, 0.25 s ...
        "MASTER_BACKOFF_CONSTANT = 0",
        "MASTER_BACKOFF_FACTOR = 0.5",
        "SHUTDOWN_GRACEFUL_TIMEOUT = 10",
    ]
    for d in daemons:
        lines += [f'{d} = "{ECHO}"', f'{d}_ARGS = "--name {d.lower()}"']
    path.write_text("\n".join(lines) + "\n")


def daemons_of(session: Session) -> dict[str, dict]:
    masters = session.getObjects(_class="master")
    assert len(masters) == 1, masters
    return {d["Name"]: d for d in masters[0].Daemons}


def all_alive(session: Session, names: list[str]) -> dict[str, dict]:
    ds = daemons_of(session)
    ok = sorted(ds) == sorted(names) and all(d["State"] == "Alive" and d["Pid"] for d in ds.values())
    return ds if ok else {}


@pytest.fixture
def pool(tmp_path: Path, amqp_url: str):
    config = tmp_path / "gridbus.toml"
    write_config(config, ["ECHOA", "ECHOB"])
    env = env_for(tmp_path / "local", amqp_url)
    proc = start_master(config, env, tmp_path / "master.out")
    # The master writes its pid file once it has declared the exchanges a console calls through.
    wait_for(lambda: (tmp_path / "local" / "run" / "master.pid").exists() or proc.poll() is not None, 30, "the master's pid file")
    assert proc.poll() is None, (tmp_path / "master.out").read_text()
    session = Session(amqp_url, timeout=10)
    try:
        yield proc, session, config, tmp_path / "local"
    finally:
        session.close()
        if proc.poll() is None:
            stop_process(proc)


def test_master_runs_restarts_and_stops_its_daemons(pool):
    proc, session, config, local = pool
    ds = wait_for(lambda: all_alive(session, ["ECHOA", "ECHOB"]), 30, "both daemons alive")
    # The daemons are on the bus: each echoer answers.
    wait_for(lambda: sorted(o.Name for o in session.getObjects(_class="echoer")) == ["echoa", "echob"], 20, "echoers")
    # Pid files for the master and each daemon, naming the live processes.
    run = local / "run"
    assert int((run / "master.pid").read_text()) == proc.pid
    assert int((run / "echoa.pid").read_text()) == ds["ECHOA"]["Pid"]

    # kill -9 a daemon: the master restarts it (new pid), counts the restart, and it serves again.
    old = ds["ECHOA"]["Pid"]
    os.kill(old, signal.SIGKILL)
    ds = wait_for(
        lambda: (d := all_alive(session, ["ECHOA", "ECHOB"])) and d["ECHOA"]["Pid"] != old and d,
        20, "ECHOA restarted",
    )
    assert ds["ECHOA"]["Restarts"] == 1 and ds["ECHOA"]["LastExitCode"] == -signal.SIGKILL
    assert ds["ECHOB"]["Restarts"] == 0
    master = session.getObjects(_class="master")[0]
    assert dict(master.getStatistics())["DaemonRestarts"] == 1
    wait_for(lambda: session.call("echoer@echoa", "Add", {"A": 1, "B": 2}, timeout=3).Sum == 3, 20, "echoa serving")

    # Stop keeps a daemon down; Start brings it back; Restart gives it a new process.
    r = master.Stop("ECHOB")
    assert r.status == 0 and r.Stopped == ["ECHOB"], r.text
    b_pid = ds["ECHOB"]["Pid"]
    assert not alive(b_pid)
    assert daemons_of(session)["ECHOB"]["State"] == "Stopped"
    r = master.Start("ECHOB")
    assert r.status == 0 and r.Pid > 0 and alive(r.Pid)
    r2 = master.Restart("ECHOB")
    assert r2.status == 0 and r2.Restarted == ["ECHOB"] and r2.Pids["ECHOB"] != r.Pid
    assert not alive(r.Pid) and alive(r2.Pids["ECHOB"])

    # Bad arguments are answered with a sentence, and the master serves on.
    bad = master.Start("NOSUCH")
    assert bad.status == Status.INVALID_PARAMETER and "NOSUCH" in bad.text and "ECHOA" in bad.text
    bad = master.Stop("MASTER")
    assert bad.status == Status.INVALID_PARAMETER and "pool down" in bad.text

    # A graceful stop of the master stops every daemon and removes the pid files.
    pids = [d["Pid"] for d in daemons_of(session).values()]
    assert stop_process(proc) == 0
    assert not any(alive(p) for p in pids)
    assert not (run / "master.pid").exists() and not (run / "echoa.pid").exists()


def test_reconfig_applies_daemon_list_and_sighups_the_rest(pool):
    proc, session, config, local = pool
    ds = wait_for(lambda: all_alive(session, ["ECHOA", "ECHOB"]), 30, "both daemons alive")
    wait_for(lambda: session.call("echoer@echoa", "Add", {"A": 1}, timeout=3).Sum == 1, 20, "echoa serving")
    write_config(config, ["ECHOA", "ECHOC"], update_interval=2.0)
    r = session.getObjects(_class="master")[0].Reconfig()
    assert r.status == 0, r.text
    assert "DAEMON_LIST" in r.Changed and "UPDATE_INTERVAL" in r.Changed and "ECHOC" in r.Changed
    assert r.Signalled == ["ECHOA"]
    assert not alive(ds["ECHOB"]["Pid"])
    assert alive(ds["ECHOA"]["Pid"])  # kept, not restarted
    ds2 = wait_for(lambda: all_alive(session, ["ECHOA", "ECHOC"]), 20, "ECHOC started, ECHOB gone")
    assert ds2["ECHOA"]["Pid"] == ds["ECHOA"]["Pid"]
    # ECHOA re-read its knobs on SIGHUP and says what changed in its log.
    log = local / "log" / "EchoEchoaLog"
    wait_for(lambda: re.search(r"reconfigured on SIGHUP; changed: .*UPDATE_INTERVAL", log.read_text()), 10, "ECHOA's reconfig in its log")


def test_a_master_killed_with_sigkill_takes_its_daemons_with_it(pool):
    proc, session, config, local = pool
    ds = wait_for(lambda: all_alive(session, ["ECHOA", "ECHOB"]), 30, "both daemons alive")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    for d in ds.values():
        wait_for(lambda d=d: not alive(d["Pid"]), 10, f"{d['Name']} gone with its master")


def test_a_second_master_on_the_same_local_dir_refuses_to_start(pool, tmp_path: Path, amqp_url: str):
    proc, session, config, local = pool
    wait_for(lambda: all_alive(session, ["ECHOA", "ECHOB"]), 30, "both daemons alive")
    second = start_master(config, env_for(local, amqp_url, MASTER_NAME="second"), tmp_path / "second.out")
    assert second.wait(30) != 0
    assert "another master" in (tmp_path / "second.out").read_text()
    assert proc.poll() is None


def test_the_master_restarts_itself_and_turns_itself_off(pool):
    proc, session, config, local = pool
    before = wait_for(lambda: all_alive(session, ["ECHOA", "ECHOB"]), 30, "both daemons alive")
    master = session.getObjects(_class="master")[0]
    r = session.call(master._agent, "Restart", {"Master": True})
    assert r.status == 0 and r.Pids == {"MASTER": proc.pid}, r.text
    # The same process (exec keeps the pid), with new daemons.
    after = wait_for(lambda: (d := all_alive(session, ["ECHOA", "ECHOB"]))
                     and d["ECHOA"]["Pid"] != before["ECHOA"]["Pid"] and d, 30, "daemons started again")
    assert proc.poll() is None and not alive(before["ECHOA"]["Pid"])
    assert int((local / "run" / "master.pid").read_text()) == proc.pid
    r = session.call(master._agent, "Off", {"Graceful": False})
    assert r.status == 0 and sorted(r.Daemons) == ["ECHOA", "ECHOB"]
    assert proc.wait(30) == 0
    assert not alive(after["ECHOA"]["Pid"]) and not (local / "run" / "master.pid").exists()
