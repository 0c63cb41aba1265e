"""condor_q / condor_status layouts and the command line's parsing,
without a pool."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridbus.classad import ExprTree
from gridbus.console.cli import build_parser, formats, jobs, pool_url

T = time.mktime((2020, 7, 10, 3, 22, 0, 0, 0, -1))


def job(c: int, p: int, status: int, owner: str = "nemo", **kw):
    return {"ClusterId": c, "ProcId": p, "JobStatus": status, "Owner": owner, "QDate": int(T), "Cmd": "/bin/sleep",
            "Args": "60", "JobPrio": 0, "ImageSize": 0, **kw}


def test_batch_table_rows_as_condor_q():
    ads = [job(42, 0, 1, "alice"), job(42, 1, 2, "alice"), job(42, 2, 1, "alice"),
           job(7801943, 0, 4, JobBatchName="batch28"), job(7858552, 0, 2, JobBatchName="batch28")]
    lines = formats.batch_table(ads).splitlines()
    assert lines[0] == "OWNER    BATCH_NAME    SUBMITTED   DONE   RUN    IDLE  TOTAL JOB_IDS"
    assert lines[1] == "alice    ID: 42        7/10 03:22      _      1      2      3 42.0-2"
    assert lines[2] == "nemo     batch28       7/10 03:22      1      1      _      2 7801943.0 ... 7858552.0"


def test_hold_column_only_with_held_jobs():
    lines = formats.batch_table([job(5, 0, 5)]).splitlines()
    assert lines[0] == formats.BATCH_HEADER
    assert lines[1] == "nemo     ID: 5         7/10 03:22      _      _      _      1      1 5.0"


def test_nobatch_columns():
    line = formats.nobatch_table([job(591, 0, 2, JobCurrentStartDate=int(T) - 13, RemoteWallClockTime=0)],
                                 now=T).splitlines()[1]
    assert line == " 591.0   nemo            7/10 03:22   0+00:00:13 R  0    0.0 sleep 60          "


def test_the_cmd_column_is_htcondors_job_description():
    # The executable's base name and the arguments as the ad holds them (the new syntax's first);
    # a JobDescription instead, in parentheses, as matched where it had a $$().
    assert formats.job_description({"Cmd": "/bin/sh", "Arguments": "-c sleep' '1", "Args": "x"}) == "sh -c sleep' '1"
    assert formats.job_description({"Cmd": "/home/u/run.sh", "Args": "a b"}) == "run.sh a b"
    assert formats.job_description({"Cmd": "/bin/true", "Arguments": ""}) == "true"
    assert formats.job_description({"Cmd": "/bin/true", "JobDescription": "nightly"}) == "(nightly)"
    assert formats.job_description({"Cmd": "", "WantDocker": True, "Args": "/etc/hosts"}) == "/etc/hosts"
    assert formats.job_description({"Cmd": "x", "JobDescription": "$$(Name)",
                                    "MATCH_EXP_JobDescription": "slot1@a"}) == "(slot1@a)"


def test_af_long_json():
    ads = [{"Name": "slot1@a", "Cpus": 4, "Busy": False, "Owner": "x y"}]
    assert formats.autoformat(ads, ["Name", "Cpus", "Busy", "Missing", "Owner"]) == "slot1@a 4 false undefined x y\n"
    assert formats.long_form(ads) == 'Busy = false\nCpus = 4\nName = "slot1@a"\nOwner = "x y"\n\n'
    assert json.loads(formats.json_form(ads)) == ads


def test_status_table_and_totals():
    slots = [{"Name": f"slot{i}@a", "OpSys": "LINUX", "Arch": "X86_64", "State": s, "Activity": "Idle",
              "LoadAvg": 0.0, "Memory": 1024, "EnteredCurrentActivity": int(T)} for i, s in
             enumerate(["Unclaimed", "Claimed", "Unclaimed"], start=1)]
    text = formats.status_table(slots, now=T + 4)
    assert text.splitlines()[2] == "slot1@a            LINUX      X86_64 Unclaimed Idle      0.000 1024     0+00:00:04"
    assert "  X86_64/LINUX     3     0       1         2       0          0      0        0      0" in text
    assert "         Total     3     0       1         2       0          0      0        0      0" in text


def test_selection_from_ids_owners_and_constraint():
    assert jobs.selection(["5", "6.1", "alice"], "RequestCpus > 1") == (
        '(ClusterId == 5 || (ClusterId == 6 && ProcId == 1) || Owner == "alice") && (RequestCpus > 1)')
    assert jobs.selection([], None) is None and jobs.selection([], None, everyone=True) == "true"
    with pytest.raises(ValueError, match="neither a job id"):
        jobs.selection(["a b"], None)


def test_pool_url_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("GRIDBUS_URL", "amqp://env/")
    assert pool_url("amqp://flag/") == "amqp://flag/"
    assert pool_url(None) == "amqp://env/"
    monkeypatch.delenv("GRIDBUS_URL")
    config = tmp_path / "gridbus.toml"
    config.write_text('GRIDBUS_URL = "amqp://file/"\n')
    monkeypatch.setenv("GRIDBUS_CONFIG", str(config))
    assert pool_url(None) == "amqp://file/"


def test_every_subcommand_is_there():
    parser = build_parser()
    for argv in (["submit", "x.sub"], ["q", "-nobatch", "-totals", "-limit", "3", "-constraint", "true", "-af", "A", "B"],
                 ["q", "-l", "-autocluster", "-run", "-hold", "-json"], ["status", "-constraint", "true", "-af", "Name"],
                 ["status", "-l", "-total", "-json"], ["rm", "1"], ["hold", "1.0"], ["release", "alice"],
                 ["edit", "1", "Foo", "2"], ["history", "-limit", "2"], ["wait", "x.log", "1"], ["userprio"],
                 ["drain", "node1"], ["analyze", "1.0"], ["status", "-claimed"], ["status", "-run"],
                 ["qedit", "1", "Foo", "2"], ["config_val", "SCHEDD_NAME"]):
        assert parser.parse_args(argv).handler
    # condor_qedit and condor_config_val by their HTCondor names too.
    assert parser.parse_args(["qedit", "1", "Foo", "2"]).handler is parser.parse_args(["edit", "1", "Foo", "2"]).handler
    assert parser.parse_args(["config_val"]).handler is parser.parse_args(["config"]).handler


def test_submit_dry_run_and_errors_offline(tmp_path: Path):
    gridbus = Path(sys.executable).with_name("gridbus")
    (tmp_path / "ok.sub").write_text("executable = /bin/echo\narguments = $(Process)\noutput = $(SUBMIT_FILE).out\nqueue 2\n")
    # condor_submit -dry-run FILE: the ads to FILE ('-': standard output) after the count.
    done = subprocess.run([str(gridbus), "submit", "-dry-run", "-", "ok.sub"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.count('Cmd = "/bin/echo"') == 2 and 'Args = "1"' in done.stdout
    assert done.stdout.startswith("Dry-Run job(s)..\n2 job(s) dry-run to cluster 1.\n")
    done = subprocess.run([str(gridbus), "submit", "-dry-run", "ads.txt", "ok.sub"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.stdout == "Dry-Run job(s)..\n2 job(s) dry-run to cluster 1.\n"
    assert (tmp_path / "ads.txt").read_text().count('Cmd = "/bin/echo"') == 2
    assert (tmp_path / "ads.txt").read_text().count('Out = "ok.sub.out"') == 2  # $(SUBMIT_FILE), as given
    (tmp_path / "warn.sub").write_text("executable = /bin/echo\nnotify_user = me@example.org\nqueue\n")
    done = subprocess.run([str(gridbus), "submit", "-dry-run", "-", "warn.sub"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stderr == "WARNING: warn.sub: line 2: gridbus accepts 'notify_user' but does not act on it (recorded in the job ad where HTCondor records it)\n"
    done = subprocess.run([str(gridbus), "submit", "missing.sub"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr == "gridbus submit: cannot read the submit file missing.sub: No such file or directory\n"


def test_autoformat_options_as_htcondor_reads_them() -> None:
    from gridbus.classad import ClassAd, ExprTree
    from gridbus.console.cli import _autoformat_options
    from gridbus.console.cli.formats import autoformat

    a = ClassAd({"ClusterId": 3, "ProcId": 1, "Owner": "alice", "RequestMemory": 128})
    a["RequestDisk"] = ExprTree("DiskUsage * 2")
    b = ClassAd({"ClusterId": 3, "ProcId": 2, "Owner": "bob", "RequestMemory": 256})
    assert _autoformat_options(["q", "-af:jh", "Owner"]) == (["q", "-af", "Owner"], "jh")
    assert autoformat([a, b], ["Owner", "RequestMemory"], "jh") == "ID Owner RequestMemory\n3.1 alice 128\n3.2 bob 256\n"
    assert autoformat([a], ["Owner", "RequestMemory"], ",V") == '"alice",128\n'
    assert autoformat([a], ["Owner"], "l") == "Owner = alice\n"
    assert autoformat([a], ["RequestDisk"], "r") == "DiskUsage * 2\n"
    assert autoformat([a, b], ["Owner"], "tg") == "alice\n\nbob\n"
    with pytest.raises(ValueError, match="unknown autoformat option 'z'"):
        autoformat([a], ["Owner"], "z")


def test_format_prints_each_attribute_through_its_printf_format_as_condor_q_does():
    ads = [{"ClusterId": 12, "ProcId": 3, "Owner": "alice", "Cmd": "/bin/sleep", "RemoteUserCpu": 2.5,
            "Args": [1, "a"]},
           {"ClusterId": 12, "ProcId": 4, "Owner": "bob", "Cmd": "/bin/true", "ExitCode": 255}]
    argv = ["q", "-format", "%d.", "ClusterId", "-format", "%-3d|", "ProcId", "-format", "%s", "Owner",
            "-format", " %V", "Cmd", "-format", " %.1f", "RemoteUserCpu", "-format", " %x", "ExitCode",
            "-format", " %v", "Args", "-format", " 100%%", "ProcId", "-format", "\\n", "ProcId"]
    args = build_parser().parse_args(argv)
    # Missing attributes are skipped, conversion and all; the shell leaves "\n" as typed.
    assert formats.chosen_form(args, ads) == ('12.3  |alice "/bin/sleep" 2.5 { 1,"a" } 100%\n'
                                              '12.4  |bob "/bin/true" ff 100%\n')
    assert {"ClusterId", "ProcId", "Owner", "Cmd", "ExitCode"} <= set(formats.af_projection(args))
    # A value that is no number in a numeric conversion prints nothing for that pair.
    assert formats.format_form([{"Owner": "x"}], [["%d", "Owner"], ["<%s>", "Owner"]]) == "<x>"


def test_af_and_format_take_expressions_evaluated_in_each_ad_and_ask_for_whole_ads():
    ads = [{"ClusterId": 3, "ProcId": 1, "Owner": "alice", "ImageSize": 2048,
            "RequestMemory": ExprTree("ifThenElse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize + 1023) / 1024)")}]
    args = build_parser().parse_args(["q", "-af", "ProcId", "RequestMemory * 2", 'strcat(Owner, "-x")', "Nope + 1"])
    # An attribute of an expression may be an expression over others: the ads come whole.
    assert formats.af_projection(args) == []
    assert formats.chosen_form(args, ads) == "1 4 alice-x undefined\n"
    args = build_parser().parse_args(["q", "-format", "%d\n", "ProcId * 10"])
    assert formats.chosen_form(args, ads) == "10\n"
    assert formats.af_projection(build_parser().parse_args(["q", "-af", "ProcId", "Owner"])) == ["ProcId", "Owner"]
    with pytest.raises(ValueError, match="'ProcId \\+' is neither an attribute name nor a ClassAd expression"):
        formats.af_projection(build_parser().parse_args(["q", "-af", "ProcId +"]))


def test_config_val_prints_values_as_condor_config_val(capsys, monkeypatch, tmp_path: Path):
    """`gridbus config_val NAME...`: each value alone on its line, "Not defined: NAME" on standard
    error (and exit 1) for a name no knob has."""
    from gridbus.console.cli import main

    monkeypatch.setenv("GRIDBUS_NEGOTIATOR_INTERVAL", "45")
    monkeypatch.setenv("GRIDBUS_URL", "amqp://guest:guest@127.0.0.1:5672/")  # (main() sets it: restored after)
    (tmp_path / "gridbus.toml").write_text("")
    monkeypatch.setenv("GRIDBUS_CONFIG", str(tmp_path / "gridbus.toml"))
    assert main(["config_val", "NEGOTIATOR_INTERVAL"]) == 0
    assert capsys.readouterr().out == "45\n"
    assert main(["config_val", "negotiator_interval", "NO_SUCH_KNOB"]) == 1
    out = capsys.readouterr()
    assert (out.out, out.err) == ("45\n", "Not defined: NO_SUCH_KNOB\n")


def test_attributes_and_wide_as_condor_q_takes_them():
    """-attributes A,B: the projection of -l and -json (only those attributes come back); -wide
    and -w are taken (gridbus truncates no column)."""
    from gridbus.console.cli import formats as f

    parser = build_parser()
    for command in ("q", "history", "status"):
        args = parser.parse_args([command, "-l", "-attributes", "Owner,ClusterId", "-wide"])
        assert f.af_projection(args) == ["Owner", "ClusterId"] and args.wide
        args = parser.parse_args([command, "-json", "-attributes", "Name", "-w"])
        assert f.af_projection(args) == ["Name"]
    assert f.af_projection(parser.parse_args(["q", "-attributes", "Owner"])) == []  # (the table: every attribute)
    with pytest.raises(SystemExit):
        parser.parse_args(["q", "-l", "-attributes", "Owner,1bad"])


def test_history_rows_as_condor_history(monkeypatch, capsys):
    # A completed job shows its CompletionDate; one removed before it completed has none: blank.
    done = job(3, 0, 4, CompletionDate=int(T) + 60, RemoteWallClockTime=7, Cmd="/bin/sh", Args=None,
               Arguments="-c true")
    removed = job(3, 1, 3, RemoteWallClockTime=0)

    class Schedd:
        def history(self, constraint, projection, limit):
            return [done, removed]

    monkeypatch.setattr(jobs, "_schedd", lambda args: Schedd())
    assert jobs.cmd_history(build_parser().parse_args(["history"])) == 0
    assert capsys.readouterr().out.splitlines() == [
        jobs.HISTORY_HEADER,
        "   3.0   nemo            7/10 03:22   0+00:00:07 C    7/10 03:23 sh -c true",
        "   3.1   nemo            7/10 03:22   0+00:00:00 X               sleep 60",
    ]
