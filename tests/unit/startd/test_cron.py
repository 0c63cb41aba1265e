"""Startd cron (STARTD_CRON_*) and STARTD_ATTRS: the knobs, the jobs' output, failures, hangs."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from gridbus import classad
from gridbus.agents.startd import cron
from gridbus.agents.startd.settings import StartdSettings
from gridbus.config import Config


def config(**values) -> Config:
    return Config(values, env={})


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_the_jobs_as_their_knobs_say():
    cfg = config(STARTD_CRON_JOBLIST="health, gpu", STARTD_CRON_health_EXECUTABLE="/bin/health",
                 STARTD_CRON_health_PERIOD="5m", STARTD_CRON_health_PREFIX="hc_", STARTD_CRON_health_ARGS="-v 'a b'",
                 STARTD_CRON_gpu_EXECUTABLE="/bin/gpu", STARTD_CRON_gpu_MODE="OneShot", STARTD_CRON_gpu_KILL="true")
    health, gpu = cron.jobs_from_config(cfg)
    assert (health.name, health.period, health.mode, health.prefix, health.args) == ("health", 300.0, "Periodic", "hc_",
                                                                                      ("-v", "a b"))
    assert (gpu.mode, gpu.period, gpu.kill) == ("OneShot", 0.0, True)
    assert StartdSettings.from_config(cfg).cron_jobs == (health, gpu)


@pytest.mark.parametrize("kill, expected", [(None, False), ("", False), (" ", False), ("on", True), ("T", True),
                                            (True, True), ("no", False), (0, False)])
def test_kill_is_a_true_false_knob_and_empty_is_unset(kill, expected):
    knobs = {"STARTD_CRON_x_EXECUTABLE": "/bin/h", "STARTD_CRON_x_MODE": "OneShot"}
    if kill is not None:
        knobs["STARTD_CRON_x_KILL"] = kill
    (job,) = cron.jobs_from_config(config(STARTD_CRON_JOBLIST="x", **knobs))
    assert job.kill is expected


@pytest.mark.parametrize("values, why", [
    ({"STARTD_CRON_x_EXECUTABLE": "health"}, "EXECUTABLE must be an absolute path"),
    ({"STARTD_CRON_x_EXECUTABLE": "/bin/h"}, "STARTD_CRON_x_PERIOD is needed in Periodic mode"),
    ({"STARTD_CRON_x_EXECUTABLE": "/bin/h", "STARTD_CRON_x_PERIOD": "5 days"}, "not a period"),
    ({"STARTD_CRON_x_EXECUTABLE": "/bin/h", "STARTD_CRON_x_PERIOD": "0.5"}, "at least 1 second"),
    ({"STARTD_CRON_x_EXECUTABLE": "/bin/h", "STARTD_CRON_x_MODE": "Hourly"}, "not one of Periodic"),
    ({"STARTD_CRON_x_EXECUTABLE": "/bin/h", "STARTD_CRON_x_MODE": "OneShot", "STARTD_CRON_x_PREFIX": "a-b"},
     "only letters, digits and _"),
    ({"STARTD_CRON_x_EXECUTABLE": "/bin/h", "STARTD_CRON_x_MODE": "OneShot", "STARTD_CRON_x_KILL": "maybe"},
     "STARTD_CRON_x_KILL: 'maybe' is not a valid bool"),
])
def test_a_bad_job_names_its_knob(values, why):
    with pytest.raises(ValueError, match=why):
        cron.jobs_from_config(config(STARTD_CRON_JOBLIST="x", **values))


def test_startd_attrs_and_exprs_add_configured_values():
    cfg = config(STARTD_ATTRS="HasMatlab, NODE_IS_HEALTHY", STARTD_EXPRS="Site", HasMatlab=True,
                 NODE_IS_HEALTHY="true", Site='"north"')
    attrs = cron.configured_attrs(cfg)
    assert attrs == {"HasMatlab": True, "NODE_IS_HEALTHY": True, "Site": "north"}
    assert isinstance(cron.configured_attrs(config(STARTD_ATTRS="Fast", Fast="Cpus > 4"))["Fast"], classad.ExprTree)
    with pytest.raises(ValueError, match="names Missing, which is not configured"):
        cron.configured_attrs(config(STARTD_ATTRS="Missing"))


def test_an_output_line_is_one_attribute():
    assert cron.parse_line("NODE_IS_HEALTHY = false", "hc_") == ("hc_NODE_IS_HEALTHY", False)
    with pytest.raises(ValueError):
        cron.parse_line("all good here", "")


async def _until(predicate, timeout=10.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_periodic_job_reports_each_period(tmp_path):
    asyncio.run(_a_periodic_job_reports_each_period(tmp_path))


async def _a_periodic_job_reports_each_period(tmp_path):
    counter = tmp_path / "n"
    exe = script(tmp_path, "health.sh", f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}\n'
                                        'echo "Runs = $n"\necho "NODE_IS_HEALTHY = $([ $n -lt 2 ] && echo true || echo false)"\n')
    reports = []
    c = cron.StartdCron((cron.CronJob("health", exe, period=1.0, prefix="hc_"),), reports.append)
    c.start()
    try:
        await _until(lambda: c.attributes.get("hc_Runs") == 2, timeout=5)
    finally:
        await c.stop()
    assert c.attributes == {"hc_Runs": 2, "hc_NODE_IS_HEALTHY": False}
    assert reports[:2] == [True, True]
    assert cron.publishes("If_Changed", True) and not cron.publishes("Never", True) and cron.publishes("Always", False)


def test_a_failing_job_and_a_bad_line_are_reported_in_the_startlog(tmp_path, caplog):
    asyncio.run(_a_failing_job_and_a_bad_line_are_reported_in_the_startlog(tmp_path, caplog))


async def _a_failing_job_and_a_bad_line_are_reported_in_the_startlog(tmp_path, caplog):
    exe = script(tmp_path, "fail.sh", 'echo "Good = 1"\necho "not an attribute"\necho "disk is gone" >&2\nexit 3\n')
    c = cron.StartdCron((cron.CronJob("check", exe, mode="OneShot"),), lambda changed: None)
    with caplog.at_level(logging.WARNING, logger="gridbus.startd"):
        c.start()
        await _until(lambda: "exited with status 3" in caplog.text)
        await c.stop()
    assert "STARTD_CRON job check (" in caplog.text and "exited with status 3: disk is gone" in caplog.text
    assert "printed a line that is no ClassAd attribute" in caplog.text
    assert c.attributes == {"Good": 1}  # what it did print stands


def test_a_hanging_job_is_killed_when_kill_is_set(tmp_path, caplog):
    asyncio.run(_a_hanging_job_is_killed_when_kill_is_set(tmp_path, caplog))


async def _a_hanging_job_is_killed_when_kill_is_set(tmp_path, caplog):
    started = tmp_path / "starts"
    exe = script(tmp_path, "hang.sh", f'echo x >> {started}\necho "Up = true"\nexec sleep 60\n')
    c = cron.StartdCron((cron.CronJob("hang", exe, period=1.0, kill=True),), lambda changed: None)
    with caplog.at_level(logging.WARNING, logger="gridbus.startd"):
        c.start()
        await _until(lambda: started.exists() and len(started.read_text().split()) >= 2, timeout=10)
        await c.stop()
    assert "still running after its period (1 s): killed" in caplog.text
    assert "was killed by signal 15" in caplog.text


def test_a_wait_for_exit_job_reports_at_each_dash(tmp_path):
    asyncio.run(_a_wait_for_exit_job_reports_at_each_dash(tmp_path))


async def _a_wait_for_exit_job_reports_at_each_dash(tmp_path):
    exe = script(tmp_path, "stream.sh", 'echo "Load = 1"\necho "-"\necho "Load = 2"\necho "- update"\nexec sleep 60\n')
    c = cron.StartdCron((cron.CronJob("stream", exe, period=1.0, mode="WaitForExit"),), lambda changed: None)
    c.start()
    try:
        await _until(lambda: c.attributes.get("Load") == 2)
    finally:
        await c.stop()


def test_a_job_still_running_when_the_startd_stops_is_killed(tmp_path):
    asyncio.run(_a_job_still_running_when_the_startd_stops_is_killed(tmp_path))


async def _a_job_still_running_when_the_startd_stops_is_killed(tmp_path):
    # Stopping cancels the job's task while it reads the job's output: the job (its own session)
    # is killed then, not left running after the startd has gone.
    pidfile = tmp_path / "pid"
    exe = script(tmp_path, "long.sh", f'echo $$ > {pidfile}.new && mv {pidfile}.new {pidfile}\necho "Up = true"\n'
                                      'echo "-"\nexec sleep 60\n')
    c = cron.StartdCron((cron.CronJob("long", exe, period=1.0, mode="WaitForExit"),), lambda changed: None)
    c.start()
    try:
        await _until(lambda: c.attributes.get("Up") is True and pidfile.exists())
    finally:
        await c.stop()
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
