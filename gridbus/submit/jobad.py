"""Build one job's ad from its expanded submit commands, with condor_submit's attributes and defaults.

`build_job_ad(get, ...)` takes `get(command) -> expanded value or None` so that it knows nothing of
macros; the caller expands per proc. Expressions come out as `gridbus.classad.ExprTree`, literals as
Python values, as HTCondor's own submit code makes them (checked in tests/unit/submit against
htcondor 24's `Submit.jobs()`).
"""

from __future__ import annotations

import math
import os
import re
import socket
import stat
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from gridbus import hostinfo
from gridbus.config import Config, knob
from gridbus.submit.errors import SubmitError
from gridbus.submit.gpus import gpu_attrs, requirements_clause
from gridbus.submit.quoting import (
    arguments_attrs,
    env_v1_attr,
    environment_attr,
    is_v2,
    join_v2,
    split_v2,
)
from gridbus.submit.units import disk_kib, memory_mib

Getter = Callable[[str], "str | None"]

# Docker and container universe jobs are vanilla jobs (5) run in a container (`container_attrs`).
UNIVERSES = {"vanilla": 5, "local": 12, "scheduler": 7, "docker": 5, "container": 5}
UNSUPPORTED_UNIVERSES = {"standard", "grid", "java", "vm", "parallel", "mpi", "pvm"}
NOTIFICATION = {"never": 0, "always": 1, "complete": 2, "error": 3}

DEFAULT_REQUEST_MEMORY = "ifthenelse(MemoryUsage =!= undefined,MemoryUsage,(ImageSize + 1023) / 1024)"
HOLD_REASON_SUBMITTED_ON_HOLD = 15

# condor_submit's constant attributes, in the order it prints them.
CONSTANT_ATTRS: dict[str, Any] = {
    "MyType": "Job",
    "TargetType": "Machine",
    "JobStatus": 1,
    "JobPrio": 0,
    "NumJobStarts": 0,
    "NumJobCompletions": 0,
    "NumRestarts": 0,
    "NumSystemHolds": 0,
    "NumCkpts": 0,
    "ExitBySignal": False,
    "ExitStatus": 0,
    "CurrentHosts": 0,
    "MinHosts": 1,
    "MaxHosts": 1,
    "JobNotification": 0,
    "LeaveJobInQueue": False,
    "ShouldTransferFiles": "IF_NEEDED",
    "WhenToTransferOutput": "ON_EXIT",
    "JobLeaseDuration": 2400,
    "TransferIn": False,
    "TransferOut": False,
    "TransferErr": False,
    "TransferInputSizeMB": 0,
    "RemoteUserCpu": 0.0,
    "RemoteSysCpu": 0.0,
    "RemoteWallClockTime": 0.0,
    "CumulativeRemoteUserCpu": 0.0,
    "CumulativeRemoteSysCpu": 0.0,
    "CumulativeSlotTime": 0,
    "CommittedTime": 0,
    "CommittedSlotTime": 0,
    "CommittedSuspensionTime": 0,
    "CumulativeSuspensionTime": 0,
    "TotalSuspensions": 0,
    "LastSuspensionTime": 0,
}


def expr(text: str) -> Any:
    """A ClassAd expression value (gridbus.classad.ExprTree), imported late so this module stays light."""
    from gridbus.classad import ExprTree

    return ExprTree(text)


_INT = re.compile(r"^[+-]?\d+$")
_REAL = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?$")
_STRING = re.compile(r'^"((?:[^"\\]|\\.)*)"$', re.S)


def classad_value(text: str) -> Any:
    """A `+Attr` value: a Python literal when it is one (as HTCondor stores it), else an expression."""
    t = text.strip()
    if _INT.match(t):
        return int(t)
    if _REAL.match(t):
        return float(t)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    m = _STRING.match(t)
    if m:
        return re.sub(r"\\(.)", lambda g: {"n": "\n", "t": "\t"}.get(g.group(1), g.group(1)), m.group(1))
    if not t:
        raise SubmitError("an attribute value cannot be empty")
    return expr(t)


def truth(text: str, command: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "t", "yes", "y", "1"):
        return True
    if t in ("false", "f", "no", "n", "0", ""):
        return False
    raise SubmitError(f"{command} must be true or false, not {text!r}")


def integer(text: str, command: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise SubmitError(f"{command} must be a whole number, not {text!r}") from None


knob("SUBMIT_CONTAINER_NEVER_XFER_ABSOLUTE_CMD", False,
     "a docker or container job's executable named by an absolute path is the image's and never travels "
     "(HTCondor's default before 24); false: it travels unless transfer_executable = false")


@lru_cache(maxsize=1)
def never_transfer_absolute_container_cmd() -> bool:
    """SUBMIT_CONTAINER_NEVER_XFER_ABSOLUTE_CMD of the submitter's configuration (read once: a
    cluster of many container jobs asks for each)."""
    return bool(Config.load().get("SUBMIT_CONTAINER_NEVER_XFER_ABSOLUTE_CMD"))


def _in_the_image(get: Getter, executable: str, in_container: bool) -> bool:
    """Whether a container job's executable is taken to be the image's (condor_submit's rule,
    with SUBMIT_CONTAINER_NEVER_XFER_ABSOLUTE_CMD): an absolute path, transfer_executable not
    given, and the knob set."""
    return (in_container and executable.startswith("/") and get("transfer_executable") is None
            and never_transfer_absolute_container_cmd())


@lru_cache(maxsize=1)
def filesystem_domain() -> str:
    # HTCondor's FILESYSTEM_DOMAIN defaults to the full host name, the same default the startd
    # advertises; GRIDBUS_FILESYSTEM_DOMAIN sets it as the startd's knob does.
    return os.environ.get("GRIDBUS_FILESYSTEM_DOMAIN") or socket.getfqdn()


_STRLIT = re.compile(r'"(?:[^"\\]|\\.)*"')
_IDENT = re.compile(r"(?:\b(MY|TARGET)\s*\.\s*)?\b([A-Za-z_][A-Za-z0-9_]*)\b(\s*\()?", re.I)


def machine_refs(requirements: str) -> set[str]:
    """Lower-cased attribute names an expression may read from the slot (anything not MY.-scoped)."""
    out: set[str] = set()
    for m in _IDENT.finditer(_STRLIT.sub('""', requirements)):
        scope, name, call = m.group(1), m.group(2), m.group(3)
        if call or (scope and scope.upper() == "MY"):
            continue
        out.add(name.lower())
    return out


def default_requirements(user: str | None, universe: int, cpus_requested: bool, transfer: str,
                         gpus: dict[str, Any] | None = None, container: str = "",
                         checkpoint: tuple[bool, bool] = (False, False)) -> str:
    """condor_submit's Requirements: the user's clause, then the clauses it does not already cover
    (``gpus``: the job's GPU attributes, gridbus.submit.gpus; ``container``: a container job's
    clause, `container_attrs`, in place of the OpSys one; ``checkpoint``, `_checkpoint_needs`:
    whether the transfer clause asks for a starter of 8.9.7 or later, and whether the slot must
    say HasSelfCheckpointTransfers)."""
    refs = machine_refs(user) if user else set()
    clauses: list[str] = []
    if user:
        clauses.append(f"({user})")
    if "arch" not in refs:
        clauses.append(f'(TARGET.Arch == "{hostinfo.arch()}")')
    if container:
        clauses.append(container)
    elif "opsys" not in refs:
        clauses.append('(TARGET.OpSys == "LINUX")')
    clauses.append("(TARGET.Disk >= RequestDisk)")
    clauses.append("(TARGET.Memory >= RequestMemory)")
    if cpus_requested and "cpus" not in refs:
        clauses.append("(TARGET.Cpus >= RequestCpus)")
    gpu_clause = requirements_clause(gpus or {}, refs)
    if gpu_clause:
        clauses.append(gpu_clause)
    # condor_submit puts this inside the transfer clause, and the checkpoint one after all the others.
    version = ' && versioncmp(split(TARGET.CondorVersion)[1], "8.9.7") >= 0' if checkpoint[0] else ""
    if universe not in (UNIVERSES["local"], UNIVERSES["scheduler"]):
        fsd, hft = "filesystemdomain" in refs, "hasfiletransfer" in refs
        if transfer == "NO":
            if not fsd:
                clauses.append("(TARGET.FileSystemDomain == MY.FileSystemDomain)")
        elif transfer == "YES":
            if not hft:
                clauses.append(f"(TARGET.HasFileTransfer{version})")
        elif not fsd and not hft:
            clauses.append(f"((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer{version}))")
        elif fsd and not hft:
            clauses.append(f"(TARGET.HasFileTransfer{version})")
    if checkpoint[1] and "hasselfcheckpointtransfers" not in refs:
        return " && ".join(clauses) + " && TARGET.HasSelfCheckpointTransfers"
    return " && ".join(clauses)


CONDOR_SUBMIT = 0  # JobSubmitMethod of condor_submit (`gridbus submit`); htcondor2's Python API is 2


def _check_executable(get: Getter, cmd: str, st: os.stat_result | OSError) -> None:
    """condor_submit's check of an executable it transfers (transfer_executable, true unless
    said otherwise), given its stat or the error of that stat: one that does not exist, or is
    empty, is refused at submit rather than held at its start. A path naming $$() attributes of
    the machine is left to the match. Only condor_submit checks (`gridbus submit`): HTCondor's
    Python bindings submit such a job, and it is held at its start, as here."""
    flag = get("transfer_executable")
    if (flag and not truth(flag, "transfer_executable")) or "$$" in cmd:
        return
    if isinstance(st, FileNotFoundError):
        raise SubmitError(f"Executable file {cmd} does not exist")
    # (another error, unreadable here, is not absent: the job's account may read it)
    if isinstance(st, os.stat_result) and stat.S_ISREG(st.st_mode) and st.st_size == 0:
        raise SubmitError(f"Executable file {cmd} has zero length")


def _stat(path: str) -> os.stat_result | OSError:
    try:
        return os.stat(path)
    except OSError as exc:
        return exc


def _transfer_attrs(get: Getter, ad: dict[str, Any], iwd: str) -> str:
    """condor_submit's file-transfer attributes: ShouldTransferFiles, WhenToTransferOutput,
    TransferInput/TransferOutput/TransferOutputRemaps/TransferExecutable as given, the input's size
    in DiskUsage and TransferInputSizeMB, and which of stdin/stdout/stderr travel (a real file
    drops TransferIn/TransferOut/TransferErr = false and is not streamed). Returns the mode."""
    transfer = (get("should_transfer_files") or "IF_NEEDED").strip().upper()
    if transfer not in ("YES", "NO", "IF_NEEDED"):
        raise SubmitError(f"should_transfer_files must be YES, NO or IF_NEEDED, not {transfer!r}")
    when = (get("when_to_transfer_output") or "ON_EXIT").strip().upper()
    if when not in ("ON_EXIT", "ON_EXIT_OR_EVICT", "ON_SUCCESS"):
        raise SubmitError(f"when_to_transfer_output must be ON_EXIT, ON_EXIT_OR_EVICT or ON_SUCCESS, not {when!r}")
    if when == "ON_EXIT_OR_EVICT" and transfer == "IF_NEEDED":
        raise SubmitError("when_to_transfer_output = ON_EXIT_OR_EVICT and should_transfer_files = IF_NEEDED "
                          "are incompatible: set should_transfer_files = YES, or when_to_transfer_output = ON_EXIT")
    ad["ShouldTransferFiles"] = transfer
    if transfer == "NO":
        ad.pop("WhenToTransferOutput", None)
    else:
        ad["WhenToTransferOutput"] = when
    if transfer != "YES":  # the domain decides whether a file system is shared
        ad["FileSystemDomain"] = filesystem_domain()
    for command, attr in (("transfer_input_files", "TransferInput"), ("transfer_output_files", "TransferOutput")):
        value = get(command)
        if value and value.strip():
            ad[attr] = ",".join(p.strip() for p in value.split(",") if p.strip())
    remaps = get("transfer_output_remaps")
    if remaps and remaps.strip():
        ad["TransferOutputRemaps"] = remaps.strip()[1:-1] if is_v2(remaps) else remaps.strip()
    exe = get("transfer_executable")
    if exe and not truth(exe, "transfer_executable"):
        ad["TransferExecutable"] = False
    for attr, transfer_attr, stream_attr in (("In", "TransferIn", "StreamIn"), ("Out", "TransferOut", "StreamOut"),
                                             ("Err", "TransferErr", "StreamErr")):
        if ad.get(attr) != "/dev/null":
            ad.pop(transfer_attr, None)
            ad[stream_attr] = False
    if transfer != "NO":
        names = [p.strip() for p in (ad.get("TransferInput") or "").split(",") if p.strip()]
        if ad.get("In") != "/dev/null":
            names.append(ad["In"])
        size = sum(_tree_bytes(os.path.join(iwd, n)) for n in names)
        if size:
            ad["DiskUsage"] = int(ad["DiskUsage"]) + int(math.ceil(size / 1024))
        ad["TransferInputSizeMB"] = size // (1024 * 1024)
    return transfer


def _checkpoint_attrs(get: Getter, ad: dict[str, Any]) -> None:
    """Self-checkpointing, as condor_submit records it: checkpoint_exit_code as
    SuccessCheckpointExitCode, with WantFTOnCheckpoint (HTCondor's starter ignores the code
    without it, and condor_submit sets it), transfer_checkpoint_files as TransferCheckpoint, and
    erase_output_and_error_on_restart as EraseOutputAndErrorOnRestart."""
    code = get("checkpoint_exit_code")
    if code and code.strip():
        ad["SuccessCheckpointExitCode"] = integer(code, "checkpoint_exit_code")
        ad["WantFTOnCheckpoint"] = True
    files = get("transfer_checkpoint_files")
    if files and files.strip():
        ad["TransferCheckpoint"] = files.strip()
    erase = get("erase_output_and_error_on_restart")
    if erase and erase.strip():
        ad["EraseOutputAndErrorOnRestart"] = truth(erase, "erase_output_and_error_on_restart")


def _checkpoint_needs(ad: dict[str, Any]) -> tuple[bool, bool]:
    """What condor_submit's Requirements ask of the slot for this job: a starter of 8.9.7 or later
    (TransferCheckpoint, or when_to_transfer_output = ON_SUCCESS), and HasSelfCheckpointTransfers
    (WantFTOnCheckpoint)."""
    return (bool(ad.get("TransferCheckpoint")) or ad.get("WhenToTransferOutput") == "ON_SUCCESS",
            ad.get("WantFTOnCheckpoint") is True)


def _tree_bytes(path: str) -> int:
    """Bytes of a file, or of every file under a directory; 0 for what cannot be read."""
    if os.path.isdir(path):
        total = 0
        for dirpath, _dirs, files in os.walk(path):
            total += sum(_tree_bytes(os.path.join(dirpath, f)) for f in files)
        return total
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def universe_of(get: Getter) -> int:
    name = (get("universe") or "vanilla").strip().lower()
    if name in UNIVERSES:
        return UNIVERSES[name]
    if name in UNSUPPORTED_UNIVERSES:
        raise SubmitError(f"universe {name!r} is not run by gridbus (it runs vanilla, docker, container, local and scheduler)")
    raise SubmitError(f"unknown universe {name!r} (gridbus runs vanilla, docker, container, local and scheduler)")


def container_attrs(get: Getter) -> tuple[dict[str, Any], str]:
    """condor_submit's attributes of a docker or container universe job, and the clause of the
    machine's it puts in Requirements; nothing for other universes."""
    name = (get("universe") or "vanilla").strip().lower()
    if name == "docker":
        image = (get("docker_image") or "").strip()
        if not image:
            raise SubmitError("docker jobs require a docker_image")
        return {"WantDocker": True, "DockerImage": image}, "TARGET.HasDocker"
    if name == "container":
        image = (get("container_image") or "").strip()
        if not image:
            raise SubmitError("container jobs require a container_image")
        if not image.startswith("docker://"):
            raise SubmitError(f"container_image {image!r}: gridbus runs docker:// images (not image files or "
                              "directories, which need Apptainer)")
        return ({"WantContainer": True, "ContainerImage": image, "WantDockerImage": True,
                 "ContainerImageSource": "docker"}, "TARGET.HasContainer && TARGET.HasDockerURL")
    return {}, ""


def build_job_ad(
    get: Getter,
    *,
    cwd: str,
    cluster_id: int,
    proc_id: int,
    qdate: int,
    submit_method: int,
    owner: str | None = None,
    user_attrs: tuple[tuple[str, str], ...] = (),
    check_dirs: bool = True,
) -> dict[str, Any]:
    """The whole ad of one job; `get` answers a command's expanded value (None when not given).

    ``check_dirs=False`` builds a proc template (gridbus.submit.materialize), whose initialdir may
    still name a per-proc macro; each real proc's directory is checked when it is built."""
    ad: dict[str, Any] = dict(CONSTANT_ATTRS)
    ad["ClusterId"] = cluster_id
    ad["ProcId"] = proc_id
    ad["QDate"] = qdate
    ad["EnteredCurrentStatus"] = qdate
    ad["JobSubmitMethod"] = submit_method
    if owner:
        ad["Owner"] = owner
    universe = universe_of(get)
    ad["JobUniverse"] = universe
    in_container, container_clause = container_attrs(get)
    ad.update(in_container)

    iwd_text = next((v for v in (get("initialdir"), get("initial_dir"), get("iwd")) if v), None)
    iwd = os.path.normpath(os.path.join(cwd, iwd_text)) if iwd_text else cwd
    if check_dirs and not os.path.isdir(iwd):
        raise SubmitError(f"initialdir: no such directory: {iwd}")
    ad["Iwd"] = iwd

    executable = (get("executable") or "").strip()
    size = 0
    if executable:
        # condor_submit resolves a relative executable against the submit directory, not initialdir.
        cmd = os.path.normpath(os.path.join(cwd, executable))
        ad["Cmd"] = cmd
        st = _stat(cmd)  # (one stat for condor_submit's check and the sizes)
        if _in_the_image(get, executable, bool(in_container)):
            ad["TransferExecutable"] = False
        elif check_dirs and submit_method == CONDOR_SUBMIT:
            _check_executable(get, cmd, st)
        if isinstance(st, os.stat_result):
            size = int(math.ceil(st.st_size / 1024))
    elif in_container:
        # As condor_submit: a container job without an executable runs its image's own command
        # (ENTRYPOINT and CMD; the job's arguments, if any, replace CMD), and nothing travels for it.
        ad["Cmd"] = ""
        ad["TransferExecutable"] = False
    else:
        raise SubmitError("no executable given: add 'executable = /path/to/program'")
    ad["ExecutableSize"] = ad["ImageSize"] = ad["DiskUsage"] = size

    ad.update(arguments_attrs(get("arguments")))
    env_value = get("environment")
    getenv = bool(get("getenv")) and truth(get("getenv") or "", "getenv")
    if env_value is None:
        env_value = get("env")
        if env_value is not None and env_value.strip() and not is_v2(env_value):
            # HTCondor keeps `env` in the old syntax as the old attributes, Env and EnvDelim.
            ad["Env"] = env_v1_attr(env_value, dict(os.environ) if getenv else None)
            ad["EnvDelim"] = ";"
            env_value = None
    environment = environment_attr(env_value)
    if getenv and "Env" not in ad:
        # getenv = true: the submitter's environment, under what the description sets itself.
        own = {}
        for entry in split_v2(environment, "environment"):
            name, _, setting = entry.partition("=")
            own[name] = setting
        merged = {**os.environ, **own}
        environment = join_v2([f"{k}={merged[k]}" for k in sorted(merged)])
    if "Env" not in ad:
        ad["Environment"] = environment

    for command, attr in (("input", "In"), ("output", "Out"), ("error", "Err")):
        value = get(command)
        ad[attr] = value.strip() if value else "/dev/null"
    log = get("log")
    if log:
        ad["UserLog"] = os.path.normpath(os.path.join(iwd, log.strip()))

    cpus_text = get("request_cpus")
    if cpus_text:
        ad["RequestCpus"] = int(cpus_text) if _INT.match(cpus_text.strip()) else expr(cpus_text)
    else:
        ad["RequestCpus"] = 1
    mem_text = get("request_memory")
    if mem_text:
        mib = memory_mib(mem_text)
        ad["RequestMemory"] = mib if mib is not None else expr(mem_text)
    else:
        ad["RequestMemory"] = expr(DEFAULT_REQUEST_MEMORY)
    disk_text = get("request_disk")
    if disk_text:
        kib = disk_kib(disk_text)
        ad["RequestDisk"] = kib if kib is not None else expr(disk_text)
    else:
        ad["RequestDisk"] = expr("DiskUsage")

    transfer = _transfer_attrs(get, ad, iwd)
    _checkpoint_attrs(get, ad)
    # condor_submit adds the Cpus clause only for a request other than its default of one.
    cpus_requested = bool(cpus_text) and ad["RequestCpus"] != 1
    gpus = gpu_attrs(get)
    ad.update(gpus)
    ad["Requirements"] = expr(default_requirements(get("requirements"), universe, cpus_requested, transfer,
                                                   gpus, container_clause, checkpoint=_checkpoint_needs(ad)))
    rank = get("rank")
    ad["Rank"] = expr(rank) if rank else 0.0

    prio = get("priority") or get("prio")
    if prio:
        ad["JobPrio"] = integer(prio, "priority")
    if get("hold") and truth(get("hold") or "", "hold"):
        ad["JobStatus"] = 5
        ad["HoldReason"] = "submitted on hold at user's request"
        ad["HoldReasonCode"] = HOLD_REASON_SUBMITTED_ON_HOLD
        ad["HoldReasonSubCode"] = 0

    for command, attr in (
        ("periodic_hold", "PeriodicHold"),
        ("periodic_release", "PeriodicRelease"),
        ("periodic_remove", "PeriodicRemove"),
        ("on_exit_hold", "OnExitHold"),
    ):
        value = get(command)
        if value:
            ad[attr] = expr(value)
    for command, attr in (
        ("periodic_hold_reason", "PeriodicHoldReason"),
        ("periodic_hold_subcode", "PeriodicHoldSubCode"),
        ("on_exit_hold_reason", "OnExitHoldReason"),
        ("on_exit_hold_subcode", "OnExitHoldSubCode"),
    ):
        value = get(command)
        if value:
            ad[attr] = classad_value(value)
    success = get("success_exit_code")
    if success:
        ad["JobSuccessExitCode"] = integer(success, "success_exit_code")
    retries = get("max_retries")
    on_exit_remove = get("on_exit_remove")
    if retries:
        ad["JobMaxRetries"] = integer(retries, "max_retries")
        code = "JobSuccessExitCode" if success else "0"
        text = f"NumJobCompletions > JobMaxRetries || ExitCode is {code}"
        ad["OnExitRemove"] = expr(f"{text} || {on_exit_remove}" if on_exit_remove else text)
        if "OnExitHold" not in ad:
            ad["OnExitHold"] = False  # condor_submit writes it with max_retries
    elif on_exit_remove:
        ad["OnExitRemove"] = expr(on_exit_remove)

    limits = get("concurrency_limits")
    if limits:
        names = sorted({n.lower() for n in re.split(r"[\s,]+", limits.strip()) if n})
        ad["ConcurrencyLimits"] = ",".join(names)
    batch = get("batch_name")
    if batch:
        ad["JobBatchName"] = batch.strip()[1:-1] if is_v2(batch) else batch.strip()
    max_idle = get("max_idle") or get("materialize_max_idle")
    if max_idle:
        ad["JobMaterializeMaxIdle"] = integer(max_idle, "max_idle")
    max_mat = get("max_materialize")
    if max_mat:
        ad["JobMaterializeLimit"] = integer(max_mat, "max_materialize")
    vacate = get("job_max_vacate_time")
    if vacate:
        ad["JobMaxVacateTime"] = int(vacate) if _INT.match(vacate.strip()) else expr(vacate)
    retirement = get("max_job_retirement_time")
    if retirement:  # how long the job may run on once preempted (the startd's MAXJOBRETIREMENTTIME caps it)
        ad["MaxJobRetirementTime"] = int(retirement) if _INT.match(retirement.strip()) else expr(retirement)
    kill_sig = get("kill_sig")
    if kill_sig:
        ad["KillSig"] = kill_sig.strip()

    # Recorded as HTCondor records them, though gridbus does not act on them.
    notification = get("notification")
    if notification:
        key = notification.strip().lower()
        if key not in NOTIFICATION:
            raise SubmitError(f"notification must be one of {', '.join(NOTIFICATION)}, not {notification!r}")
        ad["JobNotification"] = NOTIFICATION[key]
    for command, attr in (
        ("notify_user", "NotifyUser"),
        ("accounting_group", "AcctGroup"),
        ("accounting_group_user", "AcctGroupUser"),
    ):
        value = get(command)
        if value:
            ad[attr] = value.strip()
    for command, attr in (("stream_output", "StreamOut"), ("stream_error", "StreamErr"), ("leave_in_queue", "LeaveJobInQueue")):
        value = get(command)
        if value:
            ad[attr] = truth(value, command) if command != "leave_in_queue" or value.strip().lower() in ("true", "false") else expr(value)

    for name, value in user_attrs:
        ad[name] = classad_value(value)
    return ad
