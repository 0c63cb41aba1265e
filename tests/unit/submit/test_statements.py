"""Several queue statements, include and if/elif/else/endif in one submit description."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gridbus.submit import Submit, SubmitError
from gridbus.submit.conditions import HTCONDOR_VERSION, evaluate

WORKDIR = Path(__file__).with_name("corpus") / "workdir"


def _jobs(text: str) -> list[dict]:
    return Submit(text).build(cluster_id=9, qdate=0).jobs()


def test_each_queue_statement_makes_its_own_procs_with_the_commands_above_it():
    text = (
        "executable = /bin/echo\narguments = first $(Step)\nqueue 2\n"
        "arguments = second $(Process) $(Item)\nrequest_cpus = 2\nqueue Item in (x, y)\n"
        "queue 1\n"
    )
    sub = Submit(text)
    assert sub.queue_count() == 3 and sub.getQArgs() == "2"
    built = sub.build(cluster_id=9, qdate=0)
    jobs = built.jobs()
    assert [j["ProcId"] for j in jobs] == [0, 1, 2, 3, 4]
    assert [j["Args"] for j in jobs] == ["first 0", "first 1", "second 2 x", "second 3 y", "second 4"]
    assert [j["RequestCpus"] for j in jobs] == [1, 1, 2, 2, 2]
    # what every proc shares stays in the cluster ad; the per-statement differences go with each proc
    assert built.cluster_ad["Cmd"] == "/bin/echo" and "RequestCpus" not in built.cluster_ad
    # str() keeps every statement, so the schedd can rebuild the same cluster from it
    assert Submit(str(sub)).build(cluster_id=9, qdate=0).jobs() == jobs


def test_count_and_itemdata_refuse_a_description_with_several_queue_statements():
    sub = Submit("executable = /bin/true\nqueue\nqueue 2\n")
    with pytest.raises(SubmitError, match="2 queue statements; count and itemdata replace a single"):
        sub.build(count=3)
    with pytest.raises(SubmitError, match="2 queue statements"):
        sub.setQArgs("4")


def test_a_command_after_the_last_queue_statement_warns_naming_it():
    with pytest.warns(UserWarning, match=r"line 4: 'arguments' comes after the queue statement \(line 3\)"):
        Submit("executable = /bin/true\nqueue\nqueue 2\narguments = x\n")


def test_if_elif_else_endif_nested_and_defined(tmp_path: Path):
    text = (
        "FOO = 1\nexecutable = /bin/true\n"
        "if defined BAR\n  request_cpus = 9\n"
        "elif defined FOO\n  if version >= 8.9\n    request_cpus = 3\n  else\n    request_cpus = 4\n  endif\n"
        "else\n  this line is never read\nendif\n"
        "if ! $(FOO)\n request_memory = 1\nelse if false\n request_memory = 2\nelse\n request_memory = 64\nendif\n"
        "queue\n"
    )
    job = _jobs(text)[0]
    assert job["RequestCpus"] == 3 and job["RequestMemory"] == 64


@pytest.mark.parametrize(
    ("condition", "value"),
    [("true", True), ("no", False), ("T", True), ("0.0", False), ("-1", True), ("", False),
     ("version == 24.0", True), ("version > 24.0.24", False), ("version >= 24.0.24", True),
     ("!version < 25.0", False), ("defined X", True), ("defined Y", False), ("defined", False)],
)
def test_conditions_as_htcondor_reads_them(condition: str, value: bool):
    assert HTCONDOR_VERSION == (24, 0, 24)
    assert evaluate(condition, lambda name: name == "X") is value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("if junk\nendif\n", "junk is not a valid if condition because expression is not a conditional"),
        ("if $(N) > 2\nendif\n", "because complex conditionals are not supported"),
        ("if version <= 9\nendif\n", "the version literal is invalid"),
        ("endif\n", "line 2: endif without matching if"),
        ("else\n", "else without matching if"),
        ("if true\nelse\nelse\nendif\n", "line 4: else is not allowed after else"),
        ("if true\nrequest_cpus = 2\n", r"line 2: endif\(s\) not found before end-of-file \(the if on line 2\)"),
        ("include : no-such.inc\n", "cannot read the include file no-such.inc"),
        ("include command : false\n", "include command 'false' exited with status 1"),
        ("include command : /no/such/program\n", "no such program"),
        ("include :\n", "include needs a file name or a command"),
    ],
)
def test_bad_statements_say_what_is_wrong(text: str, message: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(WORKDIR)
    with pytest.raises(SubmitError, match=message):
        Submit("executable = /bin/true\n" + text + "queue\n").build(qdate=0)


def test_include_file_and_command_read_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "common.inc").write_text("arguments = from the include\nrequest_memory = 77\n")
    (tmp_path / "broken.inc").write_text("request_cpus = 1\nnot a command\n")
    (tmp_path / "self.inc").write_text("include : self.inc\n")
    monkeypatch.chdir(tmp_path)
    text = (
        "NAME = common.inc\nexecutable = /bin/true\nrequest_memory = 1\ninclude : $(NAME)\n"
        f"include command : {sys.executable} -c print('request_disk=1234')\n"
        "if false\ninclude : no-such-file-because-skipped.inc\nendif\nqueue\n"
    )
    job = _jobs(text)[0]
    assert (job["Args"], job["RequestMemory"], job["RequestDisk"]) == ("from the include", 77, 1234)
    with pytest.raises(SubmitError, match=r"^line 2: include file broken.inc, line 2: cannot read 'not a command'"):
        Submit("executable = /bin/true\ninclude : broken.inc\nqueue\n")
    with pytest.raises(SubmitError, match="includes nest deeper than 20"):
        Submit("executable = /bin/true\ninclude : self.inc\nqueue\n")


def test_max_job_retirement_time_is_the_jobs_maxjobretirementtime():
    (job,) = _jobs("executable = /bin/true\nmax_job_retirement_time = 120\nqueue\n")
    assert job["MaxJobRetirementTime"] == 120
    (job,) = _jobs("executable = /bin/true\nmax_job_retirement_time = 60 * 2\nqueue\n")
    assert str(job["MaxJobRetirementTime"]) == "60 * 2"
