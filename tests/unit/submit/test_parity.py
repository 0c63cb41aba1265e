"""Submit parity with HTCondor: the job ads gridbus makes from every corpus file agree with the ones
HTCondor 24's own submit code makes (htcondor v1 `Submit.jobs()`, run in its own interpreter).

Compared: job count and order, and Cmd, Args/Arguments, Environment, Iwd, In/Out/Err, UserLog,
RequestCpus/RequestMemory/RequestDisk, JobUniverse, Requirements, Rank, JobStatus, JobPrio, the hold,
policy, retry, limit, batch and materialization attributes, the file-transfer and self-checkpointing attributes, the GPU requests, and every
custom (+Attr/MY.Attr) attribute. Values are compared as ClassAd expressions, each side canonicalised by classad2.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gridbus.submit import Submit
from tests.unit.submit.oracle import run_oracle

CORPUS = Path(__file__).with_name("corpus")
WORKDIR = CORPUS / "workdir"
CLUSTER, QDATE = 5, 1700000000
FILES = sorted(p.name for p in CORPUS.glob("*.sub"))

COMPARED = [
    "ClusterId", "ProcId", "Cmd", "Args", "Arguments", "Environment", "Env", "EnvDelim", "Iwd", "In", "Out", "Err", "UserLog",
    "RequestCpus", "RequestMemory", "RequestDisk", "JobUniverse", "Requirements", "Rank", "JobStatus", "JobPrio",
    "HoldReason", "HoldReasonCode", "PeriodicHold", "PeriodicRelease", "PeriodicRemove", "OnExitHold",
    "OnExitRemove", "JobMaxRetries", "JobSuccessExitCode", "ConcurrencyLimits", "JobBatchName",
    "JobMaterializeMaxIdle", "QDate", "EnteredCurrentStatus", "MyType", "TargetType", "JobSubmitMethod",
    "ImageSize", "DiskUsage", "ExecutableSize", "MinHosts", "MaxHosts", "NumJobStarts",
    "ShouldTransferFiles", "WhenToTransferOutput", "TransferInput", "TransferOutput", "TransferOutputRemaps",
    "TransferExecutable", "TransferIn", "TransferOut", "TransferErr", "StreamIn", "StreamOut", "StreamErr",
    "TransferInputSizeMB", "FileSystemDomain", "RequestGPUs", "RequireGPUs", "GPUsMinCapability", "GPUsMaxCapability",
    "GPUsMinMemory", "GPUsMinRuntime", "SuccessCheckpointExitCode", "WantFTOnCheckpoint", "TransferCheckpoint",
    "EraseOutputAndErrorOnRestart", "NumCkpts",
]
PRESENCE_ONLY = {"FileSystemDomain"}  # its value is the host's: only whether it is set is compared


def test_corpus_is_big_enough():
    assert len(FILES) >= 30


@pytest.fixture(scope="module")
def oracle() -> dict:
    return run_oracle(CORPUS, WORKDIR, CLUSTER, QDATE)


def _canon(text: str) -> str:
    import classad2

    return str(classad2.ExprTree(text))


def _text(value: Any) -> str:
    """A gridbus ad value as ClassAd text."""
    import classad2

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return classad2.quote(value)
    return str(value)  # an ExprTree


def _custom_attrs(text: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"(?im)^\s*(\+|my\.)([A-Za-z_][A-Za-z0-9_]*)\s*=", text)]


@pytest.mark.parametrize("name", FILES)
def test_job_ads_agree_with_htcondor(name: str, oracle: dict, monkeypatch: pytest.MonkeyPatch):
    expected = oracle[name]
    assert "error" not in expected, f"HTCondor refused {name}: {expected.get('error')}"
    text = (CORPUS / name).read_text()
    monkeypatch.chdir(WORKDIR)
    jobs = Submit(text).build(cluster_id=CLUSTER, qdate=QDATE).jobs()
    assert len(jobs) == len(expected["jobs"]), f"{name}: {len(jobs)} jobs, HTCondor makes {len(expected['jobs'])}"
    # custom attributes set in include files count too (048 reads common.inc)
    included = "".join(p.read_text() for p in sorted(WORKDIR.rglob("*.inc")) if p.name in text)
    attrs = COMPARED + _custom_attrs(text + "\n" + included) + (["FromCommand"] if "+FromCommand" in text else [])
    for index, (ours, theirs) in enumerate(zip(jobs, expected["jobs"], strict=True)):
        for attr in attrs:
            if attr not in theirs:
                assert attr not in ours, f"{name} job {index}: gridbus sets {attr} = {ours.get(attr)!r}, HTCondor does not"
                continue
            assert attr in ours, f"{name} job {index}: HTCondor sets {attr} = {theirs[attr]}, gridbus does not"
            if attr in PRESENCE_ONLY:
                continue
            assert _canon(_text(ours[attr])) == _canon(theirs[attr]), f"{name} job {index}: {attr}"
