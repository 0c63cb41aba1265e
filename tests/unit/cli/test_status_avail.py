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
