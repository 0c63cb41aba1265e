"""The job state log (the DAG's JOBSTATE_LOG command): DAGMan's machine-readable history, as
HTCondor's condor_dagman writes it.

One line per event, appended, fields separated by one space, each line starting with the Unix time:

    <time> INTERNAL *** DAGMAN_STARTED <cluster>.<proc> ***
    <time> INTERNAL *** RECOVERY_STARTED ***            (and RECOVERY_FINISHED / RECOVERY_FAILURE)
    <time> <node> <event> <cluster>.<proc> <job tag> - <sequence number>
    <time> INTERNAL *** DAGMAN_FINISHED <exit code> ***

A node line's event is a job event's name as read from the nodes log (SUBMIT, EXECUTE,
JOB_TERMINATED, POST_SCRIPT_TERMINATED, ...) or one of DAGMan's own: PRE_SCRIPT_STARTED,
PRE_SCRIPT_SUCCESS / _FAILURE, SUBMIT_FAILURE, JOB_SUCCESS / JOB_FAILURE (whose third field is the
return value), POST_SCRIPT_STARTED, POST_SCRIPT_SUCCESS / _FAILURE. The third field is ``-`` before
the node has a job. The job tag is the node submit file's ``+pegasus_site`` (or the attribute
``+job_tag_name`` names), ``-`` without one. A node takes the next sequence number at its first
line, and a new one on each retry.

Made-up events (JOB_SUCCESS, the scripts') carry the time of the node's last real event, as
HTCondor's do, so recovery can tell what it already wrote: in recovery a line older than the last
pre-recovery node line is not written again, nor one of the same second already in the file.
"""

from __future__ import annotations

import time
from pathlib import Path

INTERNAL = "INTERNAL"
JOB_TAG_NAME = "+job_tag_name"
PEGASUS_SITE = "+pegasus_site"


class JobstateLog:
    def __init__(self, path: Path, clock=time.time):
        self.path = path
        self.clock = clock
        self.next_seq = 1
        self.seq: dict[str, int] = {}
        self.tags: dict[str, str] = {}
        self.last_time: dict[str, int] = {}  # a node's last real event time
        self._recovery_floor = 0
        self._recovery_lines: set[str] = set()

    # ------------------------------------------------------------------ DAGMan's own lines
    def dagman_started(self, cluster: int, proc: int = 0) -> None:
        self._write(None, f"{INTERNAL} *** DAGMAN_STARTED {cluster}.{proc} ***")

    def dagman_finished(self, code: int) -> None:
        self._write(None, f"{INTERNAL} *** DAGMAN_FINISHED {code} ***")

    def recovery_started(self) -> None:
        self._write(None, f"{INTERNAL} *** RECOVERY_STARTED ***")
        self._read_for_recovery()

    def recovery_finished(self) -> None:
        self._write(None, f"{INTERNAL} *** RECOVERY_FINISHED ***")
        self._recovery_floor, self._recovery_lines = 0, set()

    # ------------------------------------------------------------------ node lines
    def event(self, node: str, name: str, cluster: int, proc: int, when: int, submit_file: Path | None) -> None:
        """A job event of the node's job, as read from the nodes log."""
        self.last_time[node] = when
        self._node(node, name, f"{cluster}.{proc}", when, submit_file)

    def made_up(self, node: str, name: str, third: str, submit_file: Path | None) -> None:
        """One of DAGMan's own node lines (scripts, JOB_SUCCESS...), at the node's last event time."""
        self._node(node, name, third, self.last_time.get(node, 0), submit_file)

    def retried(self, node: str) -> None:
        self.seq.pop(node, None)

    def _node(self, node: str, name: str, third: str, when: int, submit_file: Path | None) -> None:
        if node not in self.seq:
            self.seq[node] = self.next_seq
            self.next_seq += 1
        tag = self.tags.get(node)
        if tag is None:
            tag = self.tags[node] = job_tag(submit_file)
        self._write(when, f"{node} {name} {third} {tag} - {self.seq[node]}")

    # ------------------------------------------------------------------ the file
    def _write(self, when: int | None, info: str) -> None:
        stamp = int(when) if when else int(self.clock())
        if stamp < self._recovery_floor:
            return
        line = f"{stamp} {info}"
        if stamp == self._recovery_floor and line in self._recovery_lines:
            return
        with open(self.path, "a") as fh:
            fh.write(line + "\n")

    def _read_for_recovery(self) -> None:
        """The last pre-recovery node line's time and the lines of that second; the nodes'
        sequence numbers as they were, so lines written again in recovery match the old ones."""
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return
        floor, same = 0, set[str]()
        for line in lines:
            words = line.split(" ")
            if len(words) < 7 or words[1] == INTERNAL or not words[0].isdigit() or not words[6].isdigit():
                continue
            stamp, node, seq = int(words[0]), words[1], int(words[6])
            self.seq[node] = seq
            self.next_seq = max(self.next_seq, seq + 1)
            if stamp > floor:
                floor, same = stamp, set()
            if stamp == floor:
                same.add(line)
        self._recovery_floor, self._recovery_lines = floor, same


def job_tag(submit_file: Path | None) -> str:
    """The node's job tag: the value of ``+pegasus_site`` in its submit file, or of the attribute
    that ``+job_tag_name`` names, without quotes; ``-`` when there is none."""
    if submit_file is None:
        return "-"
    try:
        text = submit_file.read_text()
    except OSError:
        return "-"
    values: dict[str, str] = {}
    for raw in text.splitlines():
        name, sep, value = raw.strip().partition("=")
        if sep:
            values[name.strip().lower()] = _unquote(value.strip())
    tag_name = values.get(JOB_TAG_NAME) or PEGASUS_SITE
    return values.get(tag_name.lower()) or "-"


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text
