"""The multi-host pool itself: execute hosts with their own network path, files, name and domains.

The submit host (this machine: collector, negotiator, schedd, the test as console) and two execute
hosts, ``exec1`` and ``exec2``, each a startd in namespaces of its own (tests/multihost). These
tests show what other issues' tests rely on: no file is shared, a job that needs the submit host's
file system does not match, jobs run on both hosts, and a host cut off loses its job to the other.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from htcondor2 import JobEventType

from console.schedd import Schedd
from tests.e2e.multihost.helpers import LEASE, all_unclaimed, finished, on
from tests.e2e.pool import wait_for
from tests.integration.faults.helpers import count, events
from tests.multihost import SCHEDD, MultiHostPool
from tests.multihost.host import DOMAIN

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def test_each_host_has_its_own_name_domains_and_broker_path(hosts: MultiHostPool):
    machines = {a["Name"]: a for a in hosts.ads("Machine")}
    assert sorted(machines) == ["slot1@exec1", "slot1@exec2", "slot2@exec1", "slot2@exec2"]
    for name, host in hosts.hosts.items():
        ad = machines[f"slot1@{name}"]
        assert ad["Machine"] == host.fqdn == f"{name}.{DOMAIN}"
        assert ad["FileSystemDomain"] == host.filesystem_domain != hosts.submit_filesystem_domain
        assert ad["UidDomain"] == host.uid_domain
        # The startd is a process of the host's network namespace, and reached the broker through
        # the host's own forwarder (the broker itself listens on the machine's loopback only).
        pids = subprocess.run(["ip", "netns", "pids", host.link.netns], capture_output=True, text=True).stdout.split()
        assert str(hosts.procs[f"startd@{name}"].pid) in pids
        assert host.link.forwarder is not None and host.link.forwarder.connections >= 1
        assert host.run(["hostname"]).stdout.strip() == host.fqdn


def test_no_file_is_shared_between_the_submit_host_and_an_execute_host(settled: MultiHostPool, tmp_path: Path):
    exec1, exec2 = settled.host("exec1"), settled.host("exec2")
    tag = uuid.uuid4().hex[:8]
    # The submit host's files: one in the test's directory, one straight in its /tmp.
    mine = [tmp_path / "input.txt", Path(f"/tmp/gridbus-submit-{tag}")]
    for f in mine:
        f.write_text("the submit host's\n")
    probe = f"/tmp/probe-{tag}"
    try:
        checks = "; ".join(f"if [ -e {f} ]; then echo seen {f}; else echo hidden {f}; fi" for f in mine)
        cluster = settled.submit(SCHEDD, 1, cmd="/bin/sh", args=f"-c '{{ hostname; {checks}; }} > {probe}'",
                                 requirements=on(exec1.fqdn), Iwd="/")
        job = finished(settled, cluster)[0]
        assert job["ExitCode"] == 0, job
        # What the job saw, read from exec1's disk: its own name, none of the submit host's files.
        assert exec1.reach(probe).read_text().splitlines() == [exec1.fqdn, *(f"hidden {f}" for f in mine)]
        # What it wrote in its /tmp stayed on exec1: not on the submit host, not on exec2.
        assert not Path(probe).exists()
        assert not exec2.reach(probe).exists()
        assert exec2.run(["test", "-e", probe]).returncode == 1
    finally:
        mine[1].unlink()


@pytest.mark.filterwarnings("ignore:.*should_transfer_files:UserWarning")
def test_a_job_that_needs_the_submit_hosts_file_system_matches_no_other_domain(settled: MultiHostPool):
    exec2 = settled.host("exec2")
    schedd = Schedd(SCHEDD, url=settled.url)
    try:
        before = time.time()
        # condor_submit's Requirements for should_transfer_files = NO: the slot must share the
        # submit host's FILESYSTEM_DOMAIN, which no execute host of this pool does.
        result = schedd.submit("executable = /bin/true\nshould_transfer_files = NO\ninitialdir = /\nqueue\n")
        job_id = f"{result.cluster()}.0"
        ad = schedd.query(f"ClusterId == {result.cluster()}", ["Requirements", "FileSystemDomain"])[0]
        assert "TARGET.FileSystemDomain == MY.FileSystemDomain" in str(ad["Requirements"])
        assert ad["FileSystemDomain"] == settled.submit_filesystem_domain

        # A full negotiation cycle that began after the submit considered the job and found no match.
        cycle = wait_for("a negotiation cycle rejecting the job", lambda: (
            (n := settled.negotiator_stats()).get("LastNegotiationCycleTime0", 0) > before
            and n.get("LastNegotiationCycleNumIdleJobs0", 0) >= 1 and n), 30)
        assert cycle["LastNegotiationCycleMatches0"] == 0, cycle
        assert cycle["LastNegotiationCycleRejectionReasons0"].get("no match found", 0) >= 1, cycle
        job = settled.jobs(SCHEDD, f"ClusterId == {result.cluster()}")[0]
        assert job["JobStatus"] == 1 and job.get("NumJobStarts", 0) == 0, job

        # The clause alone kept it idle: told that exec2 shares its file system, it runs there.
        assert schedd.edit(job_id, "FileSystemDomain", f'"{exec2.filesystem_domain}"') == 1
        done = finished(settled, result.cluster())[0]
        assert done["ExitCode"] == 0 and done["LastRemoteHost"].endswith("@exec2"), done
    finally:
        schedd.close()


def test_jobs_run_on_both_execute_hosts(settled: MultiHostPool):
    tag = uuid.uuid4().hex[:8]
    # Each job notes its host, then waits for a go file in its host's /tmp: four at once fill
    # the four slots, two on each host, whatever order the negotiator matched them in.
    script = f"hostname >> /tmp/ran-{tag}; while [ ! -e /tmp/go-{tag} ]; do sleep 0.1; done"
    cluster = settled.submit(SCHEDD, 4, cmd="/bin/sh", args=f"-c '{script}'", Iwd="/")
    wait_for("four jobs running", lambda: len(settled.jobs(SCHEDD, f"ClusterId == {cluster} && JobStatus == 2")) == 4,
             30)
    for host in settled.hosts.values():
        wait_for(f"two jobs started on {host.name}",
                 lambda h=host: h.reach(f"/tmp/ran-{tag}").exists()
                 and len(h.reach(f"/tmp/ran-{tag}").read_text().splitlines()) == 2, 10)
        host.reach(f"/tmp/go-{tag}").write_text("")
    jobs = finished(settled, cluster, 4)
    assert all(j["ExitCode"] == 0 for j in jobs), jobs
    assert sorted(j["LastRemoteHost"].split("@")[1] for j in jobs) == ["exec1", "exec1", "exec2", "exec2"]
    for host in settled.hosts.values():
        assert host.reach(f"/tmp/ran-{tag}").read_text().splitlines() == [host.fqdn, host.fqdn]


def test_a_host_cut_off_while_its_job_runs_loses_the_job_to_another_host(settled: MultiHostPool, tmp_path: Path):
    exec1, exec2 = settled.host("exec1"), settled.host("exec2")
    tag = uuid.uuid4().hex[:8]
    log = tmp_path / "cut.log"  # the user log, on the submit host
    # First start on exec1 only, where the job would run for minutes; once started anywhere it
    # may run anywhere, and elsewhere it ends at once.
    script = f'hostname >> /tmp/runs-{tag}; case $(hostname) in exec1.*) exec sleep 300;; esac'
    cluster = settled.submit(SCHEDD, 1, cmd="/bin/sh", args=f"-c '{script}'", Iwd="/", log=log,
                             requirements=f"({on(exec1.fqdn)}) || (MY.NumJobStarts > 0)")
    wait_for("the job running on exec1", lambda: exec1.reach(f"/tmp/runs-{tag}").exists()
             and settled.jobs(SCHEDD, f"ClusterId == {cluster} && JobStatus == 2"), 30)

    exec1.link_down()
    try:
        # The schedd hears nothing from exec1 for a lease: it evicts the job, which then runs on
        # exec2 and completes there, while exec1 is still cut off.
        job = finished(settled, cluster, timeout=LEASE * 6)[0]
        assert exec1.link.cut_method is not None, "the job finished only after the link came back"
    finally:
        outage = exec1.link_up()
    assert outage > LEASE * 2 / 3  # the lease counts from the last renewal before the cut
    assert job["ExitCode"] == 0 and job["NumJobStarts"] == 2 and job["LastRemoteHost"].endswith("@exec2"), job
    assert exec1.reach(f"/tmp/runs-{tag}").read_text().splitlines() == [exec1.fqdn]
    assert exec2.reach(f"/tmp/runs-{tag}").read_text().splitlines() == [exec2.fqdn]

    # Back on the air, exec1 reports the run it killed at its lease's end: that is no completion.
    wait_for("exec1's slots unclaimed again", lambda: all_unclaimed(settled), LEASE * 4)
    assert len(settled.history(SCHEDD, f"ClusterId == {cluster}")) == 1
    assert settled.jobs(SCHEDD, f"ClusterId == {cluster}") == []
    assert count(log, JobEventType.JOB_TERMINATED, cluster) == 1, events(log)
    assert count(log, JobEventType.JOB_EVICTED, cluster) == 1, events(log)
    assert count(log, JobEventType.EXECUTE, cluster) == 2, events(log)
