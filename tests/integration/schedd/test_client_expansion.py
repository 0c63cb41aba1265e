"""Submit descriptions are expanded by the submitting client, never by the schedd (issues 12 and 14).

The client asks NewCluster for the cluster id, expands every macro in its own working directory and
sends finished job ads; the schedd refuses submit text with status 4. Late materialization sends a
proc template that the schedd fills in per proc with the code the client checked it with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.console import Schedd
from gridbus.status import Status
from gridbus.submit import Submit
from tests.integration.schedd.conftest import job_ad, wait_for


@pytest.fixture
def submit_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The submitter's directory (the test's cwd), not the schedd's."""
    d = tmp_path / "submitter"
    d.mkdir()
    for name in ("a.dat", "b.dat", "c.txt"):
        (d / name).write_text(name)
    for i in range(3):
        (d / f"dir_{i}").mkdir()
    monkeypatch.chdir(d)
    return d


def _jobs(s: Schedd, cluster: int, attrs: list[str]) -> list:
    return sorted(s.query(f"ClusterId == {cluster}", ["ProcId", *attrs]), key=lambda a: a["ProcId"])


def test_submit_text_is_refused_and_no_command_runs(schedd, session, tmp_path):
    witness = tmp_path / "ran"
    for text in (f"include command : touch {witness}\nexecutable = /bin/true\nqueue\n",
                 f"executable = /bin/true\nqueue x from touch {witness} |\n",
                 "executable = /bin/true\noutput = out.$(Cluster)\nqueue\n"):
        r = session.call("schedd@s1", "Submit", {"Ad": {}, "Submit": {"Text": text, "Count": 0}})
        assert r.status == Status.INVALID_PARAMETER, r.text
        assert "does not read submit descriptions" in r.text and "client" in r.text
    assert not witness.exists()
    assert session.call("schedd@s1", "Query", {}).Jobs == []


def test_new_cluster_ids_are_the_submits_and_only_the_callers(schedd, session, user_url):
    first = session.call("schedd@s1", "NewCluster", {})
    second = session.call("schedd@s1", "NewCluster", {})
    assert first.status == second.status == 0 and second.ClusterId > first.ClusterId
    # An id handed out and never used is harmless; a later one is used as given.
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(), "ClusterId": second.ClusterId})
    assert r.status == 0 and r.ClusterId == second.ClusterId, r.text
    again = session.call("schedd@s1", "Submit", {"Ad": job_ad(), "ClusterId": second.ClusterId})
    assert again.status == Status.INVALID_PARAMETER and "already exists" in again.text
    never = session.call("schedd@s1", "Submit", {"Ad": job_ad(), "ClusterId": 10_000})
    assert never.status == Status.USER + 3 and "NewCluster" in never.text
    # Another user cannot take an id given to guest.
    with Schedd("schedd@s1", url=user_url("submit-bob")) as bob:
        with pytest.raises(PermissionError, match="NewCluster gave that id to guest"):
            bob._call("Submit", {"Ad": job_ad(), "ClusterId": first.ClusterId})
    # Without a ClusterId the schedd still picks one (plain job-ad clients), after every id given out.
    plain = session.call("schedd@s1", "Submit", {"Ad": job_ad()})
    assert plain.status == 0 and plain.ClusterId > second.ClusterId


def test_macros_expand_in_the_submitters_directory_with_the_real_cluster(schedd, amqp_url, submit_dir):
    text = ("executable = /bin/echo\narguments = $(f)\noutput = out.$(Cluster).$(Process)\n"
            "log = job.log\nbatch_name = nightly-$(Cluster)\nqueue f matching *.dat\n")
    with Schedd(url=amqp_url) as s:
        result = s.submit(Submit(text))
        c = result.cluster()
        jobs = _jobs(s, c, ["Iwd", "Out", "Args", "UserLog", "JobBatchName"])
    assert result.num_procs() == 2
    assert [(j["Args"], j["Out"]) for j in jobs] == [("a.dat", f"out.{c}.0"), ("b.dat", f"out.{c}.1")]
    assert {j["Iwd"] for j in jobs} == {str(submit_dir)}
    assert {j["UserLog"] for j in jobs} == {str(submit_dir / "job.log")}
    assert {j["JobBatchName"] for j in jobs} == {f"nightly-{c}"}


def test_batch_name_with_cluster_and_queue_2_makes_two_procs(schedd, amqp_url, submit_dir):
    with Schedd(url=amqp_url) as s:
        result = s.submit(Submit("executable = /bin/true\nbatch_name = nightly-$(Cluster)\nqueue 2\n"))
        jobs = _jobs(s, result.cluster(), ["JobBatchName"])
    assert result.num_procs() == 2 and [j["ProcId"] for j in jobs] == [0, 1]
    assert {j["JobBatchName"] for j in jobs} == {f"nightly-{result.cluster()}"}


def test_initialdir_per_process_and_old_env_syntax(schedd, amqp_url, submit_dir):
    text = "executable = /bin/env\ninitialdir = dir_$(Process)\nenv = A=1;B=2\nqueue 3\n"
    with Schedd(url=amqp_url) as s:
        result = s.submit(Submit(text))
        jobs = _jobs(s, result.cluster(), ["Iwd", "Env", "Environment", "Cmd"])
    assert [j["Iwd"] for j in jobs] == [str(submit_dir / f"dir_{i}") for i in range(3)]
    # As HTCondor keeps `env` in the old syntax (the starter reads Env when there is no Environment).
    assert {j["Env"] for j in jobs} == {"A=1;B=2"} and not any("Environment" in j for j in jobs)
    assert {j["Cmd"] for j in jobs} == {"/bin/env"}


def test_late_materialization_fills_the_clients_template(schedd, amqp_url, submit_dir):
    text = ("executable = /bin/echo\narguments = $(f) $(Process)\ninitialdir = dir_$(Process)\n"
            "output = out.$(Cluster).$(Process)\n+Index = $(Process)\nmax_idle = 1\n"
            "queue f matching *.dat\n")
    sub = Submit(text)
    with Schedd(url=amqp_url) as s:
        cluster = s.new_cluster()
        built = sub.build(cluster_id=cluster)
        late = sub.late(built, cluster)
        assert late is not None and "$(process)" in late["Template"]["Out"][1]
        # What the console sends for this description is that template, not the procs.
        args = s._submit_args(sub, 0, None, None)
        assert "Submit" in args and "Procs" not in args and "Text" not in args["Submit"]
        result = s.submit(sub)
        c = result.cluster()
        assert result.num_procs() == 2
        first = _jobs(s, c, ["Out", "Args", "Iwd", "Index"])
        assert [(j["ProcId"], j["Out"], j["Args"], j["Index"]) for j in first] == [(0, f"out.{c}.0", "a.dat 0", 0)]
        s.act(3, f"{c}.0")  # the factory makes proc 1 when proc 0 leaves
        second = wait_for(lambda: _jobs(s, c, ["Out", "Args", "Iwd", "Index"]), what="proc 1")
    assert [(j["ProcId"], j["Out"], j["Args"], j["Iwd"], j["Index"]) for j in second] == [
        (1, f"out.{c}.1", "b.dat 1", str(submit_dir / "dir_1"), 1)]


def test_a_template_that_does_not_make_an_ad_is_refused(schedd, session):
    bad = {"Template": {"Out": ["str", "o.$(Process)"], "Rank": ["expr", "(("]}, "Items": [[0, {}]], "Steps": 2}
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobMaterializeMaxIdle=1), "Submit": bad})
    assert r.status == Status.INVALID_PARAMETER and "Template" in r.text
    eager = {"Template": {"Out": ["str", "o.$(Process)"]}, "Items": [[0, {}]], "Steps": 10**9}
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(), "Submit": eager})
    assert r.status == Status.INVALID_PARAMETER and "materialized late" in r.text
    owned = {"Template": {"Owner": ["str", "root"]}, "Items": [[0, {}]], "Steps": 1}
    r = session.call("schedd@s1", "Submit", {"Ad": job_ad(JobMaterializeMaxIdle=1), "Submit": owned})
    assert r.status == Status.INVALID_PARAMETER and "Owner" in r.text


def test_a_retried_submit_with_its_cluster_id_creates_one_cluster(schedd, session):
    cid = session.call("schedd@s1", "NewCluster", {}).ClusterId
    args = {"Ad": job_ad(), "Count": 2, "ClusterId": cid, "SubmissionId": "retry-1"}
    first, again = session.call("schedd@s1", "Submit", args), session.call("schedd@s1", "Submit", args)
    assert first.status == again.status == 0 and first.ClusterId == again.ClusterId == cid
    assert len(session.call("schedd@s1", "Query", {"Constraint": f"ClusterId == {cid}"}).Jobs) == 2


def test_the_console_expands_again_when_the_schedd_forgot_its_cluster_id(schedd, amqp_url, submit_dir,
                                                                          monkeypatch):
    # As after a schedd restart between NewCluster and Submit: the id is unknown to it.
    with Schedd(url=amqp_url) as s:
        real, calls = s.new_cluster, []

        def forgetful() -> int:
            calls.append(1)
            return 10_000 if len(calls) == 1 else real()

        monkeypatch.setattr(s, "new_cluster", forgetful)
        result = s.submit(Submit("executable = /bin/true\noutput = o.$(Cluster)\nqueue\n"))
        (job,) = _jobs(s, result.cluster(), ["Out"])
    assert len(calls) == 2 and result.cluster() != 10_000 and job["Out"] == f"o.{result.cluster()}"


def test_a_template_factory_survives_a_schedd_restart(make_schedd, amqp_url, submit_dir, tmp_path):
    spool = tmp_path / "spool-restart"
    first = make_schedd("s1", spool=spool)
    with Schedd("schedd@s1", url=amqp_url) as s:
        result = s.submit(Submit("executable = /bin/true\noutput = o.$(Process)\nmax_idle = 1\nqueue 3\n"))
    c = result.cluster()
    first.stop()
    make_schedd("s1", spool=spool)
    with Schedd("schedd@s1", url=amqp_url) as s:
        s.act(3, f"{c}.0")
        (job,) = wait_for(lambda: _jobs(s, c, ["Out"]), what="proc 1 after the restart")
    assert (job["ProcId"], job["Out"]) == (1, "o.1")
