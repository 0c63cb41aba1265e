"""`gridbus status` forms that choose slots as condor_status does: -avail (the slots no one has
claimed), -claimed and -run (the claimed ones, with who holds each), and no ad at all."""

from __future__ import annotations

from typing import Any

import pytest

from gridbus.console.cli import build_parser


def _collector(monkeypatch: pytest.MonkeyPatch, ads: list[dict[str, Any]]) -> list[str]:
    """The console's Collector answering every query with ``ads``; returns the constraints asked."""
    import gridbus.console as console

    asked: list[str] = []

    class Collector:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def query(self, ad_type, constraint, projection=None):
            asked.append(constraint)
            return ads

    monkeypatch.setattr(console, "Collector", Collector)
    return asked


def _status(*argv: str) -> int:
    args = build_parser().parse_args(["status", *argv])
    args.url = "amqp://nemo:pw@localhost/"
    return args.handler(args)


def test_status_avail_asks_for_the_slots_no_one_has_claimed(monkeypatch, capsys):
    asked = _collector(monkeypatch, [{"Name": "slot1@a", "State": "Unclaimed"}])
    assert _status("-avail", "-constraint", "Cpus > 1", "-af", "Name") == 0
    assert asked == ['(Cpus > 1) && State == "Unclaimed"']
    assert capsys.readouterr().out == "slot1@a\n"


def test_status_claimed_shows_who_holds_each_slot(monkeypatch, capsys):
    """condor_status -claimed (and -run): State == "Claimed", then HTCondor's run layout (Name,
    OpSys, Arch, LoadAv, RemoteUser, ClientMachine) and its totals by platform."""
    asked = _collector(monkeypatch, [
        {"Name": "slot2@a", "OpSys": "LINUX", "Arch": "X86_64", "State": "Claimed", "LoadAvg": 1.0,
         "RemoteUser": "alice@pool", "ClientMachine": "schedd@s"},
        {"Name": "slot1@a", "OpSys": "LINUX", "Arch": "X86_64", "State": "Claimed", "LoadAvg": 0.5,
         "RemoteUser": "bob@pool", "ClientMachine": "schedd@s", "Mips": 10}])
    for flag in ("-claimed", "-run"):
        assert _status(flag) == 0
        assert asked.pop() == '(true) && State == "Claimed"'
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == ["Name", "OpSys", "Arch", "LoadAv", "RemoteUser", "ClientMachine"]
        assert lines[2].split() == ["slot1@a", "LINUX", "X86_64", "0.500", "bob@pool", "schedd@s"]
        assert lines[3].split() == ["slot2@a", "LINUX", "X86_64", "1.000", "alice@pool", "schedd@s"]
        assert lines[5].split() == ["Machines", "MIPS", "KFLOPS", "AvgLoadAvg"]
        assert lines[7].split() == ["X86_64/LINUX", "2", "10", "0", "0.750"]
        assert lines[9].split() == ["Total", "2", "10", "0", "0.750"]
    assert _status("-claimed", "-total") == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["Machines", "MIPS", "KFLOPS", "AvgLoadAvg"]


def test_status_with_no_ad_prints_nothing(monkeypatch, capsys):
    """condor_status prints no table, header or totals for a query no ad answers."""
    _collector(monkeypatch, [])
    for argv in ([], ["-claimed"], ["-total"], ["-schedd"]):
        assert _status(*argv) == 0
        assert capsys.readouterr().out == "", argv
