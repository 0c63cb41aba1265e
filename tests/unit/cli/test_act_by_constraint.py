"""`gridbus hold/rm/release -constraint` acts on the jobs its user may act on, as condor_hold does:
other users' jobs that match are passed over, not an error; a constraint that reached none of
one's own jobs, or a job named by its id that one may not touch, is."""

from __future__ import annotations

from typing import Any

import pytest

from gridbus.console.cli import build_parser
from gridbus.console.cli import jobs as cli_jobs


class Schedd:
    def __init__(self, ok: int, denied: int) -> None:
        self.result = {"TotalSuccess": ok, "TotalPermissionDenied": denied}
        self.specs: list[Any] = []

    def act(self, action: Any, spec: Any, reason: str | None = None) -> dict[str, int]:
        self.specs.append(spec)
        return self.result


def _act(monkeypatch, schedd: Schedd, *argv: str) -> int:
    monkeypatch.setattr(cli_jobs, "_schedd", lambda args: schedd)
    args = build_parser().parse_args(list(argv))
    args.url = "amqp://nemo:pw@localhost/"  # what main() sets from --pool
    return cli_jobs.cmd_act(args)


def test_a_constraint_passes_over_the_jobs_of_others(monkeypatch, capsys):
    schedd = Schedd(ok=2, denied=3)
    assert _act(monkeypatch, schedd, "hold", "-constraint", "ProcId >= 2") == 0
    out, err = capsys.readouterr()
    assert out == "All jobs matching constraint (ProcId >= 2) have been held\n" and err == ""


@pytest.mark.parametrize("argv, message", [
    (("hold", "-constraint", "true"), "gridbus hold: could not hold jobs: permission denied\n"),
    (("rm", "12.0"), "gridbus rm: could not remove 12.0: permission denied\n"),
])
def test_none_of_one_s_own_or_a_job_named_is_an_error(monkeypatch, capsys, argv, message):
    schedd = Schedd(ok=0, denied=1)
    assert _act(monkeypatch, schedd, *argv) == 1
    assert capsys.readouterr().err == message

