"""htcondor2's enumerations that are names and values only (their users are elsewhere): the job
ad's submit method, the history sources, the file transfer event types, the subsystem types, the
transaction flags of a queue edit, and the credential types.

Values are htcondor2's, so a value read from an ad or a log compares equal either way.
"""

from __future__ import annotations

import enum


class SubmitMethod(enum.IntEnum):
    """How a job was submitted (the job ad's JobSubmitMethod); Submit.setSubmitMethod takes one."""

    CondorSubmit = 0
    DAGMan = 1
    PythonBindings = 2
    HTCondorJobSubmit = 3
    HTCondorDagSubmit = 4
    HTCondorJobSetSubmit = 5
    UserSet = 100


class HistorySrc(enum.IntEnum):
    """Where a history query reads: the schedd's job history, a startd's, the job epochs, or a
    daemon's own history ads."""

    ScheddJob = 0
    StartdJob = 1
    JobEpoch = 2
    Daemon = 3


class FileTransferEventType(enum.IntEnum):
    """The ``Type`` of a FileTransfer event (event number 040) in a job event log."""

    IN_QUEUED = 1
    IN_STARTED = 2
    IN_FINISHED = 3
    OUT_QUEUED = 4
    OUT_STARTED = 5
    OUT_FINISHED = 6


class CommonFilesEventType(enum.IntEnum):
    """The ``Type`` of a common files event (the files a job set's jobs share)."""

    TransferQueued = 1
    TransferStarted = 2
    TransferFinished = 3
    WaitStarted = 4
    WaitFinished = 5


class SubsystemType(enum.IntEnum):
    """HTCondor's subsystems; ``set_subsystem(name, SubsystemType.X)`` takes one."""

    Master = 1
    Collector = 2
    Negotiator = 3
    Schedd = 4
    Shadow = 5
    Startd = 6
    Starter = 7
    GAHP = 8
    Dagman = 9
    SharedPort = 10
    Daemon = 11
    Tool = 12
    Submit = 13
    Job = 14
    Auto = 15


class TransactionFlag(enum.IntFlag):
    """Flags of a queue edit (Schedd.edit). A gridbus schedd commits every edit to its journal
    before it answers, so the flags are accepted and change nothing: NonDurable does not skip the
    journal, and SetDirty and ShouldLog describe what it always does."""

    Default = 0
    NonDurable = 1
    SetDirty = 4
    ShouldLog = 8


TransactionFlags = TransactionFlag


class CredType(enum.IntEnum):
    """The kinds of credential a credd stores (gridbus has no credd: see ``Credd``)."""

    Password = 36
    Kerberos = 32
    OAuth = 40


CredTypes = CredType
