"""File transfer over the bus, end to end: the job runs in a scratch directory under the
startd's EXECUTE, far from the submit directory, so it sees only what was transferred; its output
comes back beside its inputs (or where the remaps say), and failures hold or requeue the job as
HTCondor does, never completing it with part of its output."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.pool import Pool, standard_pool, wait_for

STALL = "3"  # seconds of silence that end a transfer (TRANSFER_STALL_TIMEOUT)
SLOTS = {"GRIDBUS_NUM_SLOTS": "2", "GRIDBUS_NUM_CPUS": "2", "GRIDBUS_MEMORY": "2048",
         "GRIDBUS_TRANSFER_STALL_TIMEOUT": STALL, "GRIDBUS_KEEP_SANDBOX_ON_HOLD": "true"}
BIG_MIB = 256
INLINE_KB = 64  # MAX_INLINE_TRANSFER_KB here: sandboxes up to 64 KiB ride in the activation and the exit report
RSS_BOUND_MIB = 200  # the shadow's and the startd's peak resident memory while moving BIG_MIB


@pytest.fixture(scope="module")
def tpool(broker_url, mgmt, tmp_path_factory):
    # The schedd looks for shadows to stop every second: a shadow stopped under a transfer would
    # show as a requeued job.
    with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("transferpool"), "transfer", slots=SLOTS,
                       schedd_env={"GRIDBUS_TRANSFER_STALL_TIMEOUT": STALL,
                                   "GRIDBUS_MAX_INLINE_TRANSFER_KB": str(INLINE_KB),
                                   "GRIDBUS_OWNER_SHADOW_CHECK_INTERVAL": "1",
                                   "GRIDBUS_SPOOL_SWEEP_INTERVAL": "1"}) as pool:
        yield pool


@pytest.fixture
def subdir(tmp_path) -> Path:
    d = tmp_path / "submit"
    d.mkdir()
    return d


def _execute(pool: Pool) -> Path:
    return pool.workdir / "startd-a" / "execute"


def _script(path: Path, text: str) -> str:
    path.write_text("#!/bin/sh\n" + text)
    os.chmod(path, 0o755)
    return str(path)


def _submit(pool: Pool, subdir: Path, cmd: str, **attrs) -> int:
    base = {"Iwd": str(subdir), "ShouldTransferFiles": "YES", "WhenToTransferOutput": "ON_EXIT",
            "Out": "job.out", "Err": "job.err", "UserLog": str(subdir / "job.log")}
    return pool.submit("schedd@s", 1, cmd=cmd, **{**base, **attrs})


def _finished(pool: Pool, cluster: int, timeout: float = 60) -> dict:
    """The job once it has completed (from the history) or is held (from the queue)."""
    def done():
        held = [j for j in pool.jobs("schedd@s", f"ClusterId == {cluster}") if j.get("JobStatus") == 5]
        return held[0] if held else next(iter(pool.history("schedd@s", f"ClusterId == {cluster}")), None)
    return wait_for(f"job {cluster}.0 to complete or be held", done, timeout)


def test_inputs_outputs_remaps_and_streams_travel_and_the_sandbox_goes(tpool, subdir):
    (subdir / "in.txt").write_text("input file\n")
    (subdir / "data" / "x").mkdir(parents=True)
    (subdir / "data" / "x" / "y.txt").write_text("nested\n")
    (subdir / "more").mkdir()
    (subdir / "more" / "m.txt").write_text("contents only\n")
    cmd = _script(subdir / "job.sh", f"""set -e
test "$(pwd)" != "{subdir}"
test ! -e job.sh.not-here
pwd > where.txt
cat in.txt data/x/y.txt m.txt > combined.txt
test ! -d more
echo to-stdout
echo to-stderr >&2
echo remapped > rename_me.txt
mkdir results && echo r > results/r.txt
""")
    cluster = _submit(tpool, subdir, cmd, TransferInput="in.txt, data, more/",
                      TransferOutputRemaps="rename_me.txt = renamed.txt")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 4 and job.get("ExitCode") == 0, job
    assert (subdir / "combined.txt").read_text() == "input file\nnested\ncontents only\n"
    assert (subdir / "job.out").read_text() == "to-stdout\n" and (subdir / "job.err").read_text() == "to-stderr\n"
    assert (subdir / "renamed.txt").read_text() == "remapped\n" and not (subdir / "rename_me.txt").exists()
    where = (subdir / "where.txt").read_text().strip()
    assert where.startswith(str(_execute(tpool)) + "/")  # it ran in its sandbox under EXECUTE
    assert not (subdir / "results").exists()  # a directory comes back only when listed
    assert job["BytesSent"] > 0 and job["BytesRecvd"] > 0
    assert job["TransferInStarted"] <= job["TransferInFinished"] <= job["TransferOutStarted"] <= job["TransferOutFinished"]
    wait_for("the sandbox removed", lambda: not os.path.exists(where), 10)

    cluster = _submit(tpool, subdir, cmd, TransferInput="in.txt,data,more/", TransferOutput="results, combined.txt",
                      Out="second.out", Err="second.out")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 4, job
    assert (subdir / "results" / "r.txt").read_text() == "r\n"
    assert (subdir / "second.out").read_text() == "to-stdout\nto-stderr\n"


def _stats(pool: Pool) -> dict:
    """The schedd's counters of inline sandboxes and streamed transfers."""
    records = pool.console().query("schedd@s", "scheduler", None, timeout=10)
    return next(r["statistics"] for r in records if "InlineInputs" in r.get("statistics", {}))


def _counted(pool: Pool, before: dict, *names: str) -> tuple[int, ...]:
    after = _stats(pool)
    return tuple(after[n] - before[n] for n in names)


COUNTERS = ("InlineInputs", "InlineOutputs", "TransfersOpened")


def test_a_small_sandbox_rides_inline_and_a_bigger_one_is_streamed_the_threshold_between(tpool, subdir):
    # The sandbox is every file sent: the inputs and the executable. At MAX_INLINE_TRANSFER_KB
    # exactly it goes inline; one byte more and it is streamed (an output under it still comes
    # back inline, in the exit report).
    cmd = _script(subdir / "job.sh", "cat in.bin | wc -c > count.txt\n")
    room = (INLINE_KB << 10) - os.path.getsize(cmd)
    for size, inline_in in ((room, 1), (room + 1, 0)):
        (subdir / "in.bin").write_bytes(b"i" * size)
        before = _stats(tpool)
        cluster = _submit(tpool, subdir, cmd, TransferInput="in.bin", TransferOutput="count.txt")
        job = _finished(tpool, cluster)
        assert job["JobStatus"] == 4 and job.get("ExitCode") == 0, job
        assert (subdir / "count.txt").read_text().strip() == str(size)
        # (HTCondor's job ad counts from the job's side: BytesRecvd is the input it received.)
        assert job["BytesRecvd"] == size + os.path.getsize(cmd) and job["BytesSent"] > 0
        assert _counted(tpool, before, *COUNTERS) == (inline_in, 1, 1 - inline_in), size


def test_an_output_over_the_threshold_is_streamed_back(tpool, subdir):
    cmd = _script(subdir / "job.sh", f"head -c {(INLINE_KB << 10) + 1} /dev/zero > big.out\n")
    before = _stats(tpool)
    job = _finished(tpool, _submit(tpool, subdir, cmd, TransferOutput="big.out"))
    assert job["JobStatus"] == 4, job
    assert os.path.getsize(subdir / "big.out") == (INLINE_KB << 10) + 1
    assert _counted(tpool, before, *COUNTERS) == (1, 0, 1)


def test_a_sandbox_of_zero_bytes_and_names_with_spaces_and_non_ascii(tpool, subdir):
    (subdir / "empty file").write_bytes(b"")
    (subdir / "données été.txt").write_text("ça va\n")
    cmd = _script(subdir / "job.sh", 'test -f "empty file" && test ! -s "empty file"\n'
                  'cat "données été.txt" > "résultat final.txt"\n: > "nothing here"\n')
    before = _stats(tpool)
    cluster = _submit(tpool, subdir, cmd, TransferInput="empty file, données été.txt", Out="/dev/null",
                      Err="/dev/null", TransferOutput="résultat final.txt, nothing here",
                      TransferOutputRemaps="résultat final.txt = sortie à part.txt")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 4 and job.get("ExitCode") == 0, job
    assert (subdir / "sortie à part.txt").read_text() == "ça va\n"
    assert (subdir / "nothing here").read_bytes() == b""
    assert _counted(tpool, before, *COUNTERS) == (1, 1, 0)
    # Nothing at all to send: no input file, the executable not transferred, no output.
    cluster = _submit(tpool, subdir, "/bin/true", TransferExecutable=False, Out="/dev/null", Err="/dev/null")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 4 and job["BytesSent"] == 0 and job["BytesRecvd"] == 0, job


def test_an_output_that_is_a_symbolic_link_out_of_the_sandbox_is_refused_and_the_job_held(tpool, subdir):
    cmd = _script(subdir / "job.sh", "ln -s /etc/passwd secret\n")
    job = _finished(tpool, _submit(tpool, subdir, cmd, TransferOutput="secret"))
    assert job["JobStatus"] == 5 and job["HoldReasonCode"] == 12, job
    assert "secret" in job["HoldReason"] and "symbolic link" in job["HoldReason"]
    assert not (subdir / "secret").exists()
    for kept in _execute(tpool).glob("dir_*"):  # KEEP_SANDBOX_ON_HOLD
        shutil.rmtree(kept)


def test_a_missing_input_holds_the_job_with_code_13_naming_the_file(tpool, subdir):
    cmd = _script(subdir / "job.sh", "true\n")
    cluster = _submit(tpool, subdir, cmd, TransferInput="there.txt, nothere.dat")
    (subdir / "there.txt").write_text("x")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 5 and job["HoldReasonCode"] == 13, job
    assert str(subdir / "nothere.dat") in job["HoldReason"] and "No such file" in job["HoldReason"]
    assert job["HoldReason"].startswith("Transfer input files failure")
    log = wait_for("the held event in the user log", lambda: "Job was held" in (t := (subdir / "job.log").read_text()) and t, 10)
    assert "nothere.dat" in log
    assert not list(_execute(tpool).iterdir())


def test_an_output_that_was_never_made_holds_the_job_with_code_12(tpool, subdir):
    cmd = _script(subdir / "job.sh", "echo made > made.txt\n")
    cluster = _submit(tpool, subdir, cmd, TransferOutput="made.txt, never_made.txt")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 5 and job["HoldReasonCode"] == 12, job
    assert "never_made.txt" in job["HoldReason"] and job["HoldReason"].startswith("Transfer output files failure")
    # KEEP_SANDBOX_ON_HOLD: the held job's sandbox stays under EXECUTE, to be looked at.
    kept = [p for p in _execute(tpool).glob("dir_*/made.txt") if p.read_text() == "made\n"]
    assert len(kept) == 1
    shutil.rmtree(kept[0].parent)


def _shadow_pids(pool: Pool) -> list[int]:
    """The schedd's owner-shadow processes (its children running ``python -I -c``)."""
    schedd = pool.procs["schedd@s"].pid
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == schedd and b"-I" in cmdline:
            out.append(int(entry))
    return out


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def _peak_rss(pool: Pool) -> Iterator[dict[str, float]]:
    """The peak resident memory (VmHWM) of the owners' shadows and the startd while the block
    runs, sampled every 0.1 s (a shadow is stopped soon after its owner's last job)."""
    peaks = {"shadow": 0.0, "startd": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            for pid in _shadow_pids(pool):
                with contextlib.suppress(OSError):
                    peaks["shadow"] = max(peaks["shadow"], _peak_rss_mib(pid))
            peaks["startd"] = max(peaks["startd"], _peak_rss_mib(pool.procs["startd@a"].pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join()


def test_a_big_input_and_output_keep_the_shadow_and_the_startd_small(tpool, subdir):
    big = subdir / "big.bin"
    with open(big, "wb") as fh:
        block = os.urandom(1 << 20)
        for i in range(BIG_MIB):
            fh.write(block[:-8] + i.to_bytes(8, "big"))
    cmd = _script(subdir / "job.sh", "cp big.bin copy.bin\n")
    started = time.monotonic()
    with _peak_rss(tpool) as rss:
        cluster = _submit(tpool, subdir, cmd, TransferInput="big.bin", TransferOutput="copy.bin")
        job = _finished(tpool, cluster, timeout=240)
    took = time.monotonic() - started
    assert job["JobStatus"] == 4, job
    assert job["NumJobStarts"] == 1  # the shadow was not stopped under the input transfer
    assert os.path.getsize(subdir / "copy.bin") == BIG_MIB << 20
    assert (subdir / "copy.bin").read_bytes() == big.read_bytes()
    print(f"{BIG_MIB} MiB in and out in {took:.1f} s; peak RSS (MiB): {rss}")
    assert rss["shadow"] > 0 and rss["startd"] > 0
    assert all(v < RSS_BOUND_MIB for v in rss.values()), rss


def test_the_owner_s_shadow_stops_once_the_owner_has_no_running_job(tpool, subdir):
    (subdir / "in.txt").write_text("x")
    cmd = _script(subdir / "job.sh", "sleep 2; cat in.txt\n")
    cluster = _submit(tpool, subdir, cmd, TransferInput="in.txt")
    wait_for("the owner's shadow", lambda: _shadow_pids(tpool), 30)
    assert _finished(tpool, cluster)["JobStatus"] == 4
    wait_for("the shadow stopped (OWNER_SHADOW_CHECK_INTERVAL is 1 s here)", lambda: not _shadow_pids(tpool), 15)


def test_a_shadow_killed_mid_transfer_requeues_the_job_which_then_completes_whole(tpool, subdir):
    big = subdir / "big.bin"
    big.write_bytes(os.urandom(64 << 20))
    cmd = _script(subdir / "job.sh", "cp big.bin copy.bin\n")
    cluster = _submit(tpool, subdir, cmd, TransferInput="big.bin", TransferOutput="copy.bin")
    # Kill the owner's shadow once the transfer is under way: the starter hears nothing for
    # TRANSFER_STALL_TIMEOUT, the job goes back to Idle, and its next run starts a new shadow.
    scratch = wait_for("the input arriving in the sandbox", lambda: [
        p for p in _execute(tpool).glob("dir_*/.big.bin.*.gridbus-partial") if p.stat().st_size > 0], 30, interval=0.02)[0]
    for pid in _shadow_pids(tpool):
        os.kill(pid, signal.SIGKILL)
    job = _finished(tpool, cluster, timeout=120)
    assert job["JobStatus"] == 4, job
    assert job["NumJobStarts"] >= 2  # the cut run counted, and was not taken for a completion
    assert (subdir / "copy.bin").read_bytes() == big.read_bytes()
    assert "Job was evicted" in (subdir / "job.log").read_text()
    assert not scratch.parent.exists()


def test_jobs_of_one_cluster_bringing_back_the_same_name_at_once_all_complete(tpool, subdir):
    # Each transfer writes under a temporary name of its own: two outputs arriving at once for one
    # name must not take each other's temporary file (the last one to finish wins the name).
    cmd = _script(subdir / "job.sh", "echo $$ > same.txt\n")
    cluster = tpool.submit("schedd@s", 6, cmd=cmd, Iwd=str(subdir), ShouldTransferFiles="YES", TransferOutput="same.txt")
    done = wait_for("6 jobs done", lambda: (h := tpool.history("schedd@s", f"ClusterId == {cluster}")) and len(h) == 6 and h, 60)
    assert all(j["JobStatus"] == 4 for j in done), [j.get("HoldReason") for j in done]
    assert (subdir / "same.txt").read_text().strip().isdigit()
    assert [p.name for p in subdir.iterdir() if "partial" in p.name] == []


def test_a_spooled_job_runs_from_the_schedd_s_spool_and_waits_for_its_output_to_be_retrieved(tpool, subdir, monkeypatch):
    from gridbus.console.schedd import JobAction, Schedd
    from gridbus.submit import Submit

    (subdir / "in.txt").write_text("spooled input\n")
    _script(subdir / "job.sh", "cat in.txt > out.txt\necho done\n")
    monkeypatch.chdir(subdir)
    schedd = Schedd("schedd@s", url=tpool.url)
    result = schedd.submit(Submit({"executable": "job.sh", "transfer_input_files": "in.txt",
                                   "should_transfer_files": "YES", "output": "job.out", "error": "job.err"}), spool=True)
    cluster = result.cluster()
    (ad,) = schedd.query(f"ClusterId == {cluster}", ["JobStatus", "HoldReasonCode"])
    assert (ad["JobStatus"], ad["HoldReasonCode"]) == (5, 16)  # waiting for its input
    schedd.spool(result)
    # The submit side may go away now: the job has what it needs in the schedd's spool.
    for name in ("in.txt", "job.sh"):
        (subdir / name).unlink()
    done = wait_for("the spooled job completed and kept in the queue", lambda: [
        j for j in schedd.query(f"ClusterId == {cluster}", ["JobStatus", "Iwd", "SUBMIT_Iwd"]) if j["JobStatus"] == 4], 60)[0]
    assert done["SUBMIT_Iwd"] == str(subdir) and done["Iwd"] != str(subdir)
    assert not (subdir / "out.txt").exists() and not (subdir / "job.out").exists()
    schedd.retrieve(f"ClusterId == {cluster}")
    assert (subdir / "out.txt").read_text() == "spooled input\n"
    assert (subdir / "job.out").read_text() == "done\n"
    assert not schedd.query(f"ClusterId == {cluster}", ["JobStatus"])  # gone for the history
    assert not os.path.exists(done["Iwd"])

    # A spooled job removed before its output was fetched: its spool goes too.
    (subdir / "in.txt").write_text("again\n")
    _script(subdir / "job.sh", "sleep 120\n")
    result = schedd.submit(Submit({"executable": "job.sh", "transfer_input_files": "in.txt",
                                   "should_transfer_files": "YES"}), spool=True)
    schedd.spool(result)
    (ad,) = schedd.query(f"ClusterId == {result.cluster()}", ["Iwd"])
    assert os.path.exists(ad["Iwd"])
    schedd.act(JobAction.Remove, f"ClusterId == {result.cluster()}")
    wait_for("the removed job's spool swept (SPOOL_SWEEP_INTERVAL is 1 s here)", lambda: not os.path.exists(ad["Iwd"]), 15)


def test_gridbus_submit_spool_and_transfer_data(tpool, subdir):
    import subprocess
    import sys

    gridbus = Path(sys.executable).with_name("gridbus")

    def run(*argv: str) -> str:
        done = subprocess.run([str(gridbus), "--pool", tpool.url, *argv], capture_output=True, text=True,
                              timeout=60, cwd=subdir)
        assert done.returncode == 0, (argv, done.stderr)
        return done.stdout

    (subdir / "words").mkdir()
    (subdir / "words" / "w.txt").write_text("one two three\n")
    _script(subdir / "count.sh", "wc -w < words/w.txt > count.txt\n")
    (subdir / "count.sub").write_text("executable = count.sh\nshould_transfer_files = YES\n"
                                      "transfer_input_files = words\noutput = count.out\nqueue\n")
    out = run("submit", "-spool", "count.sub")
    assert "Spooling data files for 1 job(s)." in out
    cluster = int(out.split("cluster ")[1].split(".")[0])
    wait_for("the spooled job completed", lambda: [j for j in tpool.jobs("schedd@s", f"ClusterId == {cluster}")
                                                   if j.get("JobStatus") == 4], 60)
    assert not (subdir / "count.txt").exists()
    run("transfer_data", str(cluster))
    assert (subdir / "count.txt").read_text().strip() == "3"
    assert not tpool.jobs("schedd@s", f"ClusterId == {cluster}")


@pytest.mark.skipif(os.geteuid() != 0, reason="mapping owners to another account needs a root pool")
def test_as_another_account_the_sandbox_is_theirs_and_a_root_only_input_is_never_sent(broker_url, mgmt, tmp_path_factory):
    """Owners map to nobody: the owner's shadow reads the input and writes the output as nobody,
    the job's sandbox belongs to nobody, and an input only root may read holds the job (13)."""
    import pwd
    import tempfile

    nobody = pwd.getpwnam("nobody")
    as_nobody = {"GRIDBUS_USER_MAP": "*=nobody", "GRIDBUS_STARTER_ALLOW_ROOT_JOBS": "false",
                 "GRIDBUS_TRANSFER_STALL_TIMEOUT": STALL}
    d = Path(tempfile.mkdtemp(prefix="gridbus-transfer-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        sub = d / "submit"
        sub.mkdir()
        (sub / "in.txt").write_text("for nobody\n")
        (sub / "secret").write_text("root's secret\n")
        os.chmod(sub / "secret", 0o600)
        cmd = _script(sub / "job.sh", "id -un > who.txt; stat -c %U . > owner.txt; cat in.txt >> who.txt\n")
        for p in (sub, sub / "in.txt", sub / "job.sh"):
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
        with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("nobodypool"), "transfer-nobody",
                           slots={**SLOTS, **as_nobody, "GRIDBUS_EXECUTE": str(d / "execute")},  # nobody can reach it
                           schedd_env=as_nobody) as pool:
            ok = _submit(pool, sub, cmd, TransferInput="in.txt")
            bad = _submit(pool, sub, cmd, TransferInput="in.txt, secret")
            assert _finished(pool, ok)["JobStatus"] == 4
            held = _finished(pool, bad)
        assert (sub / "job.err").read_text() == ""
        assert (sub / "who.txt").read_text() == "nobody\nfor nobody\n"
        assert (sub / "owner.txt").read_text().strip() == "nobody"  # its sandbox was nobody's
        assert os.stat(sub / "who.txt").st_uid == nobody.pw_uid  # written by the shadow as nobody
        assert held["JobStatus"] == 5 and held["HoldReasonCode"] == 13, held
        assert str(sub / "secret") in held["HoldReason"] and "Permission denied" in held["HoldReason"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_shadow_killed_while_the_output_comes_back_reruns_the_job_never_completing_it_with_part_of_it(tpool, subdir):
    cmd = _script(subdir / "job.sh", "head -c 134217728 /dev/zero > out.bin\n")
    cluster = _submit(tpool, subdir, cmd, TransferOutput="out.bin")
    # Polled often: 128 MiB take most of a second even at the raw broker's rate.
    partial = wait_for("the output arriving", lambda: [p for p in subdir.glob(".out.bin.*.gridbus-partial")
                                                       if p.stat().st_size > 0], 60, interval=0.02)[0]
    for pid in _shadow_pids(tpool):
        os.kill(pid, signal.SIGKILL)
    assert not (subdir / "out.bin").exists()  # nothing that looks whole
    job = _finished(tpool, cluster, timeout=120)
    assert job["JobStatus"] == 4 and job["NumJobStarts"] >= 2, job
    assert os.path.getsize(subdir / "out.bin") == 128 << 20
    assert "Job was evicted" in (subdir / "job.log").read_text()
    # The shadow started in the killed one's place removed what it left (it wrote here).
    assert not partial.exists() and not list(subdir.glob("*.gridbus-partial"))


def test_on_exit_or_evict_brings_the_output_back_when_the_job_is_vacated(tpool, subdir):
    cmd = _script(subdir / "job.sh", "echo progress > partial.txt\nsleep 60\n")
    cluster = _submit(tpool, subdir, cmd, WhenToTransferOutput="ON_EXIT_OR_EVICT")
    wait_for("the job running, its file in its sandbox", lambda: list(_execute(tpool).glob("dir_*/partial.txt")) and [
        j for j in tpool.jobs("schedd@s", f"ClusterId == {cluster}") if j.get("JobStatus") == 2], 30)
    tpool.call("schedd@s", "Vacate", {"Constraint": f"ClusterId == {cluster}", "Reason": "evict test"})
    wait_for("the output of the evicted run", lambda: (subdir / "partial.txt").exists(), 30)
    assert (subdir / "partial.txt").read_text() == "progress\n"
    tpool.call("schedd@s", "Remove", {"Constraint": f"ClusterId == {cluster}", "Reason": "done"})


def test_the_shadow_s_broker_connection_closed_mid_transfer_requeues_the_job_and_the_shadow_reconnects(tpool, subdir, mgmt):
    vhost = tpool.url.rsplit("/", 1)[1]
    # A job that keeps its owner's shadow up (and connected) while the test cuts its connection
    # (its input streamed: over MAX_INLINE_TRANSFER_KB).
    (subdir / "in.txt").write_bytes(b"x" * ((INLINE_KB + 1) << 10))
    keeper = _submit(tpool, subdir, _script(subdir / "sleep.sh", "sleep 120\n"), TransferInput="in.txt",
                     Out="/dev/null", Err="/dev/null")
    # The keeper running and one shadow connection left: an earlier test's shadow of the same owner
    # may still be listed while the schedd stops it (it had no running job), and cutting that one
    # would find it already gone.
    def one_shadow_connection() -> list[str]:
        if not [j for j in tpool.jobs("schedd@s", f"ClusterId == {keeper}") if j.get("JobStatus") == 2]:
            return []
        names = [c["name"] for c in mgmt.connections(vhost)
                 if str((c.get("client_properties") or {}).get("connection_name", "")).startswith("gridbus shadow of ")]
        return names if len(names) == 1 and len(_shadow_pids(tpool)) == 1 else []
    shadow_conn = wait_for("the keeper running and its shadow's one connection listed by the broker",
                           one_shadow_connection, 30)[0]
    (subdir / "big.bin").write_bytes(os.urandom(128 << 20))
    cluster = _submit(tpool, subdir, _script(subdir / "job.sh", "cp big.bin copy.bin\n"), TransferInput="big.bin",
                      TransferOutput="copy.bin")
    wait_for("the input arriving in the sandbox", lambda: [
        p for p in _execute(tpool).glob("dir_*/.big.bin.*.gridbus-partial") if p.stat().st_size > 0], 30, interval=0.02)
    mgmt.close_connection(shadow_conn, "cut by the test")
    job = _finished(tpool, cluster, timeout=120)
    assert job["JobStatus"] == 4 and job["NumJobStarts"] >= 2, job
    assert (subdir / "copy.bin").read_bytes() == (subdir / "big.bin").read_bytes()
    # The next run (on the same startd, which kept the cut input's part) resumed from that part.
    assert f"job {cluster}.0: input resumed" in tpool.log_of("startd@a", "StartLog")
    tpool.call("schedd@s", "Remove", {"Constraint": f"ClusterId == {keeper}", "Reason": "done"})


def test_an_executable_named_by_the_slot_s_attributes_is_the_one_sent(tpool, subdir):
    # HTCondor's heterogeneous submission: executable = prog.$$(OpSys).$$(Arch), the one for the
    # matched slot's platform sent with the job.
    slot = tpool.ads("Machine")[0]
    _script(subdir / f"prog.{slot['OpSys']}.{slot['Arch']}", "echo built for $1 > built.txt\n")
    _script(subdir / "prog.OTHER.X", "exit 3\n")
    cluster = _submit(tpool, subdir, "prog.$$(OpSys).$$(Arch)", Arguments="$$(Arch)", TransferOutput="built.txt")
    job = _finished(tpool, cluster)
    assert job["JobStatus"] == 4 and job.get("ExitCode") == 0, job
    assert (subdir / "built.txt").read_text() == f"built for {slot['Arch']}\n"
    assert job["MATCH_EXP_Cmd"] == f"prog.{slot['OpSys']}.{slot['Arch']}" and job["Cmd"] == "prog.$$(OpSys).$$(Arch)"
