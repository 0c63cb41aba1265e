"""HTCondor's JobStatus values, shared by the schedd and the console (htcondor2.JobStatus).

A module of its own so the console can import it without pulling in the schedd agent.
"""

from __future__ import annotations

from enum import IntEnum


class JobStatus(IntEnum):
    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7


# The names condor_q -totals and the Summary ads use: Idle, Running, ..., TransferringOutput.
STATUS_NAMES = {s.value: s.name.title().replace("_", "") for s in JobStatus}
# The letters condor_q prints (src/condor_utils/condor_q.cpp encode_status).
STATUS_LETTERS = {1: "I", 2: "R", 3: "X", 4: "C", 5: "H", 6: ">", 7: "S"}
