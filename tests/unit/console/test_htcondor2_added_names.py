"""The htcondor2 names gridbus.console gained, each beside htcondor2's own: enumerations with its
values, log and LogLevel, ping's argument checks, the DAGMan client, Submit's submit method, the
drain and vacate types on Startd, the transaction flags of Schedd.edit, and the names that have
no meaning on gridbus (each refuses with a sentence)."""

from __future__ import annotations

import inspect
import logging
import re

import classad2
import htcondor2
import pytest

import gridbus.console as htcondor
from gridbus.console import dprintf
from gridbus.console.startd import Startd
from gridbus.errors import HTCondorNotImplementedError

ENUMS = ["DrainType", "DrainTypes", "VacateType", "CompletionType", "TransactionFlag", "TransactionFlags",
         "QueryOpts", "HistorySrc", "SubmitMethod", "FileTransferEventType", "CommonFilesEventType",
         "SubsystemType", "LogLevel", "CredType", "CredTypes"]


@pytest.mark.parametrize("name", ENUMS)
def test_enumerations_have_htcondor2s_members_and_values(name):
    ours, theirs = getattr(htcondor, name), getattr(htcondor2, name)
    assert [(m.name, int(m)) for m in ours] == [(m.name, int(m)) for m in theirs]
    assert issubclass(ours, int) and (ours.__name__ == name) == (theirs.__name__ == name)


def test_aliases_are_the_same_enumeration_as_in_htcondor2():
    for alias, name in (("DrainTypes", "DrainType"), ("TransactionFlags", "TransactionFlag"),
                        ("QueryOpts", "QueryOpt"), ("CredTypes", "CredType")):
        assert (getattr(htcondor2, alias) is getattr(htcondor2, name)) and (getattr(htcondor, alias) is getattr(htcondor, name))
    assert htcondor.TransactionFlag.Default == htcondor2.TransactionFlag.Default == 0


def test_log_writes_at_htcondors_levels(caplog):
    caplog.set_level(logging.DEBUG, logger="gridbus.console")
    htcondor.log(htcondor.LogLevel.Always, "always")
    htcondor.log(htcondor.LogLevel.Error, "an error")
    htcondor.log(htcondor.LogLevel.Status | htcondor.LogLevel.FullDebug, "verbose")
    htcondor.log(htcondor.LogLevel.Job, "a job")
    got = {r.getMessage(): r.levelno for r in caplog.records}
    assert got == {"always": logging.INFO, "an error": logging.ERROR, "verbose": logging.DEBUG, "a job": logging.DEBUG}
    # A category <SUBSYS>_DEBUG names is written at the ordinary level.
    htcondor.reload_config()
    htcondor.param["TOOL_DEBUG"] = "D_JOB"
    try:
        assert dprintf.python_level(htcondor.LogLevel.Job) == logging.INFO
        assert dprintf.python_level(htcondor.LogLevel.Security) == logging.DEBUG
    finally:
        htcondor.reload_config()


def test_log_refuses_what_htcondor2_refuses():
    for module in (htcondor, htcondor2):
        with pytest.raises(TypeError, match="level must a LogLevel"):
            module.log("loud", "message")
    assert list(inspect.signature(htcondor.log).parameters) == list(inspect.signature(htcondor2.log).parameters)


def test_ping_needs_an_address_as_htcondor2s_does():
    assert list(inspect.signature(htcondor.ping).parameters) == list(inspect.signature(htcondor2.ping).parameters)
    for module, ad in ((htcondor, {}), (htcondor2, classad2.ClassAd())):
        with pytest.raises(ValueError):
            module.ping(ad)
    with pytest.raises(HTCondorNotImplementedError, match="broker connection"):
        htcondor.ping("collector@c1", security=object())
    with pytest.raises(HTCondorNotImplementedError, match="authorizes each method call"):
        htcondor.ping("collector@c1", "ADMINISTRATOR")


def test_dagman_client_checks_its_arguments_as_htcondor2s():
    for module in (htcondor, htcondor2):
        with pytest.raises(TypeError, match="dag_id must be an integer"):
            module.DAGMan("12")
        dag = module.DAGMan(12)
        assert dag.dag_id == 12
        assert dag.throttle() == "No valid throttle specified"
        assert dag.throttle(max_nodes=None, other=3) == "No valid throttle specified"
    for name in ("halt", "resume", "throttle"):
        assert list(inspect.signature(getattr(htcondor.DAGMan, name)).parameters) == list(
            inspect.signature(getattr(htcondor2.DAGMan, name)).parameters)


def test_dagman_commands_answer_failure_with_the_reason():
    dag = htcondor.DAGMan(12)
    ok, why = dag.halt("maintenance")
    assert ok is False and "takes no commands" in why and "gridbus rm 12" in why
    assert dag.resume()[0] is False
    assert "-maxidle" in dag.throttle(max_idle=5)


def test_submit_method_as_htcondor2():
    text = "executable = /bin/true\nqueue\n"
    ours, theirs = htcondor.Submit(text), htcondor2.Submit(text)
    assert ours.getSubmitMethod() == theirs.getSubmitMethod() == htcondor.SubmitMethod.PythonBindings
    for sub in (ours, theirs):
        with pytest.raises(ValueError):
            sub.setSubmitMethod(htcondor.SubmitMethod.DAGMan)
        sub.setSubmitMethod(htcondor2.SubmitMethod.DAGMan, True)
        assert sub.getSubmitMethod() == 1
        sub.setSubmitMethod(htcondor.SubmitMethod.UserSet)
        assert sub.getSubmitMethod() == 100


def _startd(calls: list, monkeypatch) -> Startd:
    # A Startd without a broker: its calls are recorded (the broker path is the integration tests').
    startd = Startd.__new__(Startd)
    startd.address = "startd@node"
    monkeypatch.setattr(startd, "_call", lambda method, args=None: calls.append((method, args)) or _Answer())
    return startd


class _Answer:
    Count = 1
    RequestId = "r1"


def test_drain_and_vacate_types_reach_the_startd_by_name(monkeypatch):
    calls: list = []
    startd = _startd(calls, monkeypatch)
    startd.drainJobs(htcondor.DrainType.Quick)
    startd.drainJobs(drain_type=htcondor2.DrainType.Fast, on_completion=htcondor.CompletionType.Resume)
    startd.vacateSlot("slot1@node", htcondor.VacateType.Fast)
    startd.vacate(htcondor.VacateType.Graceful)
    assert calls == [
        ("Drain", {"HowFast": "quick", "OnCompletion": "nothing", "Reason": ""}),
        ("Drain", {"HowFast": "fast", "OnCompletion": "resume", "Reason": ""}),
        ("Vacate", {"Slot": "slot1@node", "Graceful": False}),
        ("Vacate", {"Slot": "", "Graceful": True}),
    ]
    with pytest.raises(ValueError, match="slot_name must be a non-empty string"):
        startd.vacateSlot("")
    with pytest.raises(ValueError, match="slot_name must be a non-empty string"):
        htcondor2.Startd(classad2.ClassAd({"MyAddress": "<127.0.0.1:9>"})).vacateSlot("")
    with pytest.raises(HTCondorNotImplementedError, match="check_expr"):
        startd.drainJobs(check_expr="true")
    with pytest.raises(ValueError, match="not supported"):
        startd.drainJobs(on_completion=htcondor.CompletionType.Reconfig)


def test_schedd_edit_takes_transaction_flags():
    ours = inspect.signature(htcondor.Schedd.edit).parameters["flags"].default
    theirs = inspect.signature(htcondor2.Schedd.edit).parameters["flags"].default
    assert ours == theirs == 0 and type(ours).__name__ == type(theirs).__name__ == "TransactionFlag"
    schedd = htcondor.Schedd.__new__(htcondor.Schedd)
    with pytest.raises(TypeError, match="flags must be a TransactionFlag"):
        schedd.edit("1.0", "Foo", "1", flags="durable")


@pytest.mark.parametrize("name,call", [
    ("Credd", lambda m: m.Credd()), ("CredCheck", lambda m: m.CredCheck("svc", "error")),
    ("Placementd", lambda m: m.Placementd()), ("SecurityContext", lambda m: m.SecurityContext()),
    ("send_alive", lambda m: m.send_alive()), ("set_ready_state", lambda m: m.set_ready_state()),
    ("load_a_config_usermap_file", lambda m: m.load_a_config_usermap_file("f")),
    ("reload_config_usermaps", lambda m: m.reload_config_usermaps()),
])
def test_names_without_meaning_refuse_with_a_sentence(name, call):
    assert hasattr(htcondor2, name)
    with pytest.raises(HTCondorNotImplementedError) as refused:
        call(htcondor)
    assert str(refused.value).startswith(f"{name}: gridbus") or str(refused.value).startswith(f"{name}: a gridbus")
    assert isinstance(refused.value, htcondor.HTCondorException)


def test_version_lines_have_htcondor2s_form():
    for module in (htcondor, htcondor2):
        assert re.fullmatch(r"\$CondorVersion: \S+ \d{4}-\d\d-\d\d BuildID: \S+ \$", module.version()), module.version()
        assert re.fullmatch(r"\$CondorPlatform: \S+ \$", module.platform()), module.platform()
