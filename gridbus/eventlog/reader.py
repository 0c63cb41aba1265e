"""Reading a user job event log, as htcondor2's `JobEventLog` does.

    for event in JobEventLog("job.log").events(stop_after=0):
        event.type, event.cluster, event.proc, event.timestamp, dict(event), str(event)

`events(stop_after)` follows htcondor2: 0 returns what is in the file now, None waits for more
forever, N waits up to N seconds for the next event. An event is returned only once its ``...``
line is written, so a reader never sees half an event. Each event is a read-only mapping of the
attributes htcondor2 gives it (Cluster, Proc, Subproc, EventTime, MyType, EventTypeNumber and the
event's own), and `str(event)` is its text as written.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from collections.abc import Iterator, Mapping
from enum import IntEnum
from typing import Any

from gridbus.errors import HTCondorValueError


class JobEventType(IntEnum):
    SUBMIT = 0
    EXECUTE = 1
    EXECUTABLE_ERROR = 2
    CHECKPOINTED = 3
    JOB_EVICTED = 4
    JOB_TERMINATED = 5
    IMAGE_SIZE = 6
    SHADOW_EXCEPTION = 7
    GENERIC = 8
    JOB_ABORTED = 9
    JOB_SUSPENDED = 10
    JOB_UNSUSPENDED = 11
    JOB_HELD = 12
    JOB_RELEASED = 13
    NODE_EXECUTE = 14
    NODE_TERMINATED = 15
    POST_SCRIPT_TERMINATED = 16
    GLOBUS_SUBMIT = 17
    GLOBUS_SUBMIT_FAILED = 18
    GLOBUS_RESOURCE_UP = 19
    GLOBUS_RESOURCE_DOWN = 20
    REMOTE_ERROR = 21
    JOB_DISCONNECTED = 22
    JOB_RECONNECTED = 23
    JOB_RECONNECT_FAILED = 24
    GRID_RESOURCE_UP = 25
    GRID_RESOURCE_DOWN = 26
    GRID_SUBMIT = 27
    JOB_AD_INFORMATION = 28
    JOB_STATUS_UNKNOWN = 29
    JOB_STATUS_KNOWN = 30
    JOB_STAGE_IN = 31
    JOB_STAGE_OUT = 32
    ATTRIBUTE_UPDATE = 33
    PRESKIP = 34
    CLUSTER_SUBMIT = 35
    CLUSTER_REMOVE = 36
    FACTORY_PAUSED = 37
    FACTORY_RESUMED = 38
    NONE = 39
    FILE_TRANSFER = 40
    RESERVE_SPACE = 41
    RELEASE_SPACE = 42
    FILE_COMPLETE = 43
    FILE_USED = 44
    FILE_REMOVED = 45
    DATAFLOW_JOB_SKIPPED = 46
    COMMON_FILES = 47
    EP_STARTUP = 100
    EP_READY = 101
    EP_RECONFIG = 102
    EP_SHUTDOWN = 103
    EP_REQUEST_CLAIM = 104
    EP_RELEASE_CLAIM = 105
    EP_ACTIVATE_CLAIM = 106
    EP_DEACTIVATE_CLAIM = 107
    EP_VACATE_CLAIM = 108
    EP_DRAIN = 109
    EP_RESOURCE_BREAK = 110
    EP_RESOURCE_MEND = 111


# MyType of each event's ad (condor_event.cpp's toClassAd).
MY_TYPES = {
    0: "SubmitEvent", 1: "ExecuteEvent", 2: "ExecutableErrorEvent", 3: "CheckpointedEvent",
    4: "JobEvictedEvent", 5: "JobTerminatedEvent", 6: "JobImageSizeEvent", 7: "ShadowExceptionEvent",
    8: "GenericEvent", 9: "JobAbortedEvent", 10: "JobSuspendedEvent", 11: "JobUnsuspendedEvent",
    12: "JobHeldEvent", 13: "JobReleaseEvent", 16: "PostScriptTerminatedEvent", 21: "RemoteErrorEvent", 22: "JobDisconnectedEvent",
    23: "JobReconnectedEvent", 24: "JobReconnectFailedEvent", 28: "JobAdInformationEvent",
    33: "AttributeUpdateEvent", 35: "ClusterSubmitEvent", 36: "ClusterRemoveEvent", 40: "FileTransferEvent",
}

_HEADER = re.compile(
    r"(\d{3}) \((\d+)\.(\d+)\.(\d+)\) "
    r"(?:(\d{4})-(\d{2})-(\d{2})|(\d{2})/(\d{2})) (\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z)? ?(.*)"
)
_RUSAGE = re.compile(r"\s*(Usr \d+ \d\d:\d\d:\d\d, Sys \d+ \d\d:\d\d:\d\d)\s+-\s+(Run|Total) (Remote|Local) Usage\s*")
_BYTES = re.compile(r"\s*([\d.eE+-]+)\s+-\s+(Run|Total) Bytes (Sent By|Received By) Job\s*")
_TRANSFER = {
    "Entered queue to transfer input files": 1, "Started transferring input files": 2,
    "Finished transferring input files": 3, "Entered queue to transfer output files": 4,
    "Started transferring output files": 5, "Finished transferring output files": 6,
}
_USAGE_ROW = re.compile(r"\s*(\w+)(?: \((?:KB|MB)\))?\s*:\s*(\S+)\s+(\S+)\s+(\S+)\s*(\S*)\s*$")


class JobEvent(Mapping[str, Any]):
    """One event: its type, job id, time, attributes (a mapping) and text (`str()`)."""

    def __init__(self, etype: JobEventType, cluster: int, proc: int, timestamp: int, attrs: dict[str, Any], text: str):
        self.type = etype
        self.cluster = cluster
        self.proc = proc
        self.timestamp = timestamp
        self._attrs = attrs
        self._text = text

    def __getitem__(self, key: str) -> Any:
        return self._attrs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"JobEvent({self.type!r}, {self.cluster}.{self.proc}, {self.timestamp})"


_SEPARATOR = re.compile(rb"^\.\.\.\n", re.MULTILINE)


class JobEventLog:
    """A user log, read event by event (htcondor2.JobEventLog)."""

    def __init__(self, filename: str | os.PathLike[str]):
        self.filename = os.fspath(filename)
        self._fh = open(self.filename, "rb")  # noqa: SIM115 (kept open to follow the file)
        self._buffer = b""
        self._pos = 0  # where the next event starts in the buffer
        self._cr = b""  # a CR that ended the last read
        self._deadline: float | None = None
        self._wait = True

    def events(self, stop_after: int | None = None) -> JobEventLog:
        """Iterate; ``stop_after`` 0: stop at the end of the file, None: wait forever, N: wait N s."""
        self._wait = stop_after != 0
        self._deadline = None if stop_after is None else time.monotonic() + stop_after
        return self

    def __iter__(self) -> JobEventLog:
        return self

    def __next__(self) -> JobEvent:
        while True:
            text = self._next_text()
            if text is not None:
                return parse_event(text)
            if not self._wait or (self._deadline is not None and time.monotonic() >= self._deadline):
                raise StopIteration
            time.sleep(0.05)  # follow mode: poll the file for the writer's next append

    def _next_text(self) -> str | None:
        # Events are cut from the buffer by position, and line ends normalised once as text
        # arrives: a log of 10,000 jobs read in one go stays linear (copying the rest of the
        # buffer for every event made it quadratic).
        chunk = self._fh.read()
        if chunk:
            data = self._cr + chunk
            self._cr = b"\r" if data.endswith(b"\r") else b""  # its \n may come with the next read
            self._buffer += data[: len(data) - len(self._cr)].replace(b"\r\n", b"\n")
        while True:
            m = _SEPARATOR.search(self._buffer, self._pos)
            if m is None:
                self._buffer, self._pos = self._buffer[self._pos:], 0
                return None
            text = self._buffer[self._pos: m.start()].decode("utf-8", "replace")
            self._pos = m.end()
            if text.strip():
                return text

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JobEventLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _stamp(m: re.Match[str]) -> tuple[int, str]:
    if m.group(5):
        year, month, day = int(m.group(5)), int(m.group(6)), int(m.group(7))
    else:  # legacy MM/DD: HTCondor assumes the current year
        year, month, day = time.localtime().tm_year, int(m.group(8)), int(m.group(9))
    hms = (int(m.group(10)), int(m.group(11)), int(m.group(12)))
    when = _dt.datetime(year, month, day, *hms)
    if m.group(14):
        epoch = int(when.replace(tzinfo=_dt.UTC).timestamp())
    else:
        epoch = int(time.mktime(when.timetuple()))
    return epoch, when.strftime("%Y-%m-%dT%H:%M:%S")


def _value(text: str) -> Any:
    from gridbus import classad

    try:
        return classad.ExprTree(text).eval()
    except Exception:
        return text


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_event(text: str) -> JobEvent:
    """One event's text (without its ``...`` line) -> JobEvent; ValueError if it is not one."""
    lines = text.rstrip("\n").split("\n")
    m = _HEADER.fullmatch(lines[0])
    if m is None:
        raise HTCondorValueError(f"not a job event header: {lines[0][:80]!r}")
    code = int(m.group(1))
    etype = JobEventType(code)  # an unknown code raises ValueError, as htcondor2 does
    cluster, proc, subproc = int(m.group(2)), int(m.group(3)), int(m.group(4))
    epoch, iso = _stamp(m)
    first, body = m.group(15), lines[1:]
    attrs: dict[str, Any] = {"Cluster": cluster, "Proc": proc, "Subproc": subproc, "EventTime": iso,
                             "MyType": MY_TYPES.get(code, "GenericEvent"), "EventTypeNumber": code}
    _BODY.get(code, _generic)(first, body, attrs)
    return JobEvent(etype, cluster, proc, epoch, attrs, text)


# ---------------------------------------------------------------------- event bodies
def _generic(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    if first:
        attrs.setdefault("Info", first)


def _usage_and_bytes(body: list[str], attrs: dict[str, Any]) -> None:
    in_table = False
    for line in body:
        r = _RUSAGE.fullmatch(line)
        if r:
            attrs[f"{r.group(2)}{r.group(3)}Usage"] = r.group(1)
            continue
        b = _BYTES.fullmatch(line)
        if b:
            name = ("Sent" if b.group(3) == "Sent By" else "Received") + "Bytes"
            attrs[name if b.group(2) == "Run" else f"Total{name}"] = float(b.group(1))
            continue
        if "Partitionable Resources" in line:
            in_table = True
            continue
        if in_table:
            u = _USAGE_ROW.fullmatch(line)
            if u:
                res, usage, request, allocated = u.group(1), u.group(2), u.group(3), u.group(4)
                attrs[f"{res}Usage"] = _number(usage)
                attrs[f"Request{res}"] = _number(request)
                attrs[res] = _number(allocated)


def _submit(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    attrs["SubmitHost"] = first.removeprefix("Job submitted from host: ").strip()
    notes = [line.strip() for line in body if line.strip()]
    if notes:
        attrs["LogNotes"] = notes[0]
    if len(notes) > 1:
        attrs["UserNotes"] = notes[1]


def _execute(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    attrs["ExecuteHost"] = first.removeprefix("Job executing on host: ").strip()
    props = []
    for line in body:
        s = line.strip()
        if s.startswith("SlotName:"):
            attrs["SlotName"] = s.removeprefix("SlotName:").strip()
        elif "=" in s:
            props.append(s)
    if props:
        from gridbus import classad

        attrs["ExecuteProps"] = classad.parseOne("\n".join(props))


def _evicted(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    attrs["Checkpointed"] = False
    attrs["TerminatedAndRequeued"] = False
    attrs["TerminatedNormally"] = False
    # The usage and bytes lines, then (terminated and requeued) how the job exited, then an
    # optional line of its own: the reason.
    tail = 0
    for i, line in enumerate(body):
        s = line.strip()
        if s.startswith("(1) Job was checkpointed"):
            attrs["Checkpointed"] = True
        elif s.startswith("(0) Job terminated and was requeued"):
            attrs["TerminatedAndRequeued"] = True
        elif "  -  " in s:
            tail = i + 1
    rest = [line.strip() for line in body[tail:] if line.strip()]
    if attrs["TerminatedAndRequeued"] and rest and _termination(rest[0], attrs):
        rest = rest[2:] if rest[1:] and _termination(rest[1], attrs) else rest[1:]
    if rest:
        attrs["Reason"] = rest[0]
    _usage_and_bytes(body, attrs)


def _termination(s: str, attrs: dict[str, Any]) -> bool:
    """A line of how a job exited (a terminated event's, or a requeued eviction's) into ``attrs``."""
    normal = re.fullmatch(r"\(1\) Normal termination \(return value (-?\d+)\)", s)
    signal = re.fullmatch(r"\(0\) Abnormal termination \(signal (\d+)\)", s)
    if normal:
        attrs["TerminatedNormally"] = True
        attrs["ReturnValue"] = int(normal.group(1))
    elif signal:
        attrs["TerminatedNormally"] = False
        attrs["TerminatedBySignal"] = int(signal.group(1))
    elif s.startswith("(1) Corefile in:"):
        attrs["CoreFile"] = s.removeprefix("(1) Corefile in:").strip()
    elif s != "(0) No core file":
        return False
    return True


def _terminated(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    for line in body:
        _termination(line.strip(), attrs)
    _usage_and_bytes(body, attrs)


def _post_script_terminated(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    """Event 016, which DAGMan writes to a node job's log when the node's POST script ends."""
    for line in body:
        s = line.strip()
        if s.startswith("DAG Node:"):
            attrs["DAGNodeName"] = s.removeprefix("DAG Node:").strip()
        else:
            _termination(s, attrs)


def _image_size(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    attrs["Size"] = int(first.removeprefix("Image size of job updated:").strip())
    for line in body:
        m = re.fullmatch(r"\s*(-?\d+)\s+-\s+(MemoryUsage|ResidentSetSize|ProportionalSetSize) of job \((?:MB|KB)\)\s*", line)
        if m:
            attrs[m.group(2)] = int(m.group(1))


def _shadow_exception(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    if body and not _BYTES.fullmatch(body[0]):
        attrs["Message"] = body[0].strip()
    _usage_and_bytes(body, attrs)


def _no_body(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    pass


def _suspended(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    for line in body:
        m = re.fullmatch(r"\s*Number of processes actually suspended: (-?\d+)\s*", line)
        if m:
            attrs["NumberOfPIDs"] = int(m.group(1))


def _held(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    for line in body:
        s = line.strip()
        code = re.fullmatch(r"Code (-?\d+) Subcode (-?\d+)", s)
        if code:
            attrs["HoldReasonCode"] = int(code.group(1))
            attrs["HoldReasonSubCode"] = int(code.group(2))
        elif s and s != "Reason unspecified" and "HoldReason" not in attrs:
            attrs["HoldReason"] = s


def _reason(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    for line in body:
        if line.strip():
            attrs["Reason"] = line.strip()
            break


def _ad_information(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    fixed = {"Cluster", "Proc", "Subproc", "EventTime", "MyType", "EventTypeNumber"}
    for line in body:
        name, sep, value = line.partition(" = ")
        if sep and name.strip() not in fixed:
            attrs[name.strip()] = _value(value.strip())


def _disconnected(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    attrs["EventDescription"] = first.strip()
    for line in body:
        s = line.strip()
        m = re.fullmatch(r"Trying to reconnect to (\S+) (\S+)", s)
        if m:
            attrs["StartdName"], attrs["StartdAddr"] = m.group(1), m.group(2)
        elif s and "DisconnectReason" not in attrs:
            attrs["DisconnectReason"] = s


def _reconnected(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    m = re.fullmatch(r"Job reconnected to (\S+)", first.strip())
    attrs["EventDescription"] = "Job reconnected"
    if m:
        attrs["StartdName"] = m.group(1)
    for line in body:
        s = line.strip()
        if s.startswith("startd address:"):
            attrs["StartdAddr"] = s.removeprefix("startd address:").strip()
        elif s.startswith("starter address:"):
            attrs["StarterAddr"] = s.removeprefix("starter address:").strip()


def _file_transfer(first: str, body: list[str], attrs: dict[str, Any]) -> None:
    attrs["Type"] = _TRANSFER.get(first.strip(), 0)
    for line in body:
        s = line.strip()
        if s.startswith("Transferring to host:"):
            attrs["Host"] = s.removeprefix("Transferring to host:").strip()
        elif s.startswith("Seconds spent in queue:"):
            attrs["QueueingDelay"] = _number(s.removeprefix("Seconds spent in queue:").strip())


_BODY = {
    0: _submit, 1: _execute, 4: _evicted, 5: _terminated, 6: _image_size, 7: _shadow_exception,
    9: _reason, 10: _suspended, 11: _no_body, 12: _held, 13: _reason, 16: _post_script_terminated, 22: _disconnected, 23: _reconnected, 28: _ad_information,
    40: _file_transfer,
}
