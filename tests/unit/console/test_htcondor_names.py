"""htcondor2's names in gridbus.console, checked against the real htcondor2 where it has them."""

from __future__ import annotations

import asyncio
import inspect
import time

import htcondor2
import pytest

import gridbus.console as htcondor
from gridbus.agent.dutycycle import DutyCycle
from gridbus.console import daemons


def test_names_exist_with_htcondor2_values():
    assert htcondor.DaemonTypes is htcondor.DaemonType and htcondor.AdTypes is htcondor.AdType
    for ours, theirs in ((htcondor.DaemonType, htcondor2.DaemonType), (htcondor.AdType, htcondor2.AdType),
                         (htcondor.DaemonCommands, htcondor2.DaemonCommands)):
        assert {m.name: int(m) for m in ours} == {m.name: int(m) for m in theirs}
    for name in ("param", "reload_config", "set_subsystem", "enable_debug", "enable_log", "send_command",
                 "RemoteParam", "HTCondorException"):
        assert getattr(htcondor, name) is not None
    assert inspect.signature(htcondor.send_command).parameters.keys() == {"ad", "dc", "target"}
    assert htcondor.personal.PersonalPool is not None


def test_every_api_error_is_an_htcondor_exception():
    from gridbus.console.collector import DaemonNotFound, NoCollector
    from gridbus.submit.errors import SubmitError

    for kind in (htcondor.CallFailed, htcondor.CallTimeout, htcondor.BrokerUnreachable, NoCollector,
                 DaemonNotFound, SubmitError):
        assert issubclass(kind, htcondor.HTCondorException), kind
    with pytest.raises(htcondor.HTCondorException):
        htcondor.Submit({"request_cpus": "1"}).jobs()  # no executable
    with pytest.raises(ValueError):  # still the Python kind too
        htcondor.send_command({"MyAddress": "nowhere"}, htcondor.DaemonCommands.Reconfig)


@pytest.fixture
def fresh_param(monkeypatch, tmp_path):
    (tmp_path / "gridbus.toml").write_text('UPDATE_INTERVAL = 5\nLOCAL_DIR = "/pool"\n[schedd]\nTEST_SECTION = "s"\n')
    monkeypatch.setenv("GRIDBUS_CONFIG", str(tmp_path / "gridbus.toml"))
    htcondor.reload_config()
    htcondor.set_subsystem("TOOL")
    yield htcondor.param
    htcondor.reload_config()
    htcondor.set_subsystem("TOOL")


def test_param_is_typed_settable_and_reloadable(fresh_param):
    param = fresh_param
    assert param["UPDATE_INTERVAL"] == 5.0 and param["update_interval"] == 5.0
    assert param["MASTER_LOG"] == "/pool/log/MasterLog"
    assert param.get("TOOL_LOG") is None and "TOOL_LOG" not in param
    param["TOOL_LOG"] = "/tmp/x"
    param["UPDATE_INTERVAL"] = "7"
    assert param["TOOL_LOG"] == "/tmp/x" and param["UPDATE_INTERVAL"] == 7.0
    with pytest.raises(ValueError):
        param["UPDATE_INTERVAL"] = "soon"
    assert "UPDATE_INTERVAL" in list(param) and len(param) == len(list(param))
    del param["TOOL_LOG"]
    assert param.get("TOOL_LOG") is None and param["UPDATE_INTERVAL"] == 7.0
    htcondor.reload_config()
    assert param["UPDATE_INTERVAL"] == 5.0


def test_subsystem_prefix_and_section(fresh_param):
    param = fresh_param
    param["TEST_FOO"] = "foo"
    param["SCHEDD.TEST_FOO"] = "bar"
    assert param["TEST_FOO"] == "foo" and param.get("TEST_SECTION") is None
    htcondor.set_subsystem("SCHEDD")
    assert param["TEST_FOO"] == "bar" and param["TEST_SECTION"] == "s"


def test_enable_log_writes_the_console_log(fresh_param, tmp_path):
    with pytest.raises(ValueError, match="TOOL_LOG"):
        htcondor.enable_log()
    fresh_param["TOOL_LOG"] = str(tmp_path / "tool.log")
    htcondor.enable_log()
    from gridbus.console.configuration import log

    log.info("hello from the tool")
    assert "hello from the tool" in (tmp_path / "tool.log").read_text()


class _Session:
    def __init__(self):
        self.calls = []

    def call(self, address, method, args, timeout=None):
        from gridbus.rpc import MethodResult

        self.calls.append((address, method, args))
        return MethodResult(0, "OK", {})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


@pytest.mark.parametrize(("command", "target", "expected"), [
    ("Reconfig", None, ("master@h", "Reconfig", {})),
    ("DaemonOff", "schedd", ("master@h", "Stop", {"Graceful": True, "Daemon": "SCHEDD"})),
    ("DaemonOffFast", "STARTD", ("master@h", "Stop", {"Graceful": False, "Daemon": "STARTD"})),
    ("DaemonOn", "SCHEDD", ("master@h", "Start", {"Daemon": "SCHEDD"})),
    ("DaemonsOn", None, ("master@h", "Start", {})),
    ("DaemonsOff", None, ("master@h", "Stop", {"Graceful": True})),
    ("OffGraceful", None, ("master@h", "Off", {"Graceful": True})),
    ("OffFast", None, ("master@h", "Off", {"Graceful": False})),
    ("Restart", None, ("master@h", "Restart", {"Master": True})),
])
def test_send_command_to_a_master(monkeypatch, command, target, expected):
    session = _Session()
    monkeypatch.setattr(daemons, "_session", lambda: session)
    htcondor.send_command({"MyAddress": "master@h"}, htcondor.DaemonCommands[command], target)
    assert session.calls == [expected]


def test_send_command_to_another_daemon_goes_through_its_master(monkeypatch):
    session = _Session()
    monkeypatch.setattr(daemons, "_session", lambda: session)
    monkeypatch.setattr(daemons, "_master_of", lambda s, ad: "master@h")
    htcondor.send_command({"MyAddress": "schedd@s", "Machine": "h"}, htcondor.DaemonCommands.OffFast)
    assert session.calls == [("master@h", "Stop", {"Graceful": False, "Daemon": "SCHEDD"})]
    with pytest.raises(htcondor.HTCondorException, match="target"):
        htcondor.send_command({"MyAddress": "master@h"}, htcondor.DaemonCommands.DaemonOff)
    with pytest.raises(htcondor.HTCondorException, match="SetForceShutdown"):
        htcondor.send_command({"MyAddress": "master@h"}, htcondor.DaemonCommands.SetForceShutdown)


def test_duty_cycle_tells_a_busy_loop_from_an_idle_one():
    async def measure(busy: bool) -> float:
        meter = DutyCycle(min_window=0.3)
        assert meter.install(asyncio.get_running_loop())
        end = time.monotonic() + 0.4
        while time.monotonic() < end:
            if busy:
                sum(range(20000))  # work on the loop, no waiting
                await asyncio.sleep(0)
            else:
                await asyncio.sleep(0.05)
        return meter.sample()

    assert asyncio.run(measure(True)) > 0.5
    assert asyncio.run(measure(False)) < 0.5


def test_param_knows_every_daemons_knobs_from_a_script():
    # A script reads the pool's knobs, as htcondor2.param has every daemon's defaults: the
    # schedd's, the negotiator's, the startd's and the master's, not only what the console imports.
    import subprocess
    import sys

    code = ("from gridbus.console import param; "
            "print(param['SCHEDD_INTERVAL'], param['NEGOTIATOR_INTERVAL'], "
            "'STARTER_UNPRIVILEGED_USER' in param, 'MASTER_BACKOFF_CEILING' in param)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[2:] == ["True", "True"] and float(out[0]) > 0 and float(out[1]) > 0, out


def test_version_and_platform_have_htcondors_form() -> None:
    import gridbus.console as htcondor

    assert htcondor.version().startswith("$CondorVersion: ") and htcondor.version().endswith(" $")
    assert htcondor.platform().startswith("$CondorPlatform: ") and htcondor.platform().endswith(" $")
