"""`gridbus q` takes its user and all-users totals from the schedd's Summary ads (SummaryOnly):
one small answer, not a second download of the whole queue."""

from __future__ import annotations

from typing import Any

from gridbus.console.cli import build_parser
from gridbus.console.cli.jobs import _q_one
from gridbus.console.schedd import QueryOpt


class Schedd:
    name = "s"
    address = "schedd@s"

    def __init__(self) -> None:
        self.jobs = [{"ClusterId": 1, "ProcId": p, "Owner": "nemo", "JobStatus": 1, "Cmd": "/bin/true",
                      "QDate": 0} for p in range(3)] + [{"ClusterId": 2, "ProcId": 0, "Owner": "bob",
                                                          "JobStatus": 2, "Cmd": "/bin/true", "QDate": 0}]
        self.queries: list[dict[str, Any]] = []

    def query(self, constraint: str = "true", projection: list[str] | None = None, limit: int = -1,
              opts: int = 0) -> list[dict[str, Any]]:
        self.queries.append({"constraint": constraint, "opts": opts})
        if opts & QueryOpt.SummaryOnly:
            return [{"MyType": "Summary", "Owner": "nemo", "Jobs": 3, "Idle": 3},
                    {"MyType": "Summary", "Owner": "bob", "Jobs": 1, "Running": 1},
                    {"MyType": "Summary", "Jobs": 4, "Idle": 3, "Running": 1}]
        return [j for j in self.jobs if constraint == "true" or j["Owner"] == "nemo"]


def test_q_prints_its_totals_from_the_summary_not_from_every_job(capsys):
    schedd = Schedd()
    args = build_parser().parse_args(["q"])
    args.url = "amqp://nemo:pw@localhost/"  # what main() sets from --pool
    assert _q_one(schedd, args) == 0
    out = capsys.readouterr().out
    assert "Total for query: 3 jobs; 0 completed, 0 removed, 3 idle, 0 running" in out
    assert "Total for nemo: 3 jobs; 0 completed, 0 removed, 3 idle, 0 running" in out
    assert "Total for all users: 4 jobs; 0 completed, 0 removed, 3 idle, 1 running" in out
    listings = [q for q in schedd.queries if not q["opts"] & QueryOpt.SummaryOnly]
    assert len(listings) == 1  # the jobs shown, and nothing more
