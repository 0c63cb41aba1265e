"""The DAG language: what each command sets, splices and includes, errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.dag import DagError, apply_rescue, format_dag, parse_file, parse_text, rescue_text

DIAMOND = """\
# a diamond
JOB A a.sub
JOB B b.sub DIR sub/b
JOB C c.sub NOOP
JOB D d.sub DONE
PARENT A CHILD B C
PARENT B C CHILD D
RETRY B 3 UNLESS-EXIT 42
VARS A x="1" msg="say \\"hi\\" \\\\ there"
SCRIPT DEFER 4 30 PRE A pre.sh $JOB $RETRY
SCRIPT POST A post.sh $RETURN
PRE_SKIP A 7
ABORT-DAG-ON C 3 RETURN 9
PRIORITY B 5
CATEGORY ALL_NODES light
MAXJOBS light 2
CONFIG dagman.config
DOT dag.dot UPDATE
NODE_STATUS_FILE status.txt 5 ALWAYS-UPDATE
SET_JOB_ATTR Team = "blue"
FINAL F f.sub
"""


def test_every_command_sets_what_it_names():
    dag = parse_text(DIAMOND)
    a, b, c, d = (dag.nodes[n] for n in "ABCD")
    assert list(dag.nodes) == ["A", "B", "C", "D"]
    assert a.children == ["B", "C"] and d.parents == ["B", "C"]
    assert b.directory == "sub/b" and c.noop and d.done
    assert (b.retries, b.retry_unless_exit, b.priority) == (3, 42, 5)
    assert a.vars == {"x": "1", "msg": 'say "hi" \\ there'}
    assert a.pre.executable == "pre.sh" and a.pre.arguments == ["$JOB", "$RETRY"]
    assert (a.pre.defer_status, a.pre.defer_time) == (4, 30)
    assert a.post.arguments == ["$RETURN"] and a.pre_skip == 7
    assert (c.abort_on, c.abort_return) == (3, 9)
    assert {n.category for n in dag.nodes.values()} == {"light"} and dag.maxjobs == {"light": 2}
    assert dag.config == "dagman.config" and dag.dot == ["dag.dot", "UPDATE"]
    assert (dag.node_status_file, dag.node_status_interval, dag.node_status_always) == ("status.txt", 5, True)
    assert dag.job_attrs == {"Team": '"blue"'}
    assert dag.final.name == "F" and "F" not in dag.nodes


def test_written_text_parses_back_to_the_same_dag():
    dag = parse_text(DIAMOND)
    again = parse_text(format_dag(dag))
    assert format_dag(again) == format_dag(dag)
    assert again.nodes["A"].vars == dag.nodes["A"].vars


@pytest.mark.parametrize(("text", "line", "words"), [
    ("JOB A a.sub\nJOB A b.sub\n", 2, "defined twice"),
    ("JOB A a.sub\nPARENT A CHILD B\n", 2, "no node named 'B'"),
    ("JOB A a.sub\nRETRY A many\n", 2, "integer"),
    ("JOB A a.sub\n\nFROB A\n", 3, "unknown DAG command"),
    ("JOB A a.sub\nVARS A x=1\n", 2, 'macro="value"'),
    ("JOB A a.sub\nSCRIPT MIDDLE A x.sh\n", 2, "PRE|POST|HOLD"),
    ("JOB A+B a.sub\n", 1, "valid node name"),
    ("JOB A a.sub\nPRE_SKIP A 0\n", 2, "must not be 0"),
])
def test_errors_name_the_file_and_line(text, line, words):
    with pytest.raises(DagError) as err:
        parse_text(text, name="bad.dag")
    assert str(err.value).startswith(f"bad.dag:{line}:")
    assert words in str(err.value)


def test_a_cycle_is_refused():
    with pytest.raises(DagError, match="cycle"):
        parse_text("JOB A a\nJOB B b\nPARENT A CHILD B\nPARENT B CHILD A\n")


def test_splice_and_include(tmp_path: Path):
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "s.dag").write_text("JOB X x.sub\nJOB Y y.sub\nPARENT X CHILD Y\n")
    (tmp_path / "more.dag").write_text("JOB Z z.sub\n")
    (tmp_path / "top.dag").write_text(
        "JOB A a.sub\nSPLICE S s.dag DIR inner\nINCLUDE more.dag\nPARENT A CHILD S\nPARENT S CHILD Z\n")
    dag = parse_file(tmp_path / "top.dag")
    assert list(dag.nodes) == ["A", "S+X", "S+Y", "Z"]
    assert dag.nodes["S+X"].parents == ["A"] and dag.nodes["Z"].parents == ["S+Y"]
    assert dag.nodes["S+X"].directory == "inner"


def test_an_error_in_an_included_file_names_that_file(tmp_path: Path):
    (tmp_path / "more.dag").write_text("JOB Z z.sub\nRETRY Z x\n")
    (tmp_path / "top.dag").write_text("INCLUDE more.dag\n")
    with pytest.raises(DagError, match=r"more\.dag:2:"):
        parse_file(tmp_path / "top.dag")


def test_rescue_dag_format_and_reading(tmp_path: Path):
    dag = parse_text("JOB A a\nJOB B b\nJOB C c\nPARENT A CHILD B C\n")
    text = rescue_text("x.dag", dag.all_nodes(), {"A", "B"}, ["C"], 0, when=0)
    assert text.splitlines()[:9] == [
        "# Rescue DAG file, created after running", "#   the x.dag DAG file",
        "# Created 1/1/1970 00:00:00 UTC", "# Rescue DAG version: 2.1.0", "#",
        "# Total number of Nodes: 3", "# Nodes premarked DONE: 0", "# Nodes that failed: 1",
        "#   C,<ENDLIST>"]
    assert text.endswith("\nDONE A\nDONE B\n")
    (tmp_path / "x.dag.rescue001").write_text(text)
    apply_rescue(dag, tmp_path / "x.dag.rescue001")
    assert [n.done for n in dag.nodes.values()] == [True, True, False]
