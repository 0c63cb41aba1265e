"""A pool used as people use one: submit files one after another, through the `gridbus` command.

- The issue's first fault, as a user met it: a submit file with no request lines, after one with
  them, stayed idle for ever ("no match found") while `analyze` said both slots match; a job whose
  `+Department` a slot's START reads never ran.
- The long-lived pool: 60 submit files drawn at random (seeded; a fixed seed when CI=true) with
  and without request lines, literal and expression requests, `$(Cluster)` in paths, `initialdir`,
  `+Department` read by the slots' START, holds, releases, edits, removes and failing jobs. Every
  job reaches a final state within a bound, and for every idle job along the way `analyze` (the
  full job ad) and the negotiator (the schedd's resource request of its autocluster) agree.

The commands run in this process (`gridbus.console.cli.main`), in the submit file's directory, as
the `gridbus` command would; starting 150 interpreters would cost more than the pool's work.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

from gridbus.adrefs import slot_job_refs
from gridbus.agents.negotiator.analyze import analyze
from gridbus.agents.negotiator.matchmaker import Matchmaker
from gridbus.console.cli import main as gridbus
from tests.e2e.conftest import PARTITIONABLE_STARTD
from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.e2e

QUERY_AUTOCLUSTER = 1
REMOVED, COMPLETED = 3, 4
# The static slots refuse chemistry; the partitionable one takes only jobs of a department, and not
# biology; geology runs nowhere.
START_A = 'TARGET.Department =!= "chemistry" && TARGET.Department =!= "geology"'
START_B = 'TARGET.Department isnt undefined && TARGET.Department =!= "biology" && TARGET.Department =!= "geology"'


class Cli:
    """`gridbus ...` against the pool, run in-process in a directory; returns stdout."""

    def __init__(self, pool: Pool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
        self.pool, self.monkeypatch, self.capsys = pool, monkeypatch, capsys
        monkeypatch.setenv("GRIDBUS_URL", pool.url)  # main() sets it; monkeypatch restores it

    def __call__(self, *argv: str, cwd: Path | None = None, ok: bool = True) -> str:
        with self.monkeypatch.context() as m:
            if cwd is not None:
                m.chdir(cwd)
            code = gridbus(["--pool", self.pool.url, *argv])
        out = self.capsys.readouterr()
        assert code == 0 or not ok, f"gridbus {' '.join(argv)} failed ({code}): {out.err}"
        return out.out

    def act(self, verb: str, cluster: int) -> None:
        """hold, release, rm or edit a cluster whose jobs may have finished already (then the
        command finds nothing to act on, as condor_rm would)."""
        code = gridbus(["--pool", self.pool.url, verb, str(cluster)])
        err = self.capsys.readouterr().err
        assert code == 0 or self.pool.history("schedd@s", f"ClusterId == {cluster}", ["ProcId"]), \
            f"gridbus {verb} {cluster} failed ({code}) with jobs of it in the queue: {err}"

    def submit(self, path: Path) -> int:
        out = self(*("submit", path.name), cwd=path.parent)
        m = re.search(r"submitted to cluster (\d+)\.", out)
        assert m, out
        return int(m.group(1))


def start_pool(make_pool: Any) -> Pool:
    pool = make_pool()
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "a", GRIDBUS_NUM_CPUS="4", GRIDBUS_NUM_SLOTS="4", GRIDBUS_MEMORY="4096", GRIDBUS_START=START_A)
    pool.start("startd", "b", **PARTITIONABLE_STARTD, GRIDBUS_START=START_B)
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
    pool.wait_slots(5)
    return pool


def finished(pool: Pool, cluster: int, n: int) -> list[dict] | None:
    hist = pool.history("schedd@s", f"ClusterId == {cluster}", ["ProcId", "JobStatus", "ExitCode", "Iwd", "Out"])
    return hist if len(hist) >= n else None


def test_submit_files_without_request_lines_and_with_attributes_a_start_reads_run(make_pool, monkeypatch, capsys, tmp_path):
    pool = start_pool(make_pool)
    cli = Cli(pool, monkeypatch, capsys)
    (tmp_path / "b.sub").write_text("executable = /bin/true\nrequest_memory = 64\nrequest_disk = 1024\nqueue 1\n")
    (tmp_path / "a.sub").write_text("executable = /bin/true\nqueue 2\n")
    (tmp_path / "physics.sub").write_text(
        'executable = /bin/true\n+Department = "physics"\nrequirements = TARGET.StartdName == "b"\nqueue 1\n')
    # The literal requests first, so a cache keyed by the Requirements text holds their list.
    literal = cli.submit(tmp_path / "b.sub")
    wait_for("the job with request lines to finish", lambda: finished(pool, literal, 1), timeout=60)
    default = cli.submit(tmp_path / "a.sub")
    hist = wait_for("the jobs without request lines to finish", lambda: finished(pool, default, 2), timeout=60)
    assert [j["JobStatus"] for j in hist] == [COMPLETED, COMPLETED]
    # Submitted alone: no claim of another job is reused for it, only a match brings it to b.
    physics = cli.submit(tmp_path / "physics.sub")
    hist = wait_for("the physics job to run on b, whose START reads Department", lambda: finished(pool, physics, 1),
                    timeout=60)
    assert hist[0]["JobStatus"] == COMPLETED


# ---------------------------------------------------------------------- the long-lived pool
def client_expands(cli: Cli, home: Path) -> bool:
    """Whether the submitting client expands the description in its own directory (`$(Cluster)`
    and `initialdir = dir_$(Process)`). Until it does, the draws that need
    it are still drawn (the sequence stays the seed's) but submitted without their path lines."""
    where = home / "probe"
    (where / "dir_0").mkdir(parents=True)
    (where / "probe.sub").write_text("executable = /bin/true\ninitialdir = dir_$(Process)\n"
                                     "output = out.$(Cluster)\nhold = true\nqueue 1\n")
    with cli.monkeypatch.context() as m:
        m.chdir(where)
        code = gridbus(["--pool", cli.pool.url, "submit", "probe.sub"])
    out = cli.capsys.readouterr().out
    if code != 0:
        return False
    cluster = int(re.search(r"cluster (\d+)", out).group(1))  # type: ignore[union-attr]
    (job,) = cli.pool.jobs("schedd@s", f"ClusterId == {cluster}", ["Iwd", "Out"])
    cli("rm", str(cluster))
    return job["Iwd"] == str(where / "dir_0") and job["Out"] == f"out.{cluster}"


def draw_submit_file(rng: random.Random, n: int, home: Path, expands: bool = True) -> tuple[Path, dict[str, Any]]:
    """One submit file of the random sequence, and what the test expects of it."""
    where = home / f"sub{n:02d}"
    where.mkdir()
    exe, args, code = rng.choice([("/bin/true", "", 0), ("/bin/sleep", "0.5", 0), ("/bin/false", "", 1),
                                  ("/bin/sh", "\"-c 'exit 3'\"", 3), ("/bin/true", "", 0)])
    count = rng.randint(1, 3)
    lines = [f"executable = {exe}"]
    if args:
        lines.append(f"arguments = {args}")
    requests = rng.choice(["none", "none", "literal", "expression"])
    if requests == "literal":
        lines += ["request_memory = 64", "request_disk = 2048", "request_cpus = 1"]
    elif requests == "expression":
        lines += ["request_memory = ifthenelse(JobPrio > 3, 96, 48)", "request_disk = DiskUsage * 2"]
    department = rng.choice([None, None, "physics", "chemistry", "biology", "geology"])
    if department:
        lines.append(f'+Department = "{department}"')
    paths = rng.choice(["none", "cluster", "initialdir"])
    if not expands:
        paths = "none"  # drawn, but not yet submittable as such (see client_expands)
    if paths == "cluster":
        lines += ["output = out.$(Cluster).$(Process)", "log = log.$(Cluster)"]
    elif paths == "initialdir":
        for p in range(count):
            (where / f"dir_{p}").mkdir()
        lines += ["initialdir = dir_$(Process)", "output = out.$(Process)"]
    action = rng.choice(["none", "none", "none", "hold_at_submit", "hold", "edit", "remove"])
    if action == "hold_at_submit":
        lines.append("hold = true")
    lines.append(f"queue {count}")
    path = where / "job.sub"
    path.write_text("\n".join(lines) + "\n")
    return path, {"count": count, "code": code, "department": department, "paths": paths, "action": action,
                  "dir": where}


def agreement(pool: Pool) -> int:
    """For every idle job: analyze of the full job ad, and the negotiator's matcher on the schedd's
    resource request for its autocluster, over one snapshot of the Machine ads. Returns the number
    of jobs compared."""
    machines = pool.ads("Machine")
    if not machines:
        return 0  # the collector did not answer this time: no snapshot to compare on
    names = slot_job_refs({k.lower(): v for k, v in m.items()} for m in machines)
    idle = {(j["ClusterId"], j["ProcId"]): j for j in pool.jobs("schedd@s", "JobStatus == 1")}
    requests: dict[int, dict] = {}
    for owner in {j["Owner"] for j in idle.values()}:
        args = {"Owner": owner, "Limit": 1000, "After": -1}
        args.update({"WholeAds": True} if names is None else {"AutoClusterAttrs": sorted(names)})
        for r in pool.call("schedd@s", "GetResourceRequests", args).outArgs["Requests"]:
            requests[r["AutoClusterId"]] = r["Ad"]
    rows = pool.call("schedd@s", "Query", {"Opts": QUERY_AUTOCLUSTER, "Constraint": "true"}).outArgs["Jobs"]
    # The negotiator matches only unclaimed slots, by their claim ids (private): stand-ins will do.
    private = [{**m, "ClaimId": f"claim-{i}"} for i, m in enumerate(machines)]
    compared = 0
    for row in rows:
        request = requests.get(row["AutoClusterId"])
        if request is None:
            continue  # the autocluster came or went between the two calls
        by_request = analyze(request, machines)
        negotiator = len(Matchmaker(private).candidates(request))
        for job_id in row["JobIds"]:
            full = idle.get(tuple(int(x) for x in job_id.split(".")))
            if full is None:
                continue  # it left Idle meanwhile
            by_full = analyze(full, machines)
            what = f"job {job_id}, autocluster {row['AutoClusterId']}: full {by_full}, request {by_request}"
            for key in ("Matching", "Available", "RejectedByJob", "RejectedBySlot"):
                assert by_full[key] == by_request[key], what
            assert negotiator == by_full["Available"], what
            compared += 1
    return compared


def test_a_long_lived_pool_runs_sixty_random_submit_files(make_pool, monkeypatch, capsys, tmp_path):
    seed = 12 if os.environ.get("CI") == "true" else int(os.environ.get("SEED") or random.randrange(1 << 30))
    with capsys.disabled():  # the commands' output is read through capsys; this is for the log
        print(f"\nlong-lived pool seed: {seed} (SEED={seed} runs it again)")
    rng = random.Random(seed)
    pool = start_pool(make_pool)
    cli = Cli(pool, monkeypatch, capsys)
    expands = client_expands(cli, tmp_path)
    if not expands:
        with capsys.disabled():
            print("the client does not expand submit files yet: $(Cluster) and initialdir draws go without paths")
    clusters: dict[int, dict[str, Any]] = {}
    pending: list[tuple[int, str, int]] = []  # (when: submission number, action, cluster)
    compared = 0
    for n in range(60):
        path, expect = draw_submit_file(rng, n, tmp_path, expands)
        cluster = cli.submit(path)
        clusters[cluster] = expect
        action = expect["action"]
        if action == "hold":
            cli.act("hold", cluster)
        if action in ("hold", "hold_at_submit"):
            pending.append((n + rng.randint(1, 5), "release", cluster))
        elif action == "edit":
            # A job idle for ever (geology) made runnable, or a runnable one given a new priority.
            value = '"physics"' if expect["department"] == "geology" else None
            if value:
                cli("edit", str(cluster), "Department", value)
                expect["department"] = "physics"
            else:
                cli(*("edit", str(cluster), "JobPrio", str(rng.randint(0, 9))), ok=False)  # may have run
        elif action == "remove":
            pending.append((n + rng.randint(0, 3), "rm", cluster))
        for item in [p for p in pending if p[0] <= n]:
            pending.remove(item)
            cli.act(item[1], item[2])
        if n % 10 == 9:
            compared += agreement(pool)
    for _when, verb, cluster in pending:
        cli.act(verb, cluster)

    # Everything that can run does; then only geology jobs are idle, and nothing matches them.
    never = [c for c, e in clusters.items() if e["department"] == "geology" and e["action"] != "remove"]
    runnable = {c: e for c, e in clusters.items() if c not in never}
    deadline = time.monotonic() + 120
    for cluster, expect in runnable.items():
        try:
            wait_for(f"cluster {cluster} ({expect}) to reach a final state (seed {seed})",
                     lambda c=cluster, e=expect: finished(pool, c, e["count"]), timeout=max(1.0, deadline - time.monotonic()))
        except AssertionError as exc:
            left = pool.jobs("schedd@s", f"ClusterId == {cluster}")
            why = [(j["ProcId"], j["JobStatus"], j.get("HoldReason"), analyze(j, pool.ads("Machine"))["Summary"])
                   for j in left]
            stats = pool.negotiator_stats().get("LastNegotiationCycleRejectionReasons0")
            raise AssertionError(f"{exc}; still queued: {why}; the negotiator's rejections: {stats}; "
                                 f"{agreement(pool)} idle jobs agree; {left}") from None
    idle = pool.jobs("schedd@s", "JobStatus == 1", ["ClusterId"])
    assert sorted({j["ClusterId"] for j in idle}) == sorted(never), f"seed {seed}"
    if never:
        # Idle, and both sides say why: analyze finds no slot, the negotiator no match.
        compared += agreement(pool)
        for job in pool.jobs("schedd@s", "JobStatus == 1"):
            assert analyze(job, pool.ads("Machine"))["Matching"] == 0
        wait_for("the negotiator to reject the geology jobs",
                 lambda: "no match found" in str(pool.negotiator_stats().get("LastNegotiationCycleRejectionReasons0")),
                 timeout=30)
        for cluster in never:
            cli("rm", str(cluster))
            wait_for(f"cluster {cluster} removed", lambda c=cluster: finished(pool, c, clusters[c]["count"]), timeout=30)
    assert compared > 0, f"no idle job was ever compared (seed {seed})"

    for cluster, expect in clusters.items():
        hist = finished(pool, cluster, expect["count"])
        assert hist is not None
        removed = expect["action"] == "remove" or cluster in never
        for job in hist:
            if job["JobStatus"] == REMOVED:
                assert removed, f"cluster {cluster} {expect}: job {job} removed (seed {seed})"
                continue
            assert job["JobStatus"] == COMPLETED and job["ExitCode"] == expect["code"], (seed, cluster, expect, job)
            # Paths are the submitter's: $(Cluster) expanded by the client, initialdir per proc.
            if expect["paths"] == "cluster":
                assert job["Iwd"] == str(expect["dir"]) and job["Out"] == f"out.{cluster}.{job['ProcId']}", job
                assert (expect["dir"] / f"out.{cluster}.{job['ProcId']}").exists(), (seed, cluster, job)
            elif expect["paths"] == "initialdir":
                assert job["Iwd"] == str(expect["dir"] / f"dir_{job['ProcId']}"), (seed, cluster, job)
                assert (expect["dir"] / f"dir_{job['ProcId']}" / f"out.{job['ProcId']}").exists(), (seed, cluster, job)
