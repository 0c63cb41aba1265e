"""The startd's knobs (HTCondor's names where HTCondor has one) and the settings built from them.

The agent takes a `StartdSettings`; `StartdSettings.from_config(Config.load(daemon="startd"))`
reads them in `main()`, tests build one directly. The slot layout follows HTCondor's knobs:
``NUM_SLOTS`` static slots sharing the machine equally, or slot type 1 (``SLOT_TYPE_1``,
``NUM_SLOTS_TYPE_1``, ``SLOT_TYPE_1_PARTITIONABLE``) when ``NUM_SLOTS_TYPE_1`` is set.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import gridbus.transfer.knobs  # noqa: F401 - registers TRANSFER_STALL_TIMEOUT and the other transfer knobs
from gridbus.agents.startd import cron, gpus
from gridbus.config import Config, knob
from gridbus.transfer.stream import STALL_TIMEOUT

knob("NUM_CPUS", 0, "cpus the startd advertises; 0 means detect")
knob("MEMORY", 0, "MiB of memory the startd advertises; 0 means detect")
knob("DISK", 0, "KiB of disk the startd advertises; 0 means the free space of EXECUTE")
knob("NUM_GPUS", -1, "GPUs the startd advertises; -1 means detect (nvidia-smi, or GPU_DISCOVERY_EXTRA's -simulate)")
knob("GPU_DISCOVERY_EXTRA", "", "condor_gpu_discovery's options for the startd's GPU discovery; gridbus acts on "
     "-simulate[:D[,N[,D2,N2...]]] (N simulated devices of kind D, no discovery run)")
knob("ARCH", "", "Arch to advertise instead of the detected one")
knob("OPSYS", "", "OpSys to advertise instead of the detected one")
knob("OPSYSANDVER", "", "OpSysAndVer to advertise instead of the detected one")
knob("RANK", "0", "the slots' Rank expression: which jobs the machine prefers")
knob("MAXJOBRETIREMENTTIME", "0", "seconds (an expression, TARGET the job) a preempted job may run on before it is vacated")
knob("KILLING_TIMEOUT", 30.0, "seconds between SIGTERM and SIGKILL when a job is stopped gracefully")
knob("STARTER_UPDATE_INTERVAL", 300.0, "seconds between usage reports of a running job to its schedd")
knob("STARTER_MEMORY_CHECK_INTERVAL", 1.0, "seconds between samples of a running job's memory and cpu use")
knob("STARTER_ENFORCE_MEMORY_LIMIT", True, "kill a job whose resident memory exceeds its RequestMemory")
knob("STARTER_ALLOW_RUNAS_OWNER", True, "when the startd runs as root, run each job as its Owner if that account exists")
knob("STARTER_UNPRIVILEGED_USER", "", "account for jobs whose Owner cannot be used (e.g. nobody); empty: refuse such jobs")
knob("USER_MAP", [], "broker user -> Unix account for jobs on this node (HTCondor's user map): entries "
     "'user=account', '*=account' for everyone not listed; a user not mapped runs as the account of the same name")
knob("STARTER_ALLOW_ROOT_JOBS", False, "let a job run as root when no other account applies (never the default)")
knob("STARTER_FAST_SPAWN", True, "start jobs by the fast spawn, born in their cgroups and accounts (the built extension agents/startd/_spawn.c); false: subprocess.Popen")
knob("STARTER_SPAWN_AHEAD", True, "spawn a claim's next job queued ahead while the job before it runs, ready to exec "
     "the moment that job exits (woken by the kernel, not the startd's loop); false: spawned at the exit. Needs the "
     "fast spawn beside the startd (x86-64, aarch64)")
knob("STARTD_SIMULATE_JOBS", False, "scale tests: run no job, each ends (exit 0) after its simulated run time "
     "(a sleep job's own seconds, else SIMULATED_JOB_RUNTIME)")
knob("SIMULATED_JOB_RUNTIME", 0.0, "seconds a simulated job (STARTD_SIMULATE_JOBS) runs unless it is a sleep job")
knob("BASE_CGROUP", "gridbus", "parent cgroup of the jobs' cgroups (each startd uses <BASE_CGROUP>/[<vhost>/]<its name>); empty: no cgroups, scan /proc")
knob("CGROUP_VERSION", "auto", "which cgroups the starter uses: auto (v2 with a memory controller, else v1, else v2), 1 or 2")
knob("CGROUP_MEMORY_LIMIT_POLICY", "hard", "the kernel's memory limit of a job: hard (OOM kill and hold past it), soft (reclaimed first past it), none")
knob("CGROUP_PIDS_LIMIT", 0, "most processes and threads a job may have at once (cgroup pids controller); 0: no limit")
knob("DOCKER", "docker", "the Docker-compatible command-line tool that runs docker and container universe jobs "
     "(docker, or podman, which takes the same commands); absent: the startd advertises HasDocker = false")
knob("DOCKER_EXTRA_ARGUMENTS", "", "arguments added to every container's run command (e.g. --runtime runc)")
knob("STARTD_REPORT_TIMEOUT", 10.0, "seconds a JobReports call to a schedd may take before it is retried")
knob("STARTD_REPORT_RETRY", 1.0, "seconds between retries of an unanswered JobReports call")
knob("JOB_DEFAULT_REQUESTCPUS", 1, "cpus a job without RequestCpus gets")
knob("JOB_DEFAULT_REQUESTMEMORY", 128, "MiB a job without RequestMemory gets")
knob("JOB_DEFAULT_REQUESTDISK", 1024, "KiB a job without RequestDisk gets")


@dataclass(frozen=True)
class SlotShare:
    """One slot type's share of the machine: a fraction (0..1] or an absolute amount each."""

    cpus: float | int = 1.0
    memory: float | int = 1.0
    disk: float | int = 1.0

    @staticmethod
    def parse(text: str) -> SlotShare:
        """HTCondor's SLOT_TYPE_<N> syntax: ``cpus=2, memory=1024, disk=50%`` or ``25%``."""
        text = text.strip()
        if not text:
            return SlotShare()
        if re.fullmatch(r"\d+(\.\d+)?%", text):
            frac = float(text[:-1]) / 100
            return SlotShare(frac, frac, frac)
        values: dict[str, float | int] = {}
        for part in re.split(r"[,\s]+", text):
            if not part:
                continue
            name, sep, value = part.partition("=")
            name = name.strip().lower()
            if not sep or name not in ("cpus", "cpu", "memory", "mem", "ram", "disk"):
                raise ValueError(f"slot type {text!r}: {part!r} is not cpus=, memory= or disk=")
            key = {"cpu": "cpus", "mem": "memory", "ram": "memory"}.get(name, name)
            value = value.strip()
            try:
                values[key] = float(value[:-1]) / 100 if value.endswith("%") else int(value)
            except ValueError:
                raise ValueError(f"slot type {text!r}: {value!r} is not a number or a percentage") from None
        return SlotShare(**values)


@dataclass(frozen=True)
class StartdSettings:
    execute: str = "/tmp/gridbus-execute"
    num_slots: int = 0  # static slots; 0 means one per detected cpu
    partitionable: bool = False  # one partitionable slot of the whole machine (slot type 1)
    slot_share: SlotShare = field(default_factory=SlotShare)
    start: str = "TRUE"
    rank: str = "0"
    max_job_retirement_time: str = "0"
    overrides: dict[str, Any] = field(default_factory=dict)  # NUM_CPUS, MEMORY, ... for detect()
    gpu_discovery_extra: str = ""  # GPU_DISCOVERY_EXTRA
    killing_timeout: float = 30.0
    update_interval: float = 300.0  # STARTER_UPDATE_INTERVAL
    memory_check_interval: float = 1.0
    enforce_memory: bool = True
    allow_runas_owner: bool = True
    unprivileged_user: str = ""
    allow_root_jobs: bool = False
    user_map: tuple[str, ...] = ()
    report_timeout: float = 10.0
    report_retry: float = 1.0
    fast_spawn: bool = True  # STARTER_FAST_SPAWN: agents/startd/_spawn.c, where it is built
    spawn_ahead: bool = True  # STARTER_SPAWN_AHEAD
    simulate_jobs: bool = False  # STARTD_SIMULATE_JOBS
    simulated_runtime: float = 0.0  # SIMULATED_JOB_RUNTIME
    base_cgroup: str = "gridbus"  # BASE_CGROUP; "" forces the process-scan fallback
    cgroup_version: str = "auto"  # CGROUP_VERSION
    memory_policy: str = "hard"  # CGROUP_MEMORY_LIMIT_POLICY
    pids_limit: int = 0  # CGROUP_PIDS_LIMIT
    docker: str = "docker"  # DOCKER
    docker_extra_arguments: str = ""  # DOCKER_EXTRA_ARGUMENTS
    default_request_cpus: int = 1
    default_request_memory: int = 128
    default_request_disk: int = 1024
    transfer_stall: float = STALL_TIMEOUT  # TRANSFER_STALL_TIMEOUT
    transfer_open_timeout: float = 30.0  # TRANSFER_OPEN_TIMEOUT
    transfer_direct_io_min_mb: int = 64  # TRANSFER_DIRECT_IO_MIN_MB (0: no file goes around the page cache)
    keep_sandbox_on_hold: bool = False  # KEEP_SANDBOX_ON_HOLD
    startd_attrs: dict[str, Any] = field(default_factory=dict)  # STARTD_ATTRS / STARTD_EXPRS: name -> value
    cron_jobs: tuple[cron.CronJob, ...] = ()  # STARTD_CRON_JOBLIST
    cron_autopublish: str = "Never"  # STARTD_CRON_AUTOPUBLISH

    @property
    def transfer_direct_io_min(self) -> int:
        """TRANSFER_DIRECT_IO_MIN_MB in bytes."""
        return self.transfer_direct_io_min_mb << 20

    @classmethod
    def from_config(cls, cfg: Config) -> StartdSettings:
        overrides: dict[str, Any] = {}
        for name in ("NUM_CPUS", "MEMORY", "DISK"):
            if cfg.get(name) > 0:
                overrides[name] = cfg.get(name)
        if cfg.get("NUM_GPUS") >= 0:
            overrides["NUM_GPUS"] = cfg.get("NUM_GPUS")
        for name in ("ARCH", "OPSYS", "OPSYSANDVER", "UID_DOMAIN", "FILESYSTEM_DOMAIN"):
            if cfg.get(name):
                overrides[name] = cfg.get(name)
        typed = cfg.get("NUM_SLOTS_TYPE_1") > 0
        num_slots = cfg.get("NUM_SLOTS_TYPE_1") if typed else cfg.get("NUM_SLOTS")
        if not typed and "NUM_SLOTS" not in _explicit(cfg):
            num_slots = 0  # HTCondor: one static slot per cpu, counted after NUM_CPUS applies
        return cls(
            execute=str(cfg.get("EXECUTE")),
            num_slots=int(num_slots),
            partitionable=bool(typed and cfg.get("SLOT_TYPE_1_PARTITIONABLE")),
            slot_share=SlotShare.parse(cfg.get("SLOT_TYPE_1")) if typed else SlotShare(),
            start=str(cfg.get("START")),
            rank=str(cfg.get("RANK")),
            max_job_retirement_time=str(cfg.get("MAXJOBRETIREMENTTIME")),
            overrides=overrides,
            gpu_discovery_extra=str(cfg.get("GPU_DISCOVERY_EXTRA")),
            startd_attrs=cron.configured_attrs(cfg),
            cron_jobs=cron.jobs_from_config(cfg),
            cron_autopublish=cron.autopublish(cfg.get("STARTD_CRON_AUTOPUBLISH")),
            **cfg.pick(
                killing_timeout="KILLING_TIMEOUT",
                update_interval="STARTER_UPDATE_INTERVAL",
                memory_check_interval="STARTER_MEMORY_CHECK_INTERVAL",
                enforce_memory="STARTER_ENFORCE_MEMORY_LIMIT",
                allow_runas_owner="STARTER_ALLOW_RUNAS_OWNER",
                unprivileged_user="STARTER_UNPRIVILEGED_USER",
                allow_root_jobs="STARTER_ALLOW_ROOT_JOBS",
                user_map="USER_MAP",
                report_timeout="STARTD_REPORT_TIMEOUT",
                report_retry="STARTD_REPORT_RETRY",
                fast_spawn="STARTER_FAST_SPAWN",
                spawn_ahead="STARTER_SPAWN_AHEAD",
                simulate_jobs="STARTD_SIMULATE_JOBS",
                simulated_runtime="SIMULATED_JOB_RUNTIME",
                base_cgroup="BASE_CGROUP",
                cgroup_version="CGROUP_VERSION",
                memory_policy="CGROUP_MEMORY_LIMIT_POLICY",
                pids_limit="CGROUP_PIDS_LIMIT",
                docker="DOCKER",
                docker_extra_arguments="DOCKER_EXTRA_ARGUMENTS",
                default_request_cpus="JOB_DEFAULT_REQUESTCPUS",
                default_request_memory="JOB_DEFAULT_REQUESTMEMORY",
                default_request_disk="JOB_DEFAULT_REQUESTDISK",
                transfer_stall="TRANSFER_STALL_TIMEOUT",
                transfer_open_timeout="TRANSFER_OPEN_TIMEOUT",
                transfer_direct_io_min_mb="TRANSFER_DIRECT_IO_MIN_MB",
                keep_sandbox_on_hold="KEEP_SANDBOX_ON_HOLD",
            ),
        )

    def validate(self) -> None:
        if self.num_slots < 0:
            raise ValueError(f"NUM_SLOTS must be 0 or more, not {self.num_slots}")
        if self.killing_timeout < 0:
            raise ValueError(f"KILLING_TIMEOUT must not be negative, not {self.killing_timeout}")
        for name in ("update_interval", "memory_check_interval", "report_timeout", "report_retry", "transfer_stall",
                     "transfer_open_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        if self.transfer_direct_io_min_mb < 0:
            raise ValueError(f"TRANSFER_DIRECT_IO_MIN_MB must be 0 or more, not {self.transfer_direct_io_min_mb}")
        if self.memory_policy.lower() not in ("hard", "soft", "none"):
            raise ValueError(f"CGROUP_MEMORY_LIMIT_POLICY must be hard, soft or none, not {self.memory_policy!r}")
        if str(self.cgroup_version).lower().removeprefix("v") not in ("auto", "1", "2"):
            raise ValueError(f"CGROUP_VERSION must be auto, 1 or 2, not {self.cgroup_version!r}")
        if self.simulated_runtime < 0:
            raise ValueError(f"SIMULATED_JOB_RUNTIME must not be negative, not {self.simulated_runtime}")
        if self.pids_limit < 0:
            raise ValueError(f"CGROUP_PIDS_LIMIT must be 0 (no limit) or more, not {self.pids_limit}")
        gpus.simulate_option(self.gpu_discovery_extra)  # DiscoveryError (a ValueError) names what is wrong
        if not os.path.isabs(self.execute):
            raise ValueError(f"EXECUTE must be an absolute path, not {self.execute!r}")


def _explicit(cfg: Config) -> set[str]:
    """Knobs set in the file or the environment rather than left at their default."""
    return {name for name in ("NUM_SLOTS",) if cfg.source(name) != "default"}
