"""`gridbus status -avail`, as condor_status -avail: only the slots no one has claimed."""

from __future__ import annotations

from gridbus.console.cli import build_parser


def test_status_avail_asks_for_the_slots_no_one_has_claimed(monkeypatch, capsys):
    import gridbus.console as console

    asked: list[str] = []

    class Collector:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def query(self, ad_type, constraint, projection=None):
            asked.append(constraint)
            return [{"Name": "slot1@a", "State": "Unclaimed"}]

    monkeypatch.setattr(console, "Collector", Collector)
    args = build_parser().parse_args(["status", "-avail", "-constraint", "Cpus > 1", "-af", "Name"])
    args.url = "amqp://nemo:pw@localhost/"
    assert args.handler(args) == 0
    assert asked == ['(Cpus > 1) && State == "Unclaimed"']
    assert capsys.readouterr().out == "slot1@a\n"


def test_status_claimed_shows_who_holds_each_slot(monkeypatch, capsys):
    """condor_status -claimed (and -run): State == "Claimed", then HTCondor's run layout (Name,
    OpSys, Arch, LoadAv, RemoteUser, ClientMachine) and its totals by platform."""
    import gridbus.console as console

    asked: list[str] = []
    slots = [{"Name": "slot2@a", "OpSys": "LINUX", "Arch": "X86_64", "State": "Claimed", "LoadAvg": 1.0,
              "RemoteUser": "alice@pool", "ClientMachine": "schedd@s"},
             {"Name": "slot1@a", "OpSys": "LINUX", "Arch": "X86_64", "State": "Claimed", "LoadAvg": 0.5,
              "RemoteUser": "bob@pool", "ClientMachine": "schedd@s", "Mips": 10}]

    class Collector:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def query(self, ad_type, constraint, projection=None):
            asked.append(constraint)
            return slots

    monkeypatch.setattr(console, "Collector", Collector)
    for flag in ("-claimed", "-run"):
        args = build_parser().parse_args(["status", flag])
        args.url = "amqp://nemo:pw@localhost/"
        assert args.handler(args) == 0
        assert asked.pop() == '(true) && State == "Claimed"'
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == ["Name", "OpSys", "Arch", "LoadAv", "RemoteUser", "ClientMachine"]
        assert lines[2].split() == ["slot1@a", "LINUX", "X86_64", "0.500", "bob@pool", "schedd@s"]
        assert lines[3].split() == ["slot2@a", "LINUX", "X86_64", "1.000", "alice@pool", "schedd@s"]
        assert lines[5].split() == ["Machines", "MIPS", "KFLOPS", "AvgLoadAvg"]
        assert lines[7].split() == ["X86_64/LINUX", "2", "10", "0", "0.750"]
        assert lines[9].split() == ["Total", "2", "10", "0", "0.750"]
    args = build_parser().parse_args(["status", "-claimed", "-total"])
    args.url = "amqp://nemo:pw@localhost/"
    assert args.handler(args) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["Machines", "MIPS", "KFLOPS", "AvgLoadAvg"]


def test_status_with_no_ad_prints_nothing(monkeypatch, capsys):
    """condor_status prints no table, header or totals for a query no ad answers."""
    import gridbus.console as console

    class Collector:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def query(self, ad_type, constraint, projection=None):
            return []

    monkeypatch.setattr(console, "Collector", Collector)
    for argv in (["status"], ["status", "-claimed"], ["status", "-total"], ["status", "-schedd"]):
        args = build_parser().parse_args(argv)
        args.url = "amqp://nemo:pw@localhost/"
        assert args.handler(args) == 0
        assert capsys.readouterr().out == "", argv
