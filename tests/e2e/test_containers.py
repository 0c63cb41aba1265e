"""Docker and container universe jobs end to end, with a real Docker-compatible tool (podman, with
runc): the image is built here from busybox-static, with no registry. The job runs in the image as
its account, its output and transferred files come back, every end of it removes its container (a
killed startd's successor removes what it left), a missing image holds the job with HTCondor's
sentence, and memory over the limit holds it with code 34.

Skipped, with the reason, where podman, runc or busybox-static is missing (scripts/ensure-containers.sh
installs them), or without root (the startd runs the tool as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from gridbus.agents.startd.cgroups import safe_name
from tests.e2e.pool import Pool, standard_pool, wait_for

PODMAN = shutil.which("podman")
BUSYBOX = "/bin/busybox"
LABEL_STARTD = "org.gridbus.startd"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="the startd runs the container tool as root"),
    pytest.mark.skipif(PODMAN is None or shutil.which("runc") is None,
                       reason="podman and runc are not installed (make containers installs them on Debian)"),
    pytest.mark.skipif(not os.path.isfile(BUSYBOX), reason="busybox-static is not installed (/bin/busybox)"),
]

SLOTS = {"GRIDBUS_NUM_SLOTS": "2", "GRIDBUS_NUM_CPUS": "2", "GRIDBUS_MEMORY": "2048", "GRIDBUS_DOCKER": "podman",
         "GRIDBUS_DOCKER_EXTRA_ARGUMENTS": "--runtime runc", "GRIDBUS_USER_MAP": "*=nobody",
         "GRIDBUS_STARTER_ALLOW_ROOT_JOBS": "false"}
# The test image's own command, in the exec form of a Containerfile's CMD.
IMAGE_CMD = '["/bin/sh", "-c", "echo the image command ran > made.txt; echo in $(pwd)"]'
# (The tool's monitor, podman's conmon, is in the job's cgroup with the container: a few MiB.)
MEMORY = 128


def _podman(*args: str, check: bool = True) -> str:
    assert PODMAN is not None
    done = subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    """A busybox image of this module's own, imported from a tarball (no registry)."""
    root = tmp_path_factory.mktemp("image")
    tar = root / "busybox.tar"
    with tarfile.open(tar, "w") as t:
        for d in ("bin", "tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(info)
        t.add(BUSYBOX, "bin/busybox")
        for applet in ("sh", "id", "cat", "ls", "echo", "sleep", "dd", "pwd"):
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            t.addfile(info)
    name = f"localhost/gridbus-test-busybox:{uuid.uuid4().hex[:8]}"
    # Its own command (CMD) writes where it runs, for a job that names no executable.
    _podman("import", "--change", "ENV PATH=/bin", "--change", f"CMD {IMAGE_CMD}", str(tar), name)
    yield name
    _podman("rmi", "--force", name, check=False)


@pytest.fixture(scope="module")
def cpool(broker_url, mgmt, tmp_path_factory, image):
    with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("containerpool"), "containers", slots=SLOTS) as pool:
        yield pool


@pytest.fixture
def subdir(tmp_path) -> Path:
    d = tmp_path / "submit"
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o777)  # the job's account (nobody) writes its output here
    return d


def _owned(pool: Pool) -> str:
    """The label value of the pool's startd's containers (its vhost, then its name)."""
    vhost = unquote(urlsplit(pool.url).path.lstrip("/"))
    return f"{safe_name(vhost)}/a"


def _containers(pool: Pool) -> list[str]:
    return _podman("ps", "--all", "--format", "{{.Names}}", "--filter", f"label={LABEL_STARTD}={_owned(pool)}").split()


def _job_groups(pool: Pool) -> list[str]:
    """The job cgroup directories of the pool's startd in every mounted hierarchy (the tool makes
    its groups' paths in all of them, the startd's or not)."""
    with open("/proc/self/mounts") as fh:
        roots = [p[1] for line in fh if len(p := line.split()) >= 3 and p[2] in ("cgroup", "cgroup2")]
    return [d for root in roots for d, _, _ in os.walk(os.path.join(root, pool.env["GRIDBUS_BASE_CGROUP"]))
            if os.path.basename(d).startswith("job_")]


def _submit(pool: Pool, subdir: Path, image: str, script: str, **attrs) -> int:
    ad = {"Iwd": str(subdir), "WantDocker": True, "DockerImage": image, "Out": "job.out", "Err": "job.err",
          "ShouldTransferFiles": "YES", "WhenToTransferOutput": "ON_EXIT", "TransferExecutable": False,
          "RequestMemory": MEMORY, **attrs}
    return pool.submit("schedd@s", 1, cmd="/bin/sh", args=f"-c '{script}'", requirements="TARGET.HasDocker", **ad)


def _ended(pool: Pool, cluster: int, timeout: float = 60) -> dict:
    attrs = ["JobStatus", "ExitCode", "HoldReason", "HoldReasonCode", "DiskUsage"]
    return wait_for(f"job {cluster} completed", lambda: next(iter(pool.history("schedd@s", f"ClusterId == {cluster}",
                                                                             attrs)), None), timeout)


def _held(pool: Pool, cluster: int, timeout: float = 60) -> dict:
    return wait_for(f"job {cluster} held", lambda: [
        j for j in pool.jobs("schedd@s", f"ClusterId == {cluster}", ["JobStatus", "HoldReason", "HoldReasonCode"])
        if j.get("JobStatus") == 5], timeout)[0]


def test_the_startd_advertises_the_tool_it_found(cpool):
    ad = cpool.wait_slots(2)[0]
    assert ad["HasDocker"] is True and ad["HasContainer"] is True and ad["HasDockerURL"] is True
    assert ad["DockerVersion"].startswith("podman version")


def test_a_docker_job_runs_in_its_image_as_its_account_and_its_files_come_back(cpool, subdir, image):
    (subdir / "in.txt").write_text("sent in\n")
    script = ('id -u > uid.txt; cat in.txt > copy.txt; ls / > root.txt; pwd > pwd.txt; '
              'echo "$GREETING"; echo oops >&2')
    cluster = _submit(cpool, subdir, image, script, TransferInput="in.txt", Environment="GREETING=hello")
    done = _ended(cpool, cluster)
    assert done["JobStatus"] == 4 and done["ExitCode"] == 0, done
    assert (subdir / "job.out").read_text() == "hello\n"
    assert (subdir / "job.err").read_text() == "oops\n"
    assert (subdir / "copy.txt").read_text() == "sent in\n"
    assert (subdir / "uid.txt").read_text().strip() == str(65534)  # nobody, the USER_MAP's account
    assert "usr" not in (subdir / "root.txt").read_text().split()  # the image's root, not the host's
    assert (subdir / "pwd.txt").read_text().strip().startswith(str(cpool.workdir / "startd-a" / "execute"))
    assert done["DiskUsage"] >= os.path.getsize(BUSYBOX) // 1024  # the image's size counts
    assert _containers(cpool) == []
    wait_for("the job's groups gone from every hierarchy", lambda: not _job_groups(cpool), 30)


def test_a_container_job_without_an_executable_runs_its_image_command_or_its_arguments(cpool, subdir, image,
                                                                                       monkeypatch):
    """As in HTCondor: no executable in the submit file runs the image's own command; arguments
    given replace its CMD. Submitted from a submit description, as a user writes it."""
    from gridbus.console.schedd import Schedd
    from gridbus.submit import Submit

    monkeypatch.chdir(subdir)
    schedd = Schedd("schedd@s", url=cpool.url)
    common = {"universe": "container", "container_image": f"docker://{image}", "should_transfer_files": "YES",
              "request_memory": str(MEMORY)}
    own = schedd.submit(Submit({**common, "output": "own.out", "error": "own.err"})).cluster()
    given = schedd.submit(Submit({**common, "arguments": "/bin/echo given instead", "output": "given.out",
                                  "error": "given.err"})).cluster()
    for cluster in (own, given):
        done = _ended(cpool, cluster)
        assert done["JobStatus"] == 4 and done["ExitCode"] == 0, done
    assert (subdir / "made.txt").read_text() == "the image command ran\n"
    assert (subdir / "own.out").read_text().startswith(f"in {cpool.workdir / 'startd-a' / 'execute'}")
    assert (subdir / "given.out").read_text() == "given instead\n"
    assert (subdir / "own.err").read_text() == (subdir / "given.err").read_text() == ""


def test_a_container_universe_job_with_a_docker_url_runs(cpool, subdir, image):
    ad = {"Iwd": str(subdir), "WantContainer": True, "ContainerImage": f"docker://{image}", "Out": "job.out",
          "ShouldTransferFiles": "YES", "WhenToTransferOutput": "ON_EXIT", "TransferExecutable": False,
          "RequestMemory": MEMORY}
    cluster = cpool.submit("schedd@s", 1, cmd="/bin/sh", args="-c 'ls /bin/busybox'",
                           requirements="TARGET.HasContainer && TARGET.HasDockerURL", **ad)
    done = _ended(cpool, cluster)
    assert done["JobStatus"] == 4 and done["ExitCode"] == 0, done
    assert (subdir / "job.out").read_text() == "/bin/busybox\n"


def test_rm_leaves_no_container(cpool, subdir, image):
    cluster = _submit(cpool, subdir, image, "sleep 300")
    wait_for("the job's container", lambda: _containers(cpool), 60)
    cpool.call("schedd@s", "Remove", {"Constraint": f"ClusterId == {cluster}", "Reason": "done"})
    wait_for("no container left", lambda: not _containers(cpool), 30)


def test_hold_and_vacate_leave_no_container(cpool, subdir, image):
    for method in ("Hold", "Vacate"):
        cluster = _submit(cpool, subdir, image, "sleep 300")
        first = set(wait_for(f"the job's container (before {method})", lambda: _containers(cpool), 60))
        cpool.call("schedd@s", method, {"Constraint": f"ClusterId == {cluster}", "Reason": "test"}).check()
        # (vacated, it runs again, in a container of its own)
        wait_for(f"the container gone after {method}", lambda f=first: not f & set(_containers(cpool)), 30)
        cpool.call("schedd@s", "Remove", {"Constraint": f"ClusterId == {cluster}", "Reason": "done"})
        wait_for("no container left", lambda: not _containers(cpool), 30)


def test_a_missing_image_holds_the_job_with_a_sentence(cpool, subdir):
    missing = f"localhost/gridbus-no-such-image:{uuid.uuid4().hex[:8]}"
    cluster = _submit(cpool, subdir, missing, "true")
    held = _held(cpool, cluster)
    assert held["HoldReasonCode"] == 6, held
    assert held["HoldReason"].startswith(f"Cannot start container: invalid image name: {missing}"), held
    assert _containers(cpool) == []


def test_memory_over_the_limit_holds_the_job_with_code_34(cpool, subdir, image):
    cluster = _submit(cpool, subdir, image, "dd if=/dev/zero of=/dev/null bs=300M count=1; echo survived")
    held = _held(cpool, cluster)
    assert held["HoldReasonCode"] == 34, held
    assert f"Job has gone over memory limit of {MEMORY} megabytes." in held["HoldReason"], held
    wait_for("no container left", lambda: not _containers(cpool), 30)


def test_a_killed_startds_successor_removes_its_containers(cpool, subdir, image):
    # (Last in the module: it restarts the pool's startd.)
    cluster = _submit(cpool, subdir, image, "sleep 300")
    first = wait_for("the job's container", lambda: _containers(cpool), 60)
    cpool.kill("startd@a")
    assert _containers(cpool) == first  # the container outlives its startd
    cpool.start("startd", "a", **SLOTS)
    wait_for("the killed startd's container removed", lambda: not set(first) & set(_containers(cpool)), 60)
    cpool.call("schedd@s", "Remove", {"Constraint": f"ClusterId == {cluster}", "Reason": "done"})
    wait_for("no container left", lambda: not _containers(cpool), 60)
