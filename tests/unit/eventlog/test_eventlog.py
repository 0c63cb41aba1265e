"""Our event-log writer and reader against htcondor2's JobEventLog (the oracle)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus.eventlog import JobEventLog, JobEventType, writer

htcondor2 = pytest.importorskip("htcondor2")

# A log in HTCondor's format with one event of each kind the reader must know, written by hand
# for this test (data/sample.log); htcondor2 reads it as the oracle.
CANONICAL = Path(__file__).parent / "data" / "sample.log"


def _plain(value):
    # ClassAd values (ExecuteProps) are compared as dicts of their attributes.
    if hasattr(value, "keys") and not isinstance(value, dict):
        return {k.lower(): value[k] for k in value.keys()}
    return value


def _events(reader_cls, path):
    out = []
    for e in reader_cls(str(path)).events(0):
        out.append((int(e.type), e.cluster, e.proc, e.timestamp, {k: _plain(v) for k, v in dict(e).items()}))
    return out


def test_our_reader_reads_canonical_log_as_htcondor2_does(monkeypatch):
    ours = _events(JobEventLog, CANONICAL)
    theirs = _events(htcondor2.JobEventLog, CANONICAL)
    assert len(ours) == len(theirs) == 17
    for mine, ref in zip(ours, theirs, strict=True):
        assert mine[:4] == ref[:4]
        assert mine[4] == ref[4], f"event {mine[0]} differs"
        for key, value in ref[4].items():
            assert type(mine[4][key]) is type(value), key
    text = CANONICAL.read_text()
    assert "".join(str(e) + "...\n" for e in JobEventLog(str(CANONICAL)).events(0)) == text


def test_every_event_we_write_is_read_back_by_htcondor2_byte_for_byte(tmp_path):
    log = tmp_path / "job.log"
    t = 1714557600
    text = "".join([
        writer.submit(7, 0, t, "schedd@host"),
        writer.execute(7, 0, t + 1, "startd@node", "slot1@node"),
        writer.image_size(7, 0, t + 2, 2500, 3, 2400),
        writer.evicted(7, 0, t + 3, 1.0, 0.0),
        writer.evicted(7, 2, t + 3, 0.5, 0.0, requeued=True, exit_code=3,
                       reason="The job attribute OnExitRemove expression 'ExitCode == 0' evaluated to FALSE"),
        writer.evicted(7, 3, t + 3, requeued=True, signal=9),
        writer.held(7, 0, t + 4, "via gridbus hold (by user alice)", 1, 0),
        writer.held(7, 1, t + 4, "", 0, 0),
        writer.released(7, 0, t + 5, "via gridbus release (by user alice)"),
        writer.terminated(7, 0, t + 6, exit_code=2, user_cpu=58, sys_cpu=1, total_user_cpu=59, total_sys_cpu=1),
        writer.terminated(8, 3, t + 7, signal=9),
        writer.aborted(8, 4, t + 8, "via gridbus remove (by user alice)"),
        writer.shadow_exception(9, 0, t + 9, "executable not found"),
        writer.file_transfer(9, 1, t + 10, writer.OUT_STARTED),  # a self-checkpointing job's checkpoint
        writer.file_transfer(9, 1, t + 11, writer.OUT_FINISHED, "slot1@node"),
    ])
    for i in range(0, len(text), 97):  # appended in pieces, as events arrive
        writer.append(log, text[i:i + 97])
    assert log.read_text() == text
    theirs = list(htcondor2.JobEventLog(str(log)).events(0))
    assert "".join(str(e) + "...\n" for e in theirs) == text
    assert [int(e.type) for e in theirs] == [0, 1, 6, 4, 4, 4, 12, 12, 13, 5, 5, 9, 7, 40, 40]
    assert [theirs[13]["Type"], theirs[14]["Type"]] == [htcondor2.FileTransferEventType.OUT_STARTED,
                                                        htcondor2.FileTransferEventType.OUT_FINISHED]
    assert theirs[9]["ReturnValue"] == 2 and theirs[10]["TerminatedBySignal"] == 9
    # A run whose exit its policy requeued, in HTCondor's "terminated and was requeued" form.
    assert not theirs[3]["TerminatedAndRequeued"]
    assert theirs[4]["TerminatedAndRequeued"] and theirs[4]["TerminatedNormally"] and theirs[4]["ReturnValue"] == 3
    assert theirs[4]["Reason"] == "The job attribute OnExitRemove expression 'ExitCode == 0' evaluated to FALSE"
    assert theirs[5]["TerminatedAndRequeued"] and theirs[5]["TerminatedBySignal"] == 9
    assert _events(JobEventLog, log) == _events(htcondor2.JobEventLog, log)


def test_reader_waits_for_the_separator_and_follows_appends(tmp_path):
    log = tmp_path / "f.log"
    whole = writer.submit(1, 0, 1714557600, "h")
    log.write_text(whole[:-4])  # no "..." yet: not an event
    reader = JobEventLog(str(log))
    assert list(reader.events(0)) == []
    writer.append(log, whole[-4:] + writer.held(1, 0, 1714557601, "why", 1, 0))
    got = list(reader.events(0))
    assert [e.type for e in got] == [JobEventType.SUBMIT, JobEventType.JOB_HELD]
    assert got[1]["HoldReason"] == "why"
    reader.close()


def test_unknown_event_code_is_refused():
    from gridbus.eventlog import parse_event

    with pytest.raises(ValueError, match="99"):
        parse_event("099 (001.000.000) 2024-05-01 10:00:00 Something")
