"""The submit language's own rules: errors name their line, known-but-unused commands warn, the
htcondor2 mapping API, queue statements and item data, the schedd's cluster_ad/proc_ads contract."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest

from gridbus.submit import Submit, SubmitError, SubmitWarning, UnusedMacroWarning, parse_queue
from gridbus.submit.quoting import arguments_attrs, environment_attr, join_v2, split_v2
from gridbus.submit.units import disk_kib, memory_mib

WORKDIR = Path(__file__).with_name("corpus") / "workdir"


def test_a_line_that_is_no_command_and_is_unused_warns_as_condor_submit_does():
    # condor_submit takes such a line for a macro of the user's own: it warns that nothing used
    # it (the warning catches typos) and goes on; HTCondor's bindings take a dict's keys silently.
    with pytest.warns(UnusedMacroWarning) as caught:
        sub = Submit("# typo below\narguments = 1\nexcutable = /bin/false\nexecutable = /bin/true\n"
                     "JobBatchName = nightly\nqueue\n")
    assert [str(w.message) for w in caught] == [
        "line 3: the line 'excutable = /bin/false' was unused by gridbus. Is it a typo?",
        "line 5: the line 'JobBatchName = nightly' was unused by gridbus. Is it a typo?"]
    ad = sub.build(qdate=0).cluster_ad
    assert ad["Cmd"] == "/bin/true" and "JobBatchName" not in ad and "excutable" not in ad
    with pytest.warns(UnusedMacroWarning), pytest.raises(SubmitError, match="no executable"):  # the typo's own consequence
        Submit("excutable = /bin/true\nqueue\n").build(qdate=0)


def test_a_dict_s_unused_keys_and_keys_set_later_pass_without_a_word(recwarn):
    sub = Submit({"executable": "/bin/true", "my_variable": "1"})
    sub["another"] = "2"
    assert sub.build(qdate=0).cluster_ad["Cmd"] == "/bin/true"
    assert not [w for w in recwarn if issubclass(w.category, SubmitWarning)]


def test_a_macro_that_is_referred_to_is_not_unknown():
    sub = Submit("data = /scratch\nexecutable = /bin/ls\narguments = $(data)\nqueue\n")
    assert sub.build(qdate=0).cluster_ad["Args"] == "/scratch"


def test_known_but_unused_command_warns_with_its_line():
    with pytest.warns(SubmitWarning, match=r"line 2: gridbus accepts 'notify_user' but does not act on it"):
        sub = Submit("executable = /bin/true\nnotify_user = me@example.org\nqueue\n")
    assert sub.build(qdate=0).cluster_ad["NotifyUser"] == "me@example.org"


def test_file_transfer_commands_are_acted_on_without_a_warning(recwarn):
    sub = Submit("executable = /bin/true\nshould_transfer_files = YES\ntransfer_input_files = a.dat, b\nqueue\n")
    ad = sub.build(qdate=0).cluster_ad
    assert ad["TransferInput"] == "a.dat,b" and ad["ShouldTransferFiles"] == "YES"
    assert not [w for w in recwarn if issubclass(w.category, SubmitWarning)]


def test_on_exit_or_evict_with_if_needed_is_refused_as_condor_submit_does():
    with pytest.raises(SubmitError, match="incompatible"):
        Submit("executable = /bin/true\nwhen_to_transfer_output = ON_EXIT_OR_EVICT\nqueue\n").build(qdate=0).jobs()


def test_unreadable_line_is_an_error():
    with pytest.raises(SubmitError, match=r"line 2: cannot read 'this is not a command'"):
        Submit("executable = /bin/true\nthis is not a command\nqueue\n")


def test_commands_after_the_queue_statement_warn():
    with pytest.warns(SubmitWarning, match=r"line 3: 'arguments' comes after the queue statement"):
        Submit("executable = /bin/true\nqueue\narguments = 1\n")


@pytest.mark.parametrize(
    "text, message",
    [
        ("arguments = 1\nqueue", "no executable given"),
        ("executable = /bin/true\nuniverse = java\nqueue", "universe 'java' is not run by gridbus"),
        ("executable = /bin/true\nuniverse = nonsense\nqueue", "unknown universe 'nonsense'"),
        ("executable = /bin/true\npriority = high\nqueue", "priority must be a whole number"),
        ("executable = /bin/true\nhold = maybe\nqueue", "hold must be true or false"),
        ("executable = /bin/true\ninitialdir = /no/such/dir\nqueue", "initialdir: no such directory"),
        ('executable = /bin/true\narguments = a "b" c\nqueue', "unescaped double quote"),
        ("executable = /bin/true\nqueue Item in [::0] (a b)", "slice step cannot be zero"),
        ("executable = /bin/true\nqueue a b c", "cannot read the queue statement"),
        ("executable = /bin/true\nqueue x from no-such-file.txt", "cannot read the queue item file"),
        ("executable = /bin/true\nqueue 0", "makes no jobs"),
        ("a = $(b)\nb = $(a)\nexecutable = /bin/true\narguments = $(a)\nqueue", "refers to itself"),
    ],
)
def test_bad_descriptions_say_what_is_wrong(text: str, message: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(WORKDIR)
    with pytest.raises(SubmitError, match=message):
        Submit(text).build(qdate=0)


def test_condor_submit_refuses_an_executable_that_would_travel_and_does_not_exist_or_is_empty(
        tmp_path, monkeypatch: pytest.MonkeyPatch):
    # condor_submit's check (transfer_executable, true by default): refused at submit with its
    # words, not held at the job's start; transfer_executable = false leaves it to the machine,
    # and a path naming the machine's $$() attributes to the match. HTCondor's Python bindings
    # make no such check (the job is held at its start), so the Python API's Submit does not.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.sh").write_text("")

    def by_condor_submit(text: str) -> list[dict]:
        sub = Submit(text)
        sub.setSubmitMethod(0, allow_reserved_values=True)
        return sub.build(qdate=0).jobs()

    with pytest.raises(SubmitError, match=r"^line 1: Executable file /no/such/program does not exist"):
        by_condor_submit("executable = /no/such/program\nqueue\n")
    with pytest.raises(SubmitError, match=f"Executable file {tmp_path}/empty.sh has zero length"):
        by_condor_submit("executable = empty.sh\nqueue\n")
    assert by_condor_submit("executable = /no/such/program\ntransfer_executable = false\nqueue\n")[0]["Cmd"] == \
        "/no/such/program"
    assert by_condor_submit("executable = prog.$$(OpSys)\nqueue\n")[0]["Cmd"] == f"{tmp_path}/prog.$$(OpSys)"
    assert Submit("executable = /no/such/program\nqueue\n").build(qdate=0).jobs()[0]["Cmd"] == "/no/such/program"


def test_error_from_a_command_names_its_line():
    with pytest.raises(SubmitError, match=r"^line 2: priority must be a whole number"):
        Submit("executable = /bin/true\npriority = high\nqueue").build(qdate=0)


def test_mapping_api_mirrors_htcondor2():
    sub = Submit('executable = /bin/echo\nArguments = $(Item) x\n+Foo = "bar"\nMY.Baz = 1\nrequest_memory = 1GB\nqueue 2 Item in (alpha, beta)\n')
    assert list(sub.keys()) == ["executable", "Arguments", "MY.Foo", "MY.Baz", "request_memory"]
    assert sub["arguments"] == "$(Item) x" and sub["+Foo"] == '"bar"' and "my.baz" in sub
    assert str(sub) == 'executable = /bin/echo\nArguments = $(Item) x\nMY.Foo = "bar"\nMY.Baz = 1\nrequest_memory = 1GB\nqueue 2 Item in (alpha, beta)\n'
    assert sub.getQArgs() == "2 Item in (alpha, beta)"
    assert list(sub.itemdata()) == [{"Item": "alpha"}, {"Item": "beta"}]
    assert sub.expand("Arguments") == " x"
    assert sub.getSubmitMethod() == 2
    sub["arguments"] = "changed"
    assert sub["Arguments"] == "changed" and list(sub.keys())[1] == "Arguments"
    with pytest.raises(TypeError):
        sub["x"] = 3  # type: ignore[assignment]
    kw = Submit({"executable": "/bin/true", "+Foo": '"x"'}, queue="3")
    assert str(kw) == 'executable = /bin/true\nMY.Foo = "x"\nqueue 3\n'
    assert str(Submit(executable="/bin/true", arguments="1")) == "executable = /bin/true\narguments = 1\nqueue\n"
    with pytest.raises(ValueError, match="reserved"):
        sub.setSubmitMethod(5)
    sub.setSubmitMethod(0, allow_reserved_values=True)
    assert sub.build(qdate=0).cluster_ad["JobSubmitMethod"] == 0


def test_itemdata_forms(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(WORKDIR)
    sub = Submit("executable = /bin/true\nqueue 5\n")
    assert sub.itemdata() is None
    assert list(sub.itemdata("queue x,y from (\n 1 2\n 3 4\n)")) == [{"x": "1", "y": "2"}, {"x": "3", "y": "4"}]
    assert list(sub.itemdata("queue f matching (*.dat)")) == [{"f": "a.dat"}, {"f": "b.dat"}]
    assert list(sub.itemdata("queue a,b from items.txt")) == [
        {"a": "x1", "b": "y1"}, {"a": "x2", "b": "y2"}, {"a": "x3", "b": "y3 z3"},
    ]
    assert list(sub.itemdata("queue from printf '1\\n2\\n' |")) == [{"Item": "1"}, {"Item": "2"}]
    # As in htcondor2, itemdata() does not apply the slice (jobs do).
    assert len(list(sub.itemdata("queue i in [0:2] (a b c)"))) == 3


def test_parse_queue_forms():
    qa = parse_queue("3 a, b from [1:4:2] items.txt")
    assert (qa.count, qa.variables, qa.mode, qa.slice, qa.source) == ("3", ["a", "b"], "from", (1, 4, 2), "items.txt")
    qa = parse_queue("matching dirs (*)")
    assert (qa.names, qa.matching_kind, qa.inline) == (["Item"], "dirs", "*")
    qa = parse_queue("from ls |")
    assert qa.command and qa.source == "ls"


def test_contract_cluster_ad_and_proc_ads():
    sub = Submit("executable = /bin/echo\narguments = $(Item)\noutput = $(Cluster).$(Process).out\nqueue 2 Item in (a, b)\n")
    assert sub.uses_cluster_id()
    cluster = sub.cluster_ad(cluster_id=9, qdate=100, owner="alice")
    assert cluster["ClusterId"] == 9 and cluster["Owner"] == "alice" and cluster["QDate"] == 100
    assert "Args" not in cluster and "ProcId" not in cluster and "Out" not in cluster
    procs = sub.proc_ads(cluster_id=9, qdate=100)
    assert procs == [
        {"ProcId": 0, "Args": "a", "Out": "9.0.out"}, {"ProcId": 1, "Args": "a", "Out": "9.1.out"},
        {"ProcId": 2, "Args": "b", "Out": "9.2.out"}, {"ProcId": 3, "Args": "b", "Out": "9.3.out"},
    ]
    # count= and itemdata= override the queue statement, as in htcondor2's Schedd.submit.
    assert [j["Args"] for j in sub.build(itemdata=[{"Item": "z"}], qdate=0).jobs()] == ["z"]
    assert [p["Args"] for p in sub.proc_ads(count=1, itemdata=["p", "q"], qdate=0)] == ["p", "q"]
    # A dict submit (no queue statement) whose itemdata rows name their own macros: each proc its own
    # (every proc took the first row's values).
    bare = Submit({"executable": "/bin/sleep", "arguments": "$(secs)", "output": "$(secs).out"})
    jobs = list(bare.build(itemdata=iter([{"secs": "30"}, {"secs": "31"}]), qdate=0).jobs())
    assert [(j["Args"], j["Out"]) for j in jobs] == [("30", "30.out"), ("31", "31.out")]
    plain = Submit("executable = /bin/true\nqueue 3\n")
    assert not plain.uses_cluster_id()
    assert plain.proc_ads(qdate=0) == [{"ProcId": 0}, {"ProcId": 1}, {"ProcId": 2}]
    assert len(plain.proc_ads(count=5, qdate=0)) == 5


def test_a_million_proc_cluster_is_cheap_when_procs_do_not_differ():
    built = Submit("executable = /bin/true\nmax_idle = 100\nqueue 100000\n").build(qdate=0)
    assert len(built.proc_ads) == 100000 and built.cluster_ad["JobMaterializeMaxIdle"] == 100


def test_default_requirements_match_a_slot_like_htcondors():
    ad = Submit("executable = /bin/true\nrequest_cpus = 2\nqueue\n").build(qdate=0).cluster_ad
    text = str(ad["Requirements"])
    for clause in ("TARGET.Arch ==", 'TARGET.OpSys == "LINUX"', "TARGET.Disk >= RequestDisk",
                   "TARGET.Memory >= RequestMemory", "TARGET.Cpus >= RequestCpus"):
        assert clause in text


def test_quoting_round_trips():
    words = ["a b", "it's", "", 'q"uote', "plain"]
    assert split_v2(join_v2(words), "t") == words
    assert arguments_attrs('"one ""two"" \'three four\'"') == {"Arguments": "one \"two\" three' 'four"}
    assert arguments_attrs("-n x") == {"Args": "-n x"}
    assert arguments_attrs(None) == {"Arguments": ""}
    assert environment_attr('"B=2 A=\'x y\'"') == "A=x' 'y B=2"
    assert environment_attr("A=1;B=2") == "A=1 B=2"
    with pytest.raises(SubmitError, match="not NAME=value"):
        environment_attr("novalue")


@pytest.mark.parametrize(
    "text, mib, kib",
    [("1GB", 1024, 1048576), ("1.5G", 1536, 1572864), ("2048K", 2, 2048), ("10 M", 10, 10240),
     ("100", 100, 100), ("0.5", 1, 1), ("1T", 1048576, 1073741824), ("MY.x * 2", None, None)],
)
def test_units(text: str, mib: int | None, kib: int | None):
    assert memory_mib(text) == mib and disk_kib(text) == kib


def test_no_warning_for_a_clean_description():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Submit("executable = /bin/true\nrequest_memory = 1G\nqueue\n").build(qdate=0)


CHOICE_SUBSTR = ["$CHOICE(1,mylist)", "$CHOICE(1,sp)", "$CHOICE(Step,x)", "$CHOICE(5,a,b)", "$CHOICE(Step,a)",
                 "$CHOICE( 1 , a , b )", "$CHOICE(-1,a,b)", "$CHOICE(zz,a,b,c)", "$CHOICE(0,a)", "$CHOICE(0,mylist)",
                 "$CHOICE(2,a,b,c)", "$CHOICE(1, mylist)", "$CHOICE(1,sp2)", "$CHOICE(One,a,b,c)",
                 "$SUBSTR(Item,100)", "$SUBSTR(Item,-100,2)", "$SUBSTR(Item,1,0)", "$SUBSTR(Item,1,-100)",
                 "$SUBSTR(nope,1)", "$SUBSTR(Item,zz)", "$SUBSTR(Item,1,zz)", "$SUBSTR(Item,-2,1)", "$SUBSTR(Item,0,3)",
                 "$SUBSTR(Item,2,-1)", "$SUBSTR(Item,One,One)", "$SUBSTR(Item,3)"]


@pytest.mark.parametrize("call", CHOICE_SUBSTR)
def test_choice_and_substr_expand_as_htcondor_expands_them(call):
    htcondor2 = pytest.importorskip("htcondor2")
    text = ("executable = /bin/echo\nStep = 0\nOne = 1\nItem = abcdef\nmylist = x, y ,z\nsp = p q  r\n"
            f"sp2 = p,q r\narguments = [{call}]\nqueue\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = Submit(text).expand("arguments")
    assert ours == htcondor2.Submit(text).expand("arguments")
    # The macros a call names are used: no warning for them (the others are: the fixture's spares).
    used = {"mylist": "mylist" in call, "sp ": "sp)" in call, "sp2": "sp2" in call, "One": "One" in call}
    for name, named in used.items():
        assert named != any(f"the line '{name}" in str(w.message) for w in caught), (name, [str(w.message) for w in caught])


MACRO_FUNCTIONS = ["$Fn(F)", "$Fx(F)", "$Fp(F)", "$Fd(F)", "$Fdb(F)", "$Fpb(F)", "$Fpn(F)", "$Fnx(F)", "$Fq(F)",
                   "$Fb(F)", "$Fu(F)", "$Fw(F)", "$Fd(G)", "$Fdb(G)", "$Fd(H)", "$Fp(H)", "$Fn(H)", "$Fx(H)",
                   "$INT(N)", "$INT(N,%04d)", "$INT(7/2)", "$INT(R)", "$INT(-2.7)", "$INT(2*3)", "$REAL(R)",
                   "$REAL(R,%.2f)", "$REAL(N)", "$REAL(1/3.0)", "$REAL(1e20)", "$REAL(0.1)", "$REAL(1.5e2)",
                   "$STRING(R)", "$STRING(N,%5s)", "$STRING(zz)", "$EVAL(3*2)", "$EVAL(1.0/3)", "$EVAL(true)",
                   "$EVAL(N)", "$EVAL(zz)"]


@pytest.mark.parametrize("call", MACRO_FUNCTIONS)
def test_macro_functions_expand_as_htcondor_expands_them(call):
    htcondor2 = pytest.importorskip("htcondor2")
    text = ("executable = /bin/echo\nN = 3\nR = 2.5\nF = /data/run/alpha.tar.gz\nG = rel/b.c\nH = plain\n"
            f"arguments = [{call}]\nqueue\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SubmitWarning)  # (the fixture's macros a call does not use)
        ours = Submit(text).expand("arguments")
    assert ours == htcondor2.Submit(text).expand("arguments")


def test_int_of_what_is_no_number_or_a_format_that_cannot_print_it_is_an_error_naming_it():
    with pytest.raises(SubmitError, match=r"\$INT\(zz\) does not name a number"):
        Submit("executable = /bin/echo\narguments = $INT(zz)\nqueue\n").build(qdate=0)
    with pytest.raises(SubmitError, match=r"\$INT\(3,%s %s\): the format '%s %s' cannot print 3"):
        Submit("executable = /bin/echo\narguments = $INT(3,%s %s)\nqueue\n").build(qdate=0)


DEFAULTS_TABLE = [
    "a = $(Step)|$(Row)|$(ItemIndex)|$(Item)|$(Cluster)|$(ClusterId)|$(ProcId)|$(Process)|$(Node)|$(JobId)\n",
    "node = A\na = $(node)\n",
    "Process = 7\na = $(Process) $(ProcId) $(JobId)\n",
    "Step = 3\nRow = 4\nItemIndex = 5\nCluster = 9\na = $(Step) $(Row) $(ItemIndex) $(Cluster) $(ClusterId)\n",
    "item = zz\na = $(item)\n",
]


@pytest.mark.parametrize("text", DEFAULTS_TABLE)
def test_the_built_in_macros_are_defaults_a_description_s_own_macro_overrides(text):
    """condor_submit keeps Cluster, Process, Node, Step, Row, ItemIndex and JobId in a table of
    defaults, found only where the description defines no macro of that name."""
    htcondor2 = pytest.importorskip("htcondor2")
    text = f"executable = /bin/echo\n{text}queue\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SubmitWarning)
        assert Submit(text).expand("a") == htcondor2.Submit(text).expand("a")


def test_a_macro_named_as_a_built_in_one_is_the_description_s_in_every_proc():
    """A DAG's `VARS A node="A"` reaches the node's submit description as `node = A`: its jobs see
    A, not the built-in $(Node) (empty outside the parallel universe). The queue statement's own
    variables still win over the description's."""
    text = ("executable = /bin/echo\nnode = A\nitem = fixed\narguments = $(node) $(JobId) $(Node)\n"
            "output = out.$(node).$(item)\nqueue 2\n")
    built = Submit(text).build(cluster_id=4, qdate=0)
    assert [(j["Args"], j["Out"]) for j in built.jobs()] == [("A 4.0 A", "out.A.fixed"), ("A 4.1 A", "out.A.fixed")]
    built = Submit("executable = /bin/echo\nitem = fixed\narguments = $(item) $(Node)x\nqueue item in (p, q)\n").build(qdate=0)
    assert [j["Args"] for j in built.jobs()] == ["p x", "q x"]


def test_late_materialization_makes_the_same_procs_with_defaults_overridden():
    """The schedd's template (max_materialize) gives each proc what the client would build: the
    description's own `node`/`item`, $(JobId), $(Node) empty, the queue's Item per row."""
    from gridbus.submit import materialize

    for text in ["executable = /bin/echo\nnode = A\nitem = fixed\narguments = $(node) $(JobId) $(item) $(Process)\nqueue 3\n",
                 "executable = /bin/echo\nitem = fixed\narguments = $(item) $(Node)x $(JobId)\nqueue item in (p, q)\n"]:
        sub = Submit(text)
        built = sub.build(cluster_id=4, qdate=0)
        late = sub.late(built, 4, qdate=0)
        assert late is not None, text
        made = [materialize.proc_ad(late["Template"], materialize.proc_for(i, late["Items"], late["Steps"]))["Args"]
                for i in range(len(built.proc_ads))]
        assert made == [j["Args"] for j in built.jobs()]
    assert made == ["p x 4.0", "q x 4.1"]


@pytest.mark.parametrize("name", ["ARCH", "OPSYS", "IsLinux", "IsWindows", "OPSYSANDVER", "OPSYSMAJORVER", "OPSYSVER"])
def test_the_submit_machine_s_platform_macros_expand_as_htcondor_expands_them(name):
    htcondor2 = pytest.importorskip("htcondor2")
    for text in (f"a = [$({name})]\nqueue\n", f"{name} = mine\na = [$({name})]\nqueue\n"):
        text = f"executable = /bin/echo\n{text}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SubmitWarning)
            assert Submit(text).expand("a") == htcondor2.Submit(text).expand("a")


def test_submit_time_macros_are_the_submit_s():
    """condor_submit's $(SUBMIT_TIME), $(Year), $(Month) and $(Day): the time of the submit, in
    local time (htcondor2's expand() leaves them empty: there is no submit)."""
    qdate = int(time.mktime((2026, 3, 7, 12, 0, 0, 0, 0, -1)))
    built = Submit("executable = /bin/echo\narguments = $(SUBMIT_TIME) $(Year)_$(Month)_$(Day)\nqueue\n").build(qdate=qdate)
    assert built.jobs()[0]["Args"] == f"{qdate} 2026_03_07"
