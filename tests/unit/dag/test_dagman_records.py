"""What DAGMan leaves behind, as HTCondor's condor_dagman does: the JOBSTATE_LOG lines, the POST
script's end in the nodes log (event 016, so recovery never runs a finished node's POST again),
and the scripts' output (DAGMan's own output without DEBUG, the DEBUG file with it)."""

from __future__ import annotations

import re
from pathlib import Path

import htcondor2

from gridbus.console.dagman.engine import DONE, EXIT_OKAY, POSTRUN, SUBMITTED, Engine
from gridbus.dag import parse_text
from tests.unit.dag.test_engine import drive, engine_for

NODE_LINE = re.compile(r"(\d+) (\S+) (\S+) (\S+) (\S+) - (\d+)")


def _script(path: Path, text: str) -> None:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_the_jobstate_log_has_htcondor_s_lines(tmp_path: Path):
    (tmp_path / "x.sub").write_text('executable = /bin/true\n+pegasus_site = "local"\nqueue\n')
    (tmp_path / "tagged.sub").write_text('+job_tag_name = "+my_tag"\n+my_tag = "cluster9"\nqueue\n')
    _script(tmp_path / "ok.sh", "exit 0\n")
    text = ("JOB A x.sub\nJOB B tagged.sub\nSCRIPT PRE A ok.sh\nSCRIPT POST A ok.sh\nRETRY B 1\n"
            "PARENT A CHILD B\nJOBSTATE_LOG t.jobstate.log\n")
    eng, fake = engine_for(tmp_path, text, {"B": [2, 0]})
    assert drive(eng, fake) == EXIT_OKAY
    lines = _lines(tmp_path / "t.jobstate.log")
    assert re.fullmatch(r"\d+ INTERNAL \*\*\* DAGMAN_STARTED 0\.0 \*\*\*", lines[0])
    assert re.fullmatch(r"\d+ INTERNAL \*\*\* DAGMAN_FINISHED 0 \*\*\*", lines[-1])
    nodes = [NODE_LINE.fullmatch(line) for line in lines[1:-1]]
    assert all(nodes), lines
    a = [(m[3], m[4], m[5], m[6]) for m in nodes if m and m[2] == "A"]
    assert a == [("PRE_SCRIPT_STARTED", "-", "local", "1"), ("PRE_SCRIPT_SUCCESS", "-", "local", "1"),
                 ("SUBMIT", "1.0", "local", "1"), ("EXECUTE", "1.0", "local", "1"),
                 ("JOB_TERMINATED", "1.0", "local", "1"), ("JOB_SUCCESS", "0", "local", "1"),
                 ("POST_SCRIPT_STARTED", "1.0", "local", "1"), ("POST_SCRIPT_TERMINATED", "1.0", "local", "1"),
                 ("POST_SCRIPT_SUCCESS", "1.0", "local", "1")]
    b = [(m[3], m[4], m[5], m[6]) for m in nodes if m and m[2] == "B"]
    # Each attempt a sequence number of its own; the tag the attribute +job_tag_name names.
    assert b == [("SUBMIT", "2.0", "cluster9", "2"), ("EXECUTE", "2.0", "cluster9", "2"),
                 ("JOB_TERMINATED", "2.0", "cluster9", "2"), ("JOB_FAILURE", "2", "cluster9", "2"),
                 ("SUBMIT", "3.0", "cluster9", "3"), ("EXECUTE", "3.0", "cluster9", "3"),
                 ("JOB_TERMINATED", "3.0", "cluster9", "3"), ("JOB_SUCCESS", "0", "cluster9", "3")]
    stamps = [int(line.split()[0]) for line in lines]
    assert stamps == sorted(stamps)


def test_a_finished_post_script_is_not_run_again_on_recovery(tmp_path: Path):
    _script(tmp_path / "post.sh", 'echo "$1" >> post.runs\nexit 0\n')
    text = "JOB A x.sub\nJOB B x.sub\nSCRIPT POST A post.sh $JOB\nPARENT A CHILD B\nJOBSTATE_LOG t.jobstate.log\n"
    eng, fake = engine_for(tmp_path, text)
    eng.step()
    fake.run()
    fake.finish()
    eng.step()  # A's job ended: its POST runs
    eng.runs["A"].script.wait()
    eng.step()  # the POST ended: A done, B submitted; DAGMan "dies" here
    assert eng.runs["B"].state == SUBMITTED
    before = _lines(tmp_path / "t.jobstate.log")
    # The POST's end is in the nodes log as HTCondor writes it (htcondor2 reads it).
    (post,) = [e for e in htcondor2.JobEventLog(str(tmp_path / "t.dag.nodes.log")).events(0)
               if e.type == htcondor2.JobEventType.POST_SCRIPT_TERMINATED]
    assert (post.cluster, post["DAGNodeName"], post["ReturnValue"], post["TerminatedNormally"]) == (1, "A", 0, True)

    again = Engine(parse_text(text, "t.dag", tmp_path), tmp_path / "t.dag", fake, recovery=True)
    again.start()
    assert again.runs["A"].state == DONE and again.runs["B"].state == SUBMITTED
    assert drive(again, fake) == EXIT_OKAY
    assert (tmp_path / "post.runs").read_text() == "A\n"  # once, before the recovery
    after = _lines(tmp_path / "t.jobstate.log")[len(before):]
    assert [line.split(" ", 1)[1] for line in after[:2]] == ["INTERNAL *** DAGMAN_STARTED 0.0 ***",
                                                             "INTERNAL *** RECOVERY_STARTED ***"]
    node_lines = {line for line in after if " INTERNAL " not in line}
    assert not node_lines & set(before)  # recovery wrote no node line twice
    # B's submit event was in the log, not yet read, when DAGMan died: recovery writes it, once.
    assert [line.split()[2] for line in before + after if " B " in line] == [
        "SUBMIT", "EXECUTE", "JOB_TERMINATED", "JOB_SUCCESS"]


def test_a_post_script_that_had_not_ended_runs_on_recovery(tmp_path: Path):
    # HTCondor's rule: a job that ended whose POST has no end in the log gets its POST run.
    _script(tmp_path / "post.sh", 'echo "$1" >> post.runs\n')
    text = "JOB A x.sub\nSCRIPT POST A post.sh $JOB\n"
    eng, fake = engine_for(tmp_path, text)
    eng.step()
    fake.run()
    fake.finish()  # A's job ended; DAGMan "dies" before it runs the POST
    again = Engine(parse_text(text, "t.dag", tmp_path), tmp_path / "t.dag", fake, recovery=True)
    again.start()
    assert again.runs["A"].state == POSTRUN
    assert drive(again, fake) == EXIT_OKAY
    assert (tmp_path / "post.runs").read_text() == "A\n"


def test_script_output_goes_where_htcondor_puts_it(tmp_path: Path, capfd):
    _script(tmp_path / "pre.sh", 'echo "pre out $1"\necho "pre err" >&2\necho kept > own.txt\n')
    _script(tmp_path / "post.sh", 'echo "post out"\necho "post err" >&2\nexit 0\n')
    text = ("JOB A x.sub\nJOB B x.sub\nSCRIPT DEBUG dbg.txt ALL PRE A pre.sh $JOB\n"
            "SCRIPT DEBUG dbg.txt STDERR POST A post.sh\nSCRIPT PRE B pre.sh $JOB\n")
    eng, fake = engine_for(tmp_path, text)
    assert drive(eng, fake) == EXIT_OKAY
    debug = (tmp_path / "dbg.txt").read_text()
    assert re.fullmatch(r"\*\*\* Node=A Type=PRE ExitCode=0 Completion=\d+ Cmd='pre\.sh A'\n"
                        r"pre out A\npre err\n"
                        r"\*\*\* Node=A Type=POST ExitCode=0 Completion=\d+ Cmd='post\.sh'\npost err\n", debug), debug
    assert (tmp_path / "own.txt").read_text() == "kept\n"  # a script's own redirects
    # Without DEBUG: DAGMan's own output and error (its job's <dag>.lib.out and .lib.err).
    out, err = capfd.readouterr()
    assert "pre out B" in out and "pre err" in err and "pre out A" not in out and "post" not in out + err


def test_a_deferred_post_script_s_end_in_the_log_is_not_acted_on_twice(tmp_path: Path):
    _script(tmp_path / "post.sh", 'n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n\n[ "$n" -ge 1 ] || exit 4\n')
    eng, fake = engine_for(tmp_path, "JOB A x.sub\nSCRIPT DEFER 4 0 POST A post.sh\n")
    assert drive(eng, fake) == EXIT_OKAY
    assert (tmp_path / "n").read_text().strip() == "2"  # once deferred, then done
    assert (tmp_path / "t.dag.dagman.out").read_text().count("Deferring POST script") == 1
