"""Writing the user job event log in HTCondor's format (src/condor_utils/condor_event.cpp).

Each event is a header ``NNN (ccc.ppp.sss) YYYY-MM-DD HH:MM:SS <first line>``, body lines, and a
line ``...``. The text is what htcondor2's JobEventLog reads and what `str(event)` gives back byte
for byte. Appending takes no lock: the file is opened with O_APPEND
and each batch of events goes out in one write(), which POSIX keeps whole (HTCondor dropped its
user-log locks for the same reason: HTCondor Week 2015's "What's new in HTCondor", "no match for POSIX append semantics").
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterable

SUBMIT = 0
EXECUTE = 1
JOB_EVICTED = 4
JOB_TERMINATED = 5
IMAGE_SIZE = 6
SHADOW_EXCEPTION = 7
JOB_ABORTED = 9
JOB_SUSPENDED = 10
JOB_UNSUSPENDED = 11
JOB_HELD = 12
JOB_RELEASED = 13
FILE_TRANSFER = 40

# FileTransferEvent's types, as HTCondor numbers and words them (its FileTransferEventType).
FILE_TRANSFER_TYPES = {
    1: "Entered queue to transfer input files",
    2: "Started transferring input files",
    3: "Finished transferring input files",
    4: "Entered queue to transfer output files",
    5: "Started transferring output files",
    6: "Finished transferring output files",
}
OUT_STARTED, OUT_FINISHED = 5, 6


def header(code: int, cluster: int, proc: int, when: float, first_line: str, subproc: int = 0) -> str:
    return f"{code:03d} ({cluster:03d}.{proc:03d}.{subproc:03d}) {_stamp(int(when))} {first_line}\n"


@functools.lru_cache(maxsize=8)
def _stamp(second: int) -> str:
    # A busy schedd writes thousands of events in the same few seconds: each second's text once.
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))


def event(code: int, cluster: int, proc: int, when: float, first_line: str, body: Iterable[str] = ()) -> str:
    """One event's text: header, body lines (already indented), and the ``...`` separator."""
    return header(code, cluster, proc, when, first_line) + "".join(f"{line}\n" for line in body) + "...\n"


def _one_line(text: str) -> str:
    # A reason with a newline would end the event early for every reader.
    return " ".join(str(text).split())


def rusage(seconds_user: float, seconds_sys: float) -> str:
    """``Usr D HH:MM:SS, Sys D HH:MM:SS`` as HTCondor prints a struct rusage."""
    return f"Usr {_duration(max(0, int(seconds_user)))}, Sys {_duration(max(0, int(seconds_sys)))}"


@functools.lru_cache(maxsize=256)
def _duration(s: int) -> str:
    # (A terminated event prints four of these, most of them the same few short times.)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    return f"{days} {hours:02d}:{minutes:02d}:{s:02d}"


def submit(cluster: int, proc: int, when: float, host: str, notes: str | None = None) -> str:
    # LogNotes (DAGMan's "DAG Node: <name>") is the submit event's second line, as HTCondor writes it.
    body = [f"    {_one_line(notes)}"] if notes else []
    return event(SUBMIT, cluster, proc, when, f"Job submitted from host: {host}", body)


def execute(cluster: int, proc: int, when: float, host: str, slot: str = "") -> str:
    body = [f"\tSlotName: {_one_line(slot)}"] if slot else []
    return event(EXECUTE, cluster, proc, when, f"Job executing on host: {host}", body)


def evicted(cluster: int, proc: int, when: float, user_cpu: float = 0.0, sys_cpu: float = 0.0,
            sent: int = 0, received: int = 0, *, requeued: bool = False, exit_code: int | None = None,
            signal: int | None = None, reason: str | None = None) -> str:
    """A run that ended without completing the job. ``requeued``: the job exited and its policy
    (OnExitRemove false, JobMaxRetries) sent it back to the queue: HTCondor's "Job terminated and
    was requeued" form, with how it exited (``exit_code``, or ``signal``) and ``reason``."""
    body = [
        "\t(0) Job terminated and was requeued" if requeued else "\t(0) CPU times",
        f"\t\t{rusage(user_cpu, sys_cpu)}  -  Run Remote Usage",
        f"\t\t{rusage(0, 0)}  -  Run Local Usage",
        f"\t{int(sent)}  -  Run Bytes Sent By Job",
        f"\t{int(received)}  -  Run Bytes Received By Job",
    ]
    if requeued:
        if signal is not None:
            body += [f"\t(0) Abnormal termination (signal {int(signal)})", "\t(0) No core file"]
        else:
            body.append(f"\t(1) Normal termination (return value {int(exit_code or 0)})")
    if reason:
        body.append(f"\t{_one_line(reason)}")
    return event(JOB_EVICTED, cluster, proc, when, "Job was evicted.", body)


def terminated(
    cluster: int,
    proc: int,
    when: float,
    *,
    exit_code: int | None = None,
    signal: int | None = None,
    user_cpu: float = 0.0,
    sys_cpu: float = 0.0,
    total_user_cpu: float | None = None,
    total_sys_cpu: float | None = None,
    sent: int = 0,
    received: int = 0,
    total_sent: int | None = None,
    total_received: int | None = None,
) -> str:
    """Event 005: a normal exit (``exit_code``) or a death by ``signal``. ``sent`` and
    ``received``: this run's bytes from the job's side; the totals add up every run (default:
    this run's)."""
    if signal is not None:
        body = [f"\t(0) Abnormal termination (signal {int(signal)})", "\t(0) No core file"]
    else:
        body = [f"\t(1) Normal termination (return value {int(exit_code or 0)})"]
    tu = user_cpu if total_user_cpu is None else total_user_cpu
    ts = sys_cpu if total_sys_cpu is None else total_sys_cpu
    body += [
        f"\t\t{rusage(user_cpu, sys_cpu)}  -  Run Remote Usage",
        f"\t\t{rusage(0, 0)}  -  Run Local Usage",
        f"\t\t{rusage(tu, ts)}  -  Total Remote Usage",
        f"\t\t{rusage(0, 0)}  -  Total Local Usage",
        f"\t{int(sent)}  -  Run Bytes Sent By Job",
        f"\t{int(received)}  -  Run Bytes Received By Job",
        f"\t{int(sent if total_sent is None else total_sent)}  -  Total Bytes Sent By Job",
        f"\t{int(received if total_received is None else total_received)}  -  Total Bytes Received By Job",
    ]
    return event(JOB_TERMINATED, cluster, proc, when, "Job terminated.", body)


def image_size(cluster: int, proc: int, when: float, size_kib: int, memory_mib: int | None = None,
               rss_kib: int | None = None) -> str:
    body = []
    if memory_mib is not None:
        body.append(f"\t{int(memory_mib)}  -  MemoryUsage of job (MB)")
    if rss_kib is not None:
        body.append(f"\t{int(rss_kib)}  -  ResidentSetSize of job (KB)")
    return event(IMAGE_SIZE, cluster, proc, when, f"Image size of job updated: {int(size_kib)}", body)


def suspended(cluster: int, proc: int, when: float, processes: int) -> str:
    """Event 010: the job's processes were suspended (condor_suspend)."""
    return event(JOB_SUSPENDED, cluster, proc, when, "Job was suspended.",
                 [f"\tNumber of processes actually suspended: {int(processes)}"])


def unsuspended(cluster: int, proc: int, when: float) -> str:
    """Event 011: the job runs again (condor_continue)."""
    return event(JOB_UNSUSPENDED, cluster, proc, when, "Job was unsuspended.")


def held(cluster: int, proc: int, when: float, reason: str, code: int = 0, subcode: int = 0) -> str:
    first = f"\t{_one_line(reason)}" if reason else "\tReason unspecified"
    return event(JOB_HELD, cluster, proc, when, "Job was held.", [first, f"\tCode {int(code)} Subcode {int(subcode)}"])


def released(cluster: int, proc: int, when: float, reason: str) -> str:
    body = [f"\t{_one_line(reason)}"] if reason else []
    return event(JOB_RELEASED, cluster, proc, when, "Job was released.", body)


def aborted(cluster: int, proc: int, when: float, reason: str) -> str:
    body = [f"\t{_one_line(reason)}"] if reason else []
    return event(JOB_ABORTED, cluster, proc, when, "Job was aborted.", body)


def shadow_exception(cluster: int, proc: int, when: float, message: str, sent: int = 0, received: int = 0) -> str:
    body = [f"\t{_one_line(message)}", f"\t{int(sent)}  -  Run Bytes Sent By Job",
            f"\t{int(received)}  -  Run Bytes Received By Job"]
    return event(SHADOW_EXCEPTION, cluster, proc, when, "Shadow exception!", body)


def file_transfer(cluster: int, proc: int, when: float, kind: int, host: str = "") -> str:
    """A file transfer's step (``kind``: FILE_TRANSFER_TYPES); HTCondor's shadow writes the output
    pair for each checkpoint a self-checkpointing job sends, as for its output."""
    body = [f"\tTransferring to host: {_one_line(host)}"] if host else []
    return event(FILE_TRANSFER, cluster, proc, when, FILE_TRANSFER_TYPES[kind], body)


def append(path: str | os.PathLike[str], text: str) -> None:
    """Append events to a user log: one O_APPEND write, no lock (see the module doc)."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        while written < len(data):  # a short write (full disk, signal): finish what is left
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)
