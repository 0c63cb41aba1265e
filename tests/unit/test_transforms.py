"""The ClassAd transform language (gridbus.transforms) against the examples of HTCondor's manual.

Each row of TABLE is a transform as the manual writes it, an ad, and the ad the manual says comes
out (None: the transform's REQUIREMENTS leave the ad alone). Values are written as ClassAd text.
"""

from __future__ import annotations

from typing import Any

import pytest

from gridbus import classad
from gridbus.classad import ExprTree
from gridbus.transforms import TransformError, apply_all, changes, parse, reads, transform_changes

# The admin manual, "Schedd Job Transforms": vanilla jobs that want SL6 become Docker jobs.
SL6_TO_DOCKER = """
   # match only vanilla jobs that have WantSL6 and do not already have a DockerImage
   REQUIREMENTS JobUniverse==5 && WantSL6 && DockerImage =?= undefined
   SET  WantDocker = true
   SET  DockerImage = "SL6"
   SET  Requirements = TARGET.HasDocker && $(MY.Requirements)
"""

# The same section: an accounting group from the owner. gridbus configures no user maps
# (SCHEDD_CLASSAD_USER_MAP_NAMES), so userMap answers undefined, as HTCondor's does for a map it
# does not have: the group is then the owner's name alone.
ASSIGN_GROUP = """
   # map Owner to group using the existing accounting group attribute as requested group
   EVALSET AcctGroup = userMap("Groups",Owner,AcctGroup)
   EVALSET AccountingGroup = join(".",AcctGroup,Owner)
"""

# The condor_transform_ads manual page's example, with its input and its documented output.
TRANSFORM_ADS_RULES = """
    # File: my_rules
    EVALSET MemoryUsage ( ResidentSetSize / 100 )
    EVALMACRO WantDisk = ( DiskUsage * 2 )
    SET RequestDisk ( $(WantDisk) / 1024 )
    RENAME NumCkpts NumCheckPoints
    DELETE /(.+)Err/
"""
TRANSFORM_ADS_INPUT = {"ResidentSetSize": "500", "DiskUsage": "2500000", "NumCkpts": "0",
                       "TransferrErr": "false", "Err": '"/dev/null"'}
TRANSFORM_ADS_OUTPUT = {"DiskUsage": "2500000", "Err": '"/dev/null"', "MemoryUsage": "5",
                        "NumCheckPoints": "0", "RequestDisk": "( 5000000 / 1024 )", "ResidentSetSize": "500"}

# The ClassAd Transforms page: COPY by regex, its example line.
COPY_RESOURCES = r"""
  # copy all attributes whose names begin with Resource to new attribute with names that begin with OriginalResource
  COPY /Resource(.+)/ OriginalResource\1
"""

# The job router's pre-route transform as the manual corrects it (the manual's text has one
# closing parenthesis too many: see test_the_manuals_unbalanced_parenthesis_is_refused).
ROUTER_DEFAULTS = """
   # remove routed job if it goes on hold or stays idle for over 6 hours
   SET PeriodicRemove = JobStatus == 5 || \\
                       (JobStatus == 1 && (time() - QDate) > 3600*6)
   # delete the global SOURCE_JOB_CONSTRAINT attribute so that routed jobs will not be routed again
   DELETE WantJobRouter
   SET Requirements = true
"""

VANILLA = {"JobUniverse": "5", "WantSL6": "true", "Requirements": "TARGET.Memory >= RequestMemory",
           "RequestMemory": "2048", "Owner": '"alice"'}

TABLE: list[tuple[str, str, dict[str, str], dict[str, str] | None]] = [
    ("SL6ToDocker: a vanilla job that wants SL6 becomes a Docker job", SL6_TO_DOCKER, VANILLA,
     {**VANILLA, "WantDocker": "true", "DockerImage": '"SL6"',
      "Requirements": "TARGET.HasDocker && TARGET.Memory >= RequestMemory"}),
    ("SL6ToDocker: a job without WantSL6 is left alone", SL6_TO_DOCKER,
     {k: v for k, v in VANILLA.items() if k != "WantSL6"}, None),
    ("SL6ToDocker: a job with its own DockerImage is left alone", SL6_TO_DOCKER,
     {**VANILLA, "DockerImage": '"centos7"'}, None),
    ("SL6ToDocker: a grid universe job is left alone", SL6_TO_DOCKER, {**VANILLA, "JobUniverse": "9"}, None),
    ("AssignGroup: the accounting group from the owner", ASSIGN_GROUP, {"Owner": '"alice"'},
     {"Owner": '"alice"', "AcctGroup": "undefined", "AccountingGroup": '"alice"'}),
    ("condor_transform_ads: EVALSET, EVALMACRO, SET with a macro, RENAME, DELETE by regex",
     TRANSFORM_ADS_RULES, TRANSFORM_ADS_INPUT, TRANSFORM_ADS_OUTPUT),
    ("COPY /Resource(.+)/ OriginalResource\\1", COPY_RESOURCES,
     {"ResourceCpus": "4", "ResourceMemory": "2048", "Owner": '"alice"'},
     {"ResourceCpus": "4", "ResourceMemory": "2048", "Owner": '"alice"',
      "OriginalResourceCpus": "4", "OriginalResourceMemory": "2048"}),
    ("the router's defaults: a continued SET, DELETE, SET", ROUTER_DEFAULTS,
     {"WantJobRouter": "true", "Requirements": "TARGET.OpSys == \"LINUX\"", "JobStatus": "1"},
     {"JobStatus": "1", "Requirements": "true",
      "PeriodicRemove": "JobStatus == 5 || (JobStatus == 1 && (time() - QDate) > 3600 * 6)"}),
    ("a route's SET", 'SET remote_jobuniverse = 5', {"JobUniverse": "5"},
     {"JobUniverse": "5", "remote_jobuniverse": "5"}),
]


def _ad(texts: dict[str, str]) -> dict[str, Any]:
    """An ad as a submitted one is held: literals as Python values, expressions as ExprTrees."""
    out: dict[str, Any] = {}
    for name, text in texts.items():
        tree = ExprTree(text)
        value = classad.compile(text).eval({}) if _is_literal(text) else tree
        out[name] = value
    return out


def _is_literal(text: str) -> bool:
    return text in ("true", "false") or text.lstrip("-").isdigit() or (text.startswith('"') and text.endswith('"'))


def _texts(ad: dict[str, Any]) -> dict[str, str]:
    return {name: classad.quote(v) if isinstance(v, str) else str(ExprTree(v)) for name, v in ad.items()}


@pytest.mark.parametrize("why,rules,given,expected", TABLE, ids=[row[0] for row in TABLE])
def test_the_manuals_examples(why: str, rules: str, given: dict[str, str], expected: dict[str, str] | None):
    t = parse("JOB_TRANSFORM_Example", rules)
    out = t.apply(_ad(given))
    if expected is None:
        assert out is None, why
        return
    assert out is not None, why
    assert _texts(out) == _texts(_ad(expected)), why


def test_the_manuals_unbalanced_parenthesis_is_refused():
    """The router example as the manual prints it has one ')' too many: refused with its line,
    not applied as something else."""
    text = ROUTER_DEFAULTS.replace("3600*6)", "3600*6))")
    with pytest.raises(TransformError, match=r"JOB_TRANSFORM_Defaults line 3: SET PeriodicRemove: invalid expression"):
        parse("JOB_TRANSFORM_Defaults", text)


@pytest.mark.parametrize("value,applied", [(None, True), ("undefined", True), ("3", False)])
def test_default_is_if_not_defined_set(value: str | None, applied: bool):
    """DEFAULT <attr> <expr> is `if ! defined MY.<attr>` / `SET` / `endif` (the manual's words):
    it sets an absent or undefined attribute and leaves a defined one."""
    given = {} if value is None else {"RequestCpus": value}
    by_default = parse("A", "DEFAULT RequestCpus 1").apply(_ad(given))
    by_if = parse("B", "if ! defined MY.RequestCpus\n  SET RequestCpus 1\nendif").apply(_ad(given))
    assert by_default is not None and by_if is not None
    assert _texts(by_default) == _texts(by_if) == {"RequestCpus": "1" if applied else "3"}


def test_macros_if_elif_else_and_evalmacro():
    rules = """
        site = chtc
        EVALMACRO mem = RequestMemory * 2
        EVALMACRO big = $(mem) > 4000
        if $(big)
          SET Big true
        elif defined MY.Small
          SET Big false
        else
          SET Big undefined
        endif
        SET Site "$(site)-$INT(mem)"
        NAME ignored
    """
    t = parse("JOB_TRANSFORM_M", rules)
    assert _texts(t.apply({"RequestMemory": 3000}) or {})["Big"] == "true"
    assert _texts(t.apply({"RequestMemory": 100, "Small": 1}) or {})["Big"] == "false"
    out = t.apply({"RequestMemory": 100}) or {}
    assert _texts(out)["Big"] == "undefined" and out["Site"] == "chtc-200"


def test_regex_rename_delete_and_names_ignore_case():
    t = parse("JOB_TRANSFORM_R", r"""
        RENAME /^orig_(.*)$/ Original\1
        DELETE /^tmp/
        COPY owner SubmitterName
        RENAME requestmemory RequestMemory
    """)
    out = t.apply({"Orig_A": 1, "ORIG_b": 2, "TmpX": 3, "tmpy": 4, "Owner": "bob", "requestMemory": 5}) or {}
    assert out == {"OriginalA": 1, "Originalb": 2, "Owner": "bob", "SubmitterName": "bob", "RequestMemory": 5}


def test_evalset_stores_the_value_and_set_the_expression():
    out = parse("T", "EVALSET Now2 1 + 2\nSET Later 1 + 2").apply({}) or {}
    assert out["Now2"] == 3 and str(out["Later"]) == "1 + 2"


def test_transforms_apply_in_order_each_seeing_the_one_before():
    first = parse("JOB_TRANSFORM_First", "SET Site \"a\"")
    second = parse("JOB_TRANSFORM_Second", "REQUIREMENTS Site == \"a\"\nSET Tagged true")
    third = parse("JOB_TRANSFORM_Third", "REQUIREMENTS Site == \"b\"\nSET Wrong true")
    out, applied = apply_all([first, second, third], {"Owner": "bob"})
    assert applied == ["JOB_TRANSFORM_First", "JOB_TRANSFORM_Second"]
    assert out == {"Owner": "bob", "Site": "a", "Tagged": True}
    assert changes({"Owner": "bob", "Gone": 1, "Same": 1}, {"Owner": "bob", "Site": "a", "Same": True}) == (
        {"Site": "a", "Same": True}, ["Gone"])


def test_configuration_macros_expand():
    t = parse("JOB_TRANSFORM_C", "SET Pool \"$(POOL_NAME)\"", config={"POOL_NAME": "blue"}.get)
    assert (t.apply({}) or {})["Pool"] == "blue"


@pytest.mark.parametrize("rules,sentence", [
    ("FROB X 1", "line 1: FROB is not a valid transform keyword"),
    ("SET X", "line 1: SET needs 2 arguments"),
    ("COPY /[/ New", r"line 1: invalid regex /\[/"),
    ("if true\nSET X 1", "an if has no endif"),
    ("endif", "line 1: endif without an if"),
    ("SET X 1 +", "line 1: SET X: invalid expression 1 +"),
    ("REQUIREMENTS", "line 1: REQUIREMENTS needs an expression"),
    ("COPY A 9lives", "line 1: 9lives is not an attribute name"),
    ("TRANSFORM 3", "TRANSFORM is a keyword of condor_transform_ads"),
    ("SET MY.Foo 1", "line 1: SET: MY.Foo is not an attribute name"),
    ('[ set_Foo = 1; ]', "the earlier New ClassAds form of transforms"),
])
def test_a_broken_transform_is_refused_with_its_line(rules: str, sentence: str):
    with pytest.raises(TransformError, match=sentence):
        parse("JOB_TRANSFORM_Bad", rules)


def test_a_line_that_fails_once_expanded_names_its_line():
    t = parse("JOB_TRANSFORM_E", "# a comment\nSET X $(MY.Cmd) +")
    with pytest.raises(TransformError, match=r"JOB_TRANSFORM_E line 2: SET X: invalid expression"):
        t.apply({"Cmd": "/bin/true"})


def test_reads_names_what_can_change_the_outcome():
    """The attributes a transform can read (through the expressions it reaches), or None where
    it reads attribute names themselves: procs that agree on them are transformed alike."""
    t = parse("T", "REQUIREMENTS Big\nSET X $(MY.Args)\nDEFAULT Y 1")
    read = reads([t], {"Big": ExprTree("RequestMemory > 4000"), "RequestMemory": 1, "Other": 2})
    assert read is not None and {"big", "requestmemory", "args", "y", "x"} <= read and "other" not in read
    assert reads([t, parse("R", "DELETE /^tmp/")], {}) is None


@pytest.mark.parametrize("why,rules,given,expected", TABLE, ids=[row[0] for row in TABLE])
def test_the_changes_told_are_the_difference_of_the_ads(why: str, rules: str, given: dict[str, str],
                                                       expected: dict[str, str] | None):
    """transform_changes (from the names touched) answers what comparing the ads would."""
    t = parse("JOB_TRANSFORM_Example", rules)
    ad = _ad(given)
    assert transform_changes([t], ad) == changes(ad, t.apply(ad) or ad), why
