"""Docker and container universe jobs, run through a Docker-compatible command-line tool.

HTCondor's ``universe = docker`` (``WantDocker``, ``DockerImage``) and ``universe = container``
with a ``docker://`` image (``WantContainer``, ``ContainerImage``) run here by the tool the
``DOCKER`` knob names: ``docker``, or ``podman``, which takes the same commands. The startd finds
it at start (`ContainerTool.find`) and advertises ``HasDocker``, ``DockerVersion``,
``HasContainer`` and ``HasDockerURL`` (all false where it is absent), so it matches only what it
can run.

The job's first process is the tool's ``run``, spawned as any job is (agents/startd/launch.py)
but as the startd's account and in the startd's own groups (its memory and cpu are not the
job's); the container itself runs as the job's
account (``--user``), with its scratch directory (and its Iwd) mounted at the same path and the
working directory, its arguments and environment, and its groups made below the job's
(``--cgroup-parent``), whose limits (the slot's memory and cpus) are the container's: a kill of the job's group, the kernel's
memory limit (held with code 34) and the usage counters are the one cgroup mechanism of every
job (agents/startd/jobcgroups.py). Labels name the startd and the job; every end of the job
removes its container (`ContainerTool.remove`), and a new startd removes its predecessor's
(`ContainerTool.remove_owned`). An image is pulled only when absent; its size is the job's
DiskUsage.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import resource
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gridbus.agents.startd.accounts import Account
from gridbus.agents.startd.arguments import lookup
from gridbus.agents.startd.job import HOLD_FAILED_TO_CREATE_PROCESS, Prepared, StartFailed, ad_str

log = logging.getLogger("gridbus.startd.containers")

LABEL_STARTD = "org.gridbus.startd"  # the startd that runs it (`ContainerTool.owner`)
LABEL_JOB = "org.gridbus.job"  # the job's GlobalJobId, or cluster.proc
TOOL_TIMEOUT = 60.0  # seconds a tool command other than a run or a pull may take
PULL_TIMEOUT = 1800.0
TOOL_FAILED = 125  # the exit code of docker/podman run when the tool itself failed


def _ask(path: str, verb: str) -> subprocess.CompletedProcess[str] | None:
    """``path verb``, run at the startd's start; None (logged with the first line it printed)
    unless it exits 0."""
    try:
        done = subprocess.run([path, verb], capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("DOCKER: '%s %s' failed (%s); no docker or container universe jobs here", path, verb, exc)
        return None
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or "(nothing)").splitlines()[0][:300]
        log.warning("DOCKER: '%s %s' did not exit successfully (code %d); the first line of output was %r; "
                    "no docker or container universe jobs here", path, verb, done.returncode, first)
        return None
    return done


def wanted(ad: Mapping[str, Any]) -> bool:
    """Whether the job runs in a container (docker universe, or container universe)."""
    return lookup(ad, "WantDocker") is True or lookup(ad, "WantContainer") is True


def image_of(ad: Mapping[str, Any]) -> str:
    """The job's image: DockerImage, or ContainerImage (its ``docker://`` form); StartFailed for
    a container job without one the tool can run."""
    image = ad_str(ad, "DockerImage") or ad_str(ad, "ContainerImage") or ""
    image = image.strip().removeprefix("docker://")
    if not image or image.startswith("/") or image.endswith(".sif"):
        raise StartFailed(f"Cannot start container: invalid image name: {image or '(none)'}: this machine runs "
                          "only docker images (DockerImage, or ContainerImage as docker://...)",
                          HOLD_FAILED_TO_CREATE_PROCESS)
    return image


def attributes(tool: ContainerTool | None) -> dict[str, Any]:
    """The machine ad's container attributes (HTCondor's names)."""
    if tool is None:
        return {"HasDocker": False, "HasContainer": False, "HasDockerURL": False}
    return {"HasDocker": True, "DockerVersion": tool.version, "HasContainer": True, "HasDockerURL": True}


def startd_account() -> Account:
    """The startd's own account: the tool runs as it (the container as the job's)."""
    return Account(name=str(os.geteuid()), uid=os.geteuid(), gid=os.getegid(), groups=(), home="/")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _ulimits() -> list[str]:
    """``--ulimit`` values within the startd's own hard limits: a container runtime that sets
    larger ones (podman's defaults) fails where the startd may not raise its limits."""
    out: list[str] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        out += ["--ulimit", f"nofile={soft}:{hard}"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    try:  # (podman's monitor holds at most pid_max processes of it)
        with open("/proc/sys/kernel/pid_max") as fh:
            cap = int(fh.read())
    except (OSError, ValueError):
        cap = hard
    hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    return out + ["--ulimit", f"nproc={soft}:{hard}"]


@dataclass
class ContainerTool:
    """The tool found at start: its path, its version sentence, this startd's label."""

    command: str
    version: str  # DockerVersion: the tool's own --version line
    owner: str  # the value of LABEL_STARTD on this startd's containers
    extra: tuple[str, ...] = ()  # DOCKER_EXTRA_ARGUMENTS

    @classmethod
    def find(cls, name: str, owner: str, extra: str = "") -> ContainerTool | None:
        """The tool ``name`` (DOCKER), if it is installed and answers both ``--version`` and
        ``info``, as HTCondor's startd asks it; None (logged) otherwise. ``info`` is what needs
        the engine: a docker command whose daemon is not running (or may not be reached by this
        account) answers ``--version`` all the same, and its slots would match docker jobs only
        to fail each of them."""
        path = shutil.which(name) if name.strip() else None
        if path is None:
            log.info("DOCKER: no %r on this machine; docker and container universe jobs do not match here", name)
            return None
        version = _ask(path, "--version")
        if version is not None and not version.stdout.strip():
            log.warning("DOCKER: '%s --version' printed nothing; no docker or container universe jobs here", path)
            return None
        if version is None or _ask(path, "info") is None:
            return None
        return cls(path, version.stdout.strip().splitlines()[0], owner, tuple(shlex.split(extra)))

    # ------------------------------------------------------------------ images
    async def image_kib(self, image: str) -> int | None:
        """The image's size in KiB, or None when it is not on this machine."""
        rc, out, _ = await self._run("image", "inspect", "--format", "{{.Size}}", image)
        if rc != 0:
            return None
        try:
            return -(-int(out.strip().splitlines()[0]) // 1024)
        except (ValueError, IndexError):
            return 0

    async def ensure_image(self, image: str) -> int:
        """The image here (pulled only when absent); its size in KiB. StartFailed with HTCondor's
        sentence if it cannot be had."""
        size = await self.image_kib(image)
        if size is not None:
            return size
        log.info("pulling image %s", image)
        rc, _, err = await self._run("pull", image, timeout=PULL_TIMEOUT)
        size = await self.image_kib(image) if rc == 0 else None
        if size is None:
            why = err.strip().splitlines()[-1] if err.strip() else f"{self.command} pull exited with {rc}"
            raise StartFailed(f"Cannot start container: invalid image name: {image} ({why})",
                              HOLD_FAILED_TO_CREATE_PROCESS)
        return size

    # ------------------------------------------------------------------ run
    def run_argv(self, name: str, image: str, prep: Prepared, ad: Mapping[str, Any], job_argv: list[str],
                 memory_limit_mib: int | None, cpus: float) -> list[str]:
        """The tool's run command for a prepared job (``job_argv``: its command and arguments)."""
        account = prep.account
        job = ad_str(ad, "GlobalJobId") or f"{lookup(ad, 'ClusterId')}.{lookup(ad, 'ProcId')}"
        argv = [self.command, "run", "--rm", "--name", name,
                "--label", f"{LABEL_STARTD}={self.owner}", "--label", f"{LABEL_JOB}={job}",
                "--user", f"{account.uid}:{account.gid}"]
        for gid in account.groups:
            if gid != account.gid:
                argv += ["--group-add", str(gid)]
        if prep.group is not None:
            argv += ["--cgroup-parent", "/" + prep.group.rel]
        mounts = [prep.scratch]
        if prep.iwd != prep.scratch and not prep.iwd.startswith(prep.scratch + "/"):
            mounts.append(prep.iwd)
        for path in mounts:
            argv += ["--volume", f"{path}:{path}"]
        argv += ["--workdir", prep.iwd]
        for key, value in prep.env.items():
            argv += ["--env", f"{key}={value}"]
        if memory_limit_mib and prep.group is None:
            # (In a job cgroup the limit is that group's, the container's parent: the kernel's OOM
            # kill is then counted there, where the job's hold reads it, not in the container's
            # own group, which the tool removes with the container.)
            argv += ["--memory", f"{memory_limit_mib}m"]
        argv += ["--cpu-shares", str(max(2, round(1024 * cpus)))]
        argv += _ulimits()
        if prep.streams[0] != subprocess.DEVNULL:
            argv.append("--interactive")  # (its In: the tool passes its standard input on)
        return [*argv, *self.extra, image, *job_argv]

    @staticmethod
    def name_for(ad: Mapping[str, Any], slot: str, seq: int) -> str:
        """HTCondor's container name (HTCJob<cluster>_<proc>_<slot>_PID<pid>), with a sequence."""
        return _safe(f"HTCJob{lookup(ad, 'ClusterId')}_{lookup(ad, 'ProcId')}_{slot.split('@', 1)[0]}"
                     f"_PID{os.getpid()}_{seq}")

    # ------------------------------------------------------------------ removal
    async def remove(self, name: str) -> None:
        """Remove the container ``name``, running or not (gone already is fine). A kill first:
        podman's ``rm --force`` waits ten seconds for a container that ignores SIGTERM."""
        await self._run("kill", name)
        rc, _, err = await self._run("rm", "--force", name)
        if rc != 0 and "no such container" not in err.lower() and "no container with name" not in err.lower():
            log.warning("cannot remove container %s: %s", name, err.strip()[-300:])

    def remove_owned(self) -> int:
        """Remove every container labelled as this startd's (a predecessor's, after a crash);
        returns how many there were. Blocking: run at start, off the loop."""
        try:
            listed = subprocess.run([self.command, "ps", "--all", "--quiet", "--filter",
                                     f"label={LABEL_STARTD}={self.owner}"],
                                    capture_output=True, text=True, timeout=TOOL_TIMEOUT)
            ids = listed.stdout.split()
            if ids:
                for verb in ("kill", "rm"):  # (as `remove`)
                    subprocess.run([self.command, verb, *(["--force"] if verb == "rm" else []), *ids],
                                   capture_output=True, timeout=TOOL_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("cannot list or remove a previous startd's containers: %s", exc)
            return 0
        return len(ids)

    async def _run(self, *args: str, timeout: float = TOOL_TIMEOUT) -> tuple[int, str, str]:
        try:
            proc = await asyncio.create_subprocess_exec(self.command, *args, stdin=subprocess.DEVNULL,
                                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            return -1, "", str(exc)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return -1, "", f"{self.command} {args[0]} took more than {timeout:.0f} s"
        return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")
