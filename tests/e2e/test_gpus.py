"""GPUs end to end, on devices simulated through GPU_DISCOVERY_EXTRA: submitted with `gridbus
submit` (request_gpus, require_gpus), matched, handed out by device from a partitionable slot, seen
by the job, and shown by `gridbus status -gpus`.

The startd has two devices: GPU-a0223334, a GeForce GT 330 (Capability 1.2), and GPU-b1223334, a
Tesla V100 (7.0). Each job writes what it was given and waits for a release file, so the test
decides when it ends, not a sleep.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.e2e

GRIDBUS = Path(sys.executable).with_name("gridbus")
GT330, V100 = "GPU-a0223334", "GPU-b1223334"
GPU_STARTD = {"GRIDBUS_NUM_CPUS": "4", "GRIDBUS_MEMORY": "4096", "GRIDBUS_SLOT_TYPE_1": "100%",
              "GRIDBUS_NUM_SLOTS_TYPE_1": "1", "GRIDBUS_SLOT_TYPE_1_PARTITIONABLE": "true",
              "GRIDBUS_GPU_DISCOVERY_EXTRA": "-simulate:0,1,2,1"}
JOB = """#!/bin/sh
echo "$_CONDOR_AssignedGPUs $CUDA_VISIBLE_DEVICES" >> "$1/gpus.log"
while [ ! -e "$1/release" ]; do sleep 0.1; done
"""


def gridbus(url: str, *argv: str, cwd: Path) -> str:
    done = subprocess.run([str(GRIDBUS), "--pool", url, *argv], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert done.returncode == 0, f"gridbus {' '.join(argv)} failed ({done.returncode}): {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def pool(mgmt, broker_url, tmp_path_factory) -> Iterator[Pool]:
    vhost = f"gridbus-test-gpus-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(vhost)
    mgmt.put_permissions(vhost, broker_url.user, ".*", ".*", ".*")
    p = Pool(broker_url.with_vhost(vhost).url, tmp_path_factory.mktemp("gpu-pool"))
    try:
        p.start("collector", "c")
        p.start("negotiator", "n")
        p.start("schedd", "s")
        p.start("startd", "g", **GPU_STARTD)
        p.wait_serving("collector@c", "schedd@s", "negotiator@n")
        p.wait_slots(1)
        yield p
    finally:
        p.stop()
        mgmt.delete_vhost(vhost)


def submit(pool: Pool, name: str, commands: str, count: int) -> tuple[int, Path]:
    work = pool.workdir / name
    work.mkdir()
    script = work / "job.sh"
    script.write_text(JOB)
    script.chmod(0o755)
    (work / "job.sub").write_text(f"executable = job.sh\narguments = {work}\nrequest_memory = 16MB\n"
                                  f"{commands}\nqueue {count}\n")
    out = gridbus(pool.url, "submit", "job.sub", cwd=work)
    return int(out.split("submitted to cluster")[1].strip().rstrip(".")), work


def given(work: Path, n: int) -> list[list[str]]:
    """The (AssignedGPUs, CUDA_VISIBLE_DEVICES) pairs the jobs wrote, once ``n`` have."""
    log = work / "gpus.log"
    lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return lines if len(lines) >= n else []


def cycles(pool: Pool) -> int:
    return int(pool.negotiator_stats().get("NegotiationCycles", 0))


def wait_cycles(pool: Pool, n: int) -> None:
    start = cycles(pool)
    wait_for(f"{n} more negotiation cycles", lambda: cycles(pool) >= start + n, timeout=30)


def done(pool: Pool, cluster: int, n: int) -> list[dict]:
    hist = pool.history("schedd@s", f"ClusterId == {cluster}")
    return hist if len(hist) >= n else []


def test_the_slot_advertises_its_simulated_gpus(pool):
    (ad,) = pool.ads("Machine")
    assert (ad["GPUs"], ad["DetectedGPUs"], ad["TotalSlotGPUs"]) == (2, 2, 2)
    assert ad["AssignedGPUs"] == f"{GT330},{V100}"
    assert ad["GPUs_GPU_b1223334"]["DeviceName"] == "Tesla V100-PCIE-16GB"
    assert ad["GPUs_GPU_b1223334"]["Capability"] == 7.0 and ad["GPUs_GPU_a0223334"]["Capability"] == 1.2
    assert ad["GPUs_DriverVersion"] == 6.0 and "GPUs_DeviceName" not in ad  # only what both share
    table = gridbus(pool.url, "status", "-gpus", cwd=pool.workdir).splitlines()
    assert table[0].split() == ["Name", "ST", "User", "GPUs", "GPU-Memory", "GPU-Name"]
    assert table[2].split()[:4] == [ad["Name"], "Ui", "_", "2"]
    assert table[2].endswith("GeForce GT 330,Tesla V100-PCIE-16GB")


def test_two_one_gpu_jobs_run_at_once_on_different_devices_and_a_third_waits(pool):
    cluster, work = submit(pool, "three", "request_gpus = 1", 3)
    pairs = wait_for("two jobs running with a GPU each", lambda: given(work, 2), timeout=60)
    assert sorted(p[0] for p in pairs) == [GT330, V100], pairs
    assert all(assigned == visible for assigned, visible in pairs), pairs  # CUDA_VISIBLE_DEVICES too
    # The third waits: the slot has cpus left, but no GPU (and the claimed slots show theirs).
    wait_cycles(pool, 2)
    assert len(given(work, 0)) == 2
    idle = pool.jobs("schedd@s", f"ClusterId == {cluster} && JobStatus == 1")
    assert len(idle) == 1
    table = gridbus(pool.url, "status", "-gpus", cwd=pool.workdir)
    assert table.count(" Cb ") == 2, table
    (work / "release").touch()
    hist = wait_for("the three jobs to complete", lambda: done(pool, cluster, 3), timeout=60)
    assert all(j["ExitCode"] == 0 for j in hist)
    assert len(given(work, 3)) == 3


def test_require_gpus_picks_only_the_devices_that_qualify(pool):
    cluster, work = submit(pool, "capable", "request_gpus = 1\nrequire_gpus = Capability >= 7.0", 2)
    (first,) = wait_for("one job running on the V100", lambda: given(work, 1), timeout=60)
    assert first == [V100, V100]
    # The GT 330 is free, and the other job does not take it.
    wait_cycles(pool, 2)
    assert len(given(work, 0)) == 1
    (job,) = pool.jobs("schedd@s", f"ClusterId == {cluster} && JobStatus == 1")
    assert str(job["RequireGPUs"]).startswith("Capability >= 7.0")  # 7.000000000000000E+00, as HTCondor prints it
    (work / "release").touch()
    wait_for("both jobs to complete", lambda: done(pool, cluster, 2), timeout=60)
    assert given(work, 2) == [[V100, V100], [V100, V100]]
