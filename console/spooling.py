"""The client's side of spooling (htcondor2's ``Schedd.spool`` and ``Schedd.retrieve``): a job's
input sent to the schedd's spool in chunks over its owner's own calls, and its output fetched back
from there into the submit directory (or where its remaps say), so that the submitting machine
need not stay up while the job waits and runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gridbus.transfer import spec

CHUNK = 4 << 20  # bytes a SpoolInput or RetrieveSpool call carries
SPOOL_ATTRS = ["ClusterId", "ProcId", "Iwd", "Cmd", "In", "Out", "Err", "TransferInput", "TransferExecutable",
               "TransferOutputRemaps", "JobStatus", "HoldReasonCode", "SUBMIT_Iwd", "SUBMIT_Out", "SUBMIT_Err",
               "UserLog", "SUBMIT_UserLog"]

Call = Callable[[str, dict[str, Any]], Any]  # (method, arguments) -> the call's result, raising on refusal


def spool_job(call: Call, ad: Mapping[str, Any]) -> int:
    """Send one held (SpoolingInput) job's input sandbox, read here as the submitting user, then
    let the job go; returns the number of entries sent."""
    job = f"{ad['ClusterId']}.{ad['ProcId']}"
    entries = spec.input_entries(ad)  # a missing input is an error here, naming it
    for entry in entries:
        if entry.path is None:
            call("SpoolInput", {"Id": job, "Name": entry.name, "Kind": "dir", "Mode": entry.mode})
            continue
        with open(entry.path, "rb") as fh:
            offset = 0
            while True:
                data = fh.read(CHUNK)
                last = len(data) < CHUNK
                if data or offset == 0:
                    call("SpoolInput", {"Id": job, "Name": entry.name, "Kind": "file", "Mode": entry.mode,
                                        "Offset": offset, "Data": data, "Last": last})
                offset += len(data)
                if last:
                    break
    call("SpoolDone", {"Id": job})
    return len(entries)


def retrieve_job(call: Call, ad: Mapping[str, Any]) -> list[str]:
    """Fetch one completed spooled job's output to where it belongs on this side, then let the job
    leave the queue; returns the paths written. The job's user log, kept in the spool since its
    input was spooled, is appended to the log it was submitted with (which has its submit event)."""
    job = f"{ad['ClusterId']}.{ad['ProcId']}"
    home = {"Iwd": ad.get("SUBMIT_Iwd") or ad.get("Iwd"), "TransferOutputRemaps": ad.get("TransferOutputRemaps", "")}
    streams = {ad.get("Out"): ad.get("SUBMIT_Out"), ad.get("Err"): ad.get("SUBMIT_Err")}
    written = []
    for f in call("ListSpool", {"Id": job}).outArgs.get("Files", []):
        name = str(f["Name"])
        submitted = streams.get(name)
        if name == ad.get("UserLog") and ad.get("SUBMIT_UserLog"):
            with open(str(ad["SUBMIT_UserLog"]), "ab") as fh:
                fh.writelines(_chunks(call, job, name))
            written.append(str(ad["SUBMIT_UserLog"]))
            continue
        if submitted:  # the job's stdout/stderr, back under the name it was submitted with
            dest = os.path.normpath(os.path.join(str(home["Iwd"]), str(submitted)))
        else:
            dest = spec.output_destination(home, name)
        if f.get("Kind") == "dir":
            os.makedirs(dest, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        temp = f"{dest}.gridbus-partial"
        with open(temp, "wb") as fh:
            fh.writelines(_chunks(call, job, name))
        os.chmod(temp, int(f.get("Mode") or 0o644) & 0o777)
        os.replace(temp, dest)
        written.append(dest)
    call("RetrieveDone", {"Id": job})
    return written


def _chunks(call: Call, job: str, name: str) -> Iterator[bytes]:
    """One file of the job's spool, in RetrieveSpool's chunks."""
    offset = 0
    while True:
        data = call("RetrieveSpool", {"Id": job, "Name": name, "Offset": offset, "Max": CHUNK}).outArgs.get("Data", b"")
        yield data
        offset += len(data)
        if len(data) < CHUNK:
            return
