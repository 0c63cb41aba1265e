"""Which files a job's sandbox holds and where each goes, read from the job's ad as HTCondor names
the attributes (ShouldTransferFiles, TransferInput, TransferOutput, TransferOutputRemaps,
TransferExecutable, In, Out, Err, Iwd).

Input: every TransferInput entry (relative to Iwd), the executable unless TransferExecutable is
false, and the job's stdin file. A directory is sent with its name, or, written with a trailing
slash, only its contents. In the sandbox the job sees each under its base name.
Output: the TransferOutput entries, or else every file at the top of the sandbox that the job made
or changed; and the job's stdout/stderr, written in the sandbox as _condor_stdout/_condor_stderr,
go back to Out/Err. TransferOutputRemaps (``name = dest; ...``) says where a name goes instead of
Iwd/name.

Self-checkpointing (HTCondor's checkpoint_exit_code): a checkpoint is the TransferCheckpoint
entries, else the TransferOutput ones, else every top-level file of the sandbox but the job's
input, with the job's stdout/stderr files as they stand; it lands in the job's checkpoint
directory in the schedd's spool (``CHECKPOINT_TO`` in the transfer's spec), and a later run's input
holds that directory's files (``CHECKPOINT_FROM``), over any input file of the same name.

Imports only the standard library (the owner's shadow imports it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from typing import Any

from gridbus.transfer.stream import Entry, TransferError

STDOUT = "_condor_stdout"
STDERR = "_condor_stderr"

# The job ad attributes a transfer needs on the submit side (what the schedd hands the shadow).
SPEC_ATTRS = ("Iwd", "Cmd", "In", "Out", "Err", "TransferInput", "TransferOutput", "TransferOutputRemaps",
              "TransferExecutable", "ShouldTransferFiles", "WhenToTransferOutput")

# Keys of a transfer's spec (the schedd adds them; never job ad attributes): the directory a
# checkpoint is written to, and the directory of the last checkpoint a run's input brings back.
CHECKPOINT_TO = "CheckpointTo"
CHECKPOINT_FROM = "CheckpointFrom"
# And the job's id, which names a cut output's kept part for the job's next attempt (stream.Partials).
RESUME_KEY = "ResumeKey"
# And the size from which a file goes around the page cache (TRANSFER_DIRECT_IO_MIN_MB, in bytes).
DIRECT_MIN = "DirectIoMin"

# Accounting the startd reports with the exit (HTCondor's names). Its bytes count from the shadow's
# side (BytesSent: the input); the schedd adds them to the job ad from the job's side (BytesRecvd:
# the input), as HTCondor's job ad counts them; the times go into the ad as they are.
ACCOUNTING_ATTRS = ("BytesSent", "BytesRecvd", "TransferInStarted", "TransferInFinished", "TransferOutStarted",
                    "TransferOutFinished")


def _text(ad: Mapping[str, Any], name: str) -> str:
    value = ad.get(name)
    return value if isinstance(value, str) else ""


def split_files(text: str) -> list[str]:
    """A transfer_input_files / transfer_output_files list: comma-separated, blanks trimmed."""
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_remaps(text: str) -> dict[str, str]:
    """TransferOutputRemaps: ``name = dest`` pairs separated by ``;``."""
    out: dict[str, str] = {}
    for pair in text.strip().strip('"').split(";"):
        name, eq, dest = pair.partition("=")
        if eq and name.strip() and dest.strip():
            out[name.strip()] = dest.strip()
    return out


def wants_transfer(ad: Mapping[str, Any], filesystem_domain: str) -> bool:
    """Whether this job's sandbox travels: YES always, IF_NEEDED when the machine is in another
    filesystem domain than the submitter, NO never."""
    how = _text(ad, "ShouldTransferFiles").upper()
    if how == "YES":
        return True
    if how == "IF_NEEDED":
        return _text(ad, "FileSystemDomain") != filesystem_domain
    return False


def _transfers_executable(ad: Mapping[str, Any]) -> bool:
    value = ad.get("TransferExecutable")
    return value is not False and not (isinstance(value, str) and value.lower() == "false")


def _real(name: str) -> bool:
    return bool(name) and name != os.devnull


def input_entries(ad: Mapping[str, Any]) -> list[Entry]:
    """The input sandbox, expanded (directories walked), read as the owner. A named file or
    directory that is missing or unreadable raises TransferError naming it."""
    iwd = _text(ad, "Iwd") or "/"
    wanted: list[tuple[str, bool]] = []
    if _text(ad, CHECKPOINT_FROM):  # first: a name given twice goes once, and the checkpoint's is newer
        wanted.append((os.path.join(_text(ad, CHECKPOINT_FROM), ""), True))
    wanted += [(f, f.endswith("/")) for f in split_files(_text(ad, "TransferInput"))]
    cmd = _text(ad, "Cmd")
    if cmd and _transfers_executable(ad):
        wanted.append((cmd, False))
    if _real(_text(ad, "In")):
        wanted.append((_text(ad, "In"), False))
    entries: list[Entry] = []
    seen: set[str] = set()
    for name, contents in wanted:
        source = os.path.normpath(os.path.join(iwd, name))
        try:
            st = os.stat(source)
        except OSError as exc:
            raise TransferError(f"reading from file {source}: (errno {exc.errno}) {exc.strerror}", path=source,
                                errno=exc.errno or 0) from None
        entries += _named(source, st, contents, _walk, "not a regular file or directory", source)
    out = []
    for e in entries:  # a name given twice goes once
        if e.name not in seen:
            seen.add(e.name)
            out.append(e)
    return out


def _named(path: str, st: os.stat_result, contents: bool, walk: Callable[[str, str], list[Entry]],
           not_a_file: str, reported: str) -> list[Entry]:
    """What a named file or directory gives: a directory its own entry (unless only its contents
    were asked for: ``dir/``) and what ``walk`` finds in it; a regular file itself. Anything else
    raises TransferError (``reported``: the name the error gives)."""
    if stat.S_ISDIR(st.st_mode):
        prefix = "" if contents else os.path.basename(path)
        return ([Entry(prefix, None, st.st_mode & 0o777)] if prefix else []) + walk(path, prefix)
    if stat.S_ISREG(st.st_mode):
        return [Entry(os.path.basename(path), path, st.st_mode & 0o777)]
    raise TransferError(f"reading from file {path}: {not_a_file}", path=reported)


def _walk(root: str, prefix: str) -> list[Entry]:
    out: list[Entry] = []

    def fail(exc: OSError) -> None:
        raise TransferError(f"reading from directory {exc.filename}: (errno {exc.errno}) {exc.strerror}",
                            path=str(exc.filename), errno=exc.errno or 0)

    for dirpath, dirnames, filenames in os.walk(root, onerror=fail):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        base = prefix if rel == "." else (f"{prefix}/{rel}" if prefix else rel)
        for d in dirnames:
            full = os.path.join(dirpath, d)
            out.append(Entry(f"{base}/{d}" if base else d, None, os.stat(full).st_mode & 0o777))
        for f in sorted(filenames):
            full = os.path.join(dirpath, f)
            st = os.stat(full)
            if stat.S_ISREG(st.st_mode):
                out.append(Entry(f"{base}/{f}" if base else f, full, st.st_mode & 0o777))
    return out


def sandbox_ad(ad: Mapping[str, Any], scratch: str) -> dict[str, Any]:
    """The ad the starter runs: Iwd is the sandbox, and Cmd, In, Out and Err name files in it."""
    out = dict(ad)
    out["Iwd"] = scratch
    cmd = _text(ad, "Cmd")
    if cmd and _transfers_executable(ad):
        out["Cmd"] = os.path.join(scratch, os.path.basename(cmd))
    if _real(_text(ad, "In")):
        out["In"] = os.path.basename(_text(ad, "In"))
    same = _text(ad, "Out") == _text(ad, "Err")
    if _real(_text(ad, "Out")):
        out["Out"] = STDOUT
    if _real(_text(ad, "Err")):
        out["Err"] = STDOUT if same else STDERR
    return out


def snapshot(scratch: str) -> dict[str, tuple[int, int]]:
    """The sandbox's top-level files after the input arrived: name -> (size, mtime_ns)."""
    out = {}
    for name in os.listdir(scratch):
        st = os.lstat(os.path.join(scratch, name))
        if stat.S_ISREG(st.st_mode):
            out[name] = (st.st_size, st.st_mtime_ns)
    return out


def output_entries(scratch: str, ad: Mapping[str, Any], before: Mapping[str, tuple[int, int]]) -> list[Entry]:
    """The output sandbox, read (as the startd) without following any symbolic link the job made.
    A TransferOutput entry that is missing raises TransferError naming it."""
    listed = split_files(_text(ad, "TransferOutput"))
    entries: list[Entry] = []
    for std in (STDOUT, STDERR):
        path = os.path.join(scratch, std)
        if os.path.isfile(path) and not os.path.islink(path):
            entries.append(Entry(std, path))
    if listed:
        for name in listed:
            rel = os.path.normpath(name.rstrip("/"))
            if os.path.isabs(name) or rel.startswith(".."):
                rel = os.path.basename(rel)  # HTCondor takes an absolute output name's base name
            path = os.path.join(scratch, rel)
            try:
                st = _lstat_below(scratch, rel)
            except OSError as exc:
                raise TransferError(f"reading from file {path}: (errno {exc.errno}) {exc.strerror}",
                                    path=name, errno=exc.errno or 0) from None
            entries += _named(path, st, name.endswith("/"), _walk_nofollow,
                              "not a regular file (a symbolic link?)", name)
        return entries
    for name in sorted(os.listdir(scratch)):
        if name in (STDOUT, STDERR) or name.startswith(".gridbus-"):
            continue
        st = os.lstat(os.path.join(scratch, name))
        if stat.S_ISREG(st.st_mode) and before.get(name) != (st.st_size, st.st_mtime_ns):
            entries.append(Entry(name, os.path.join(scratch, name), st.st_mode & 0o777))
    return entries


def wants_checkpoint(ad: Mapping[str, Any], exit_info: Mapping[str, Any]) -> bool:
    """Whether a run's exit is a self-checkpoint: it exited (not by a signal) with the job's
    SuccessCheckpointExitCode, and the job wants its files transferred then (WantFTOnCheckpoint,
    which condor_submit sets with checkpoint_exit_code; HTCondor's starter ignores the code
    without it)."""
    code = ad.get("SuccessCheckpointExitCode")
    want = ad.get("WantFTOnCheckpoint")
    return (isinstance(code, int) and not isinstance(code, bool) and (want is True or str(want).lower() == "true")
            and not exit_info.get("ExitBySignal") and exit_info.get("ExitCode") == code)


def checkpoint_entries(scratch: str, ad: Mapping[str, Any]) -> list[Entry]:
    """A checkpoint of the sandbox (read as output is, never through a symbolic link the job made):
    TransferCheckpoint, else TransferOutput, else every top-level file but the job's input (its
    executable, TransferInput and stdin), with the stdout/stderr files. A listed name that is
    missing raises TransferError naming it."""
    listed = _text(ad, "TransferCheckpoint") or _text(ad, "TransferOutput")
    if listed:
        return output_entries(scratch, {"TransferOutput": listed}, {})
    inputs = {os.path.basename(n.rstrip("/")) for n in split_files(_text(ad, "TransferInput"))}
    inputs |= {os.path.basename(_text(ad, "Cmd")), os.path.basename(_text(ad, "In"))}
    entries = []
    for name in sorted(os.listdir(scratch)):
        st = os.lstat(os.path.join(scratch, name))
        if name in inputs and name not in (STDOUT, STDERR) or name.startswith(".gridbus-") or not stat.S_ISREG(st.st_mode):
            continue
        entries.append(Entry(name, os.path.join(scratch, name), st.st_mode & 0o777))
    return entries


def _lstat_below(root: str, rel: str) -> os.stat_result:
    """lstat of root/rel, refusing a symbolic link anywhere on the way (ELOOP)."""
    path = root
    st = os.lstat(root)
    for part in rel.split("/"):
        path = os.path.join(path, part)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(40, "Too many levels of symbolic links (a symbolic link)", path)
    return st


def _walk_nofollow(root: str, prefix: str) -> list[Entry]:
    out: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        base = prefix if rel == "." else (f"{prefix}/{rel}" if prefix else rel)
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                dirnames.remove(d)
                continue
            out.append(Entry(f"{base}/{d}" if base else d, None, st.st_mode & 0o777))
        for f in sorted(filenames):
            full = os.path.join(dirpath, f)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                out.append(Entry(f"{base}/{f}" if base else f, full, st.st_mode & 0o777))
    return out


def open_nofollow(path: str) -> int:
    """The starter's opener for output files: never through a symbolic link at the last part
    (the parts above were checked by output_entries; the job's processes are gone by then)."""
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)


def output_directories(ad: Mapping[str, Any]) -> set[str]:
    """The directories an output sandbox is written into at the top (Iwd, where Out and Err go,
    the remaps' destinations): where a writer killed mid-transfer may have left a temporary file."""
    remapped = [output_destination(ad, n) for n in parse_remaps(_text(ad, "TransferOutputRemaps"))]
    streams = [output_destination(ad, n) for n in (STDOUT, STDERR)]
    out = {os.path.normpath(_text(ad, "Iwd") or "/")}
    out.update(os.path.dirname(p) for p in [*streams, *remapped] if p != os.devnull)
    out.update(remapped)  # (a remapped directory's files are written inside it)
    return out


def output_destination(ad: Mapping[str, Any], name: str) -> str:
    """Where an output sandbox file goes on the submit side: Out/Err for the job's stdout/stderr,
    a remap's destination, else Iwd/name (relative destinations are relative to Iwd)."""
    iwd = _text(ad, "Iwd") or "/"
    if name == STDOUT:
        target = _text(ad, "Out")
    elif name == STDERR:
        target = _text(ad, "Err")
    else:
        remaps = parse_remaps(_text(ad, "TransferOutputRemaps"))
        top, _, rest = name.partition("/")
        if name in remaps:
            target = remaps[name]
        elif top in remaps:
            target = os.path.join(remaps[top], rest) if rest else remaps[top]
        else:
            target = name
    return os.path.normpath(os.path.join(iwd, target))
