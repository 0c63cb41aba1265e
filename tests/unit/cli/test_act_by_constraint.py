"""`gridbus hold/rm/release -constraint` acts on the jobs its user may act on, as condor_hold does:
other users' jobs that match are passed over, not an error; a constraint that reached none of
one's own jobs, or a job named by its id that one may not touch, is."""

from __future__ import annotations

from typing import Any

import pytest

from gridbus.console.cli import build_parser
from gridbus.console.cli import jobs as cli_jobs


class Schedd:
    def __init__(self, ok: int, denied: int = 0, **totals: int) -> None:
        self.result = {"TotalSuccess": ok, "TotalPermissionDenied": denied, **totals}
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
    (("hold", "-constraint", "true"), "Couldn't find/hold all jobs matching constraint (true)\n"),
    (("rm", "12.0"), "Permission denied to remove job 12.0\n"),
])
def test_none_of_one_s_own_or_a_job_named_is_an_error(monkeypatch, capsys, argv, message):
    schedd = Schedd(ok=0, denied=1)
    assert _act(monkeypatch, schedd, *argv) == 1
    assert capsys.readouterr().err == message


@pytest.mark.parametrize("argv, totals, message", [
    (("rm", "12.0"), {"TotalNotFound": 1}, "Job 12.0 not found"),
    (("release", "12.0"), {"TotalBadStatus": 1}, "Job 12.0 not held to be released"),
    (("hold", "12.0"), {"TotalAlreadyDone": 1}, "Job 12.0 already held"),
    (("continue", "12.0"), {"TotalAlreadyDone": 1}, "Job 12.0 already running"),
    (("vacate_job", "-fast", "12.0"), {"TotalBadStatus": 1}, "Job 12.0 not running to be fast-vacated"),
    (("rm", "12"), {"TotalNotFound": 1}, "Couldn't find/remove all jobs in cluster 12"),
    (("hold", "alice"), {"TotalNotFound": 1}, 'Couldn\'t find/hold all jobs of user "alice"'),
])
def test_what_was_not_done_is_said_in_condor_rm_s_words(monkeypatch, capsys, argv, totals, message):
    assert _act(monkeypatch, Schedd(ok=0, **totals), *argv) == 1
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize("argv, said", [
    (("rm", "12.0"), "Job 12.0 marked for removal"), (("hold", "12"), "All jobs in cluster 12 have been held"),
    (("release", "alice"), 'All jobs of user "alice" have been released'),
    (("vacate_job", "-fast", "12.0"), "Job 12.0 fast-vacated"), (("rm", "-all"), "All jobs have been marked for removal"),
])
def test_what_was_done_is_said_in_condor_rm_s_words(monkeypatch, capsys, argv, said):
    assert _act(monkeypatch, Schedd(ok=1), *argv) == 0
    assert capsys.readouterr().out == said + "\n"

