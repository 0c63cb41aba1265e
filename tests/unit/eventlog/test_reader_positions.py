"""The reader cuts events by position: CRLF logs split anywhere between reads, and long logs."""

from __future__ import annotations

from pathlib import Path

from gridbus.eventlog import JobEventLog, JobEventType, writer


def test_crlf_split_between_reads(tmp_path: Path):
    text = (writer.submit(1, 0, 0, "h", "DAG Node: A") + writer.terminated(1, 0, 0, exit_code=3)).replace("\n", "\r\n")
    log = tmp_path / "u.log"
    cut = text.index("\r\n...") + 1  # the first event's separator line starts with a lone \n
    log.write_bytes(text[:cut].encode())
    reader = JobEventLog(log)
    assert list(reader.events(0)) == []
    with log.open("ab") as f:
        f.write(text[cut:].encode())
    events = list(reader.events(0))
    assert [e.type for e in events] == [JobEventType.SUBMIT, JobEventType.JOB_TERMINATED]
    assert events[0]["LogNotes"] == "DAG Node: A" and events[1]["ReturnValue"] == 3


def test_a_long_log_reads_every_event(tmp_path: Path):
    log = tmp_path / "u.log"
    log.write_text("".join(writer.submit(i, 0, 0, "h") + writer.execute(i, 0, 0, "h") for i in range(3000)))
    events = list(JobEventLog(log).events(0))
    assert len(events) == 6000 and events[-1].cluster == 2999 and events[-1].type == JobEventType.EXECUTE
