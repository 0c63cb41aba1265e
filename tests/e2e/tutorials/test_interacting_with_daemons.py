"""HTCondor's Interacting-With-Daemons tutorial, cell by cell, against a personal pool.

Its last cell starts the master again with HTCondor's command (condor_master); gridbus's is
`gridbus pool up --detach`, run with the pool's configuration.
"""

from __future__ import annotations

import os

import pytest

from tests.e2e.pool import wait_for
from tests.e2e.tutorials.bindings import htcondor


@pytest.fixture(scope="module")
def state(tutorial_pool, workdir) -> dict:
    return {"pool": tutorial_pool, "tool_log": os.path.join(workdir, "tool.log")}


def test_param_reads_sets_and_reloads(capsys, state):
    print(htcondor.param["SCHEDD_LOG"])
    print(htcondor.param.get("TOOL_LOG"))
    htcondor.param["TOOL_LOG"] = "/tmp/log"
    print(htcondor.param["TOOL_LOG"])
    print(htcondor.param.get("TOOL_LOG"))
    htcondor.reload_config()
    print(htcondor.param.get("TOOL_LOG"))
    local_dir = state["pool"].get_config_val("LOCAL_DIR")
    assert capsys.readouterr().out.splitlines() == [
        f"{local_dir}/log/SchedLog", "None", "/tmp/log", "/tmp/log", "None"]
    assert "SCHEDD_LOG" in list(htcondor.param)


def test_subsystem_settings_win(capsys):
    htcondor.param["TEST_FOO"] = "foo"
    htcondor.param["SCHEDD.TEST_FOO"] = "bar"
    print(htcondor.param["TEST_FOO"])
    htcondor.set_subsystem("SCHEDD")
    print(htcondor.param["TEST_FOO"])
    assert capsys.readouterr().out.split() == ["foo", "bar"]


def test_remote_param_of_the_master(state):
    master_ad = htcondor.Collector().locate(htcondor.DaemonTypes.Master)
    assert master_ad["MyAddress"].startswith("master@")
    master_param = htcondor.RemoteParam(master_ad)
    remote = master_param["UPDATE_INTERVAL"]
    local = htcondor.param["UPDATE_INTERVAL"]
    assert isinstance(remote, str) and remote == "1"  # the pool's setting, as text
    assert not isinstance(local, str) and local == 1  # a number here
    with pytest.raises(htcondor.HTCondorException):  # as recorded: runtime config is off
        master_param["UPDATE_INTERVAL"] = "500"
    state["master_ad"] = master_ad


def test_tool_log_then_commands_to_the_master(state, capsys):
    htcondor.set_subsystem("TOOL")
    htcondor.param["TOOL_DEBUG"] = "D_FULLDEBUG"
    htcondor.param["TOOL_LOG"] = state["tool_log"]
    htcondor.enable_log()
    htcondor.enable_debug()
    assert open(state["tool_log"]).read() == ""  # as recorded: nothing logged yet

    master_ad = state["master_ad"]
    master_log = htcondor.param["MASTER_LOG"]
    htcondor.send_command(master_ad, htcondor.DaemonCommands.Reconfig)
    assert "Reconfig" in open(state["tool_log"]).read()  # what the command did, in the tool's log
    assert "Reconfig" in capsys.readouterr().err  # and on stderr (enable_debug)
    wait_for("the master to log its reconfig", lambda: "reconfigured" in open(master_log).read(), 10)
    last = [line for line in open(master_log).readlines() if "reconfigured" in line][-1]
    assert "signalled" in last and "SCHEDD" in last

    htcondor.send_command(master_ad, htcondor.DaemonCommands.DaemonOff, "SCHEDD")
    wait_for("the schedd stop in the master's log", lambda: "stopped SCHEDD" in open(master_log).read(), 30)
    wait_for("the Master ad to say the schedd is stopped",
             lambda: htcondor.Collector().query(htcondor.AdTypes.Master)[0].get("ScheddState") == "Stopped", 10)

    htcondor.send_command(master_ad, htcondor.DaemonCommands.OffFast)
    wait_for("the master to exit", lambda: "exiting" in open(master_log).readlines()[-1], 30)


def test_start_the_master_again(state):
    done = state["pool"].run_command(["gridbus", "pool", "up", "--detach"])
    assert done.returncode == 0, done.stderr
    ad = wait_for("the schedd back", lambda: htcondor.Collector().locate(htcondor.DaemonTypes.Schedd), 30)
    assert ad["MyType"] == "Scheduler"
