"""The jobs' scratch directories under EXECUTE (``dir_<pid>_<seq>``), made and cleaned off the loop.

A start takes an empty directory made ahead (a spare) or one its account's earlier job left,
emptied, rather than a mkdir on the loop: a mkdir and an rmdir per job cost the startd more cpu
in the file system than the rest of a short job's start (ext4 skips over every recently deleted
inode of the block group at each new one). After a job's exit a worker thread empties its
directory and keeps it for the next job of the same account (`_recycle`), or removes it, and
makes the spares the next starts take. A directory made by file transfer (agents/startd/sandbox.py)
is that part's to remove.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import time
from collections.abc import Callable, Sequence
from typing import Any

from gridbus.agents.startd.accounts import Account
from gridbus.agents.startd.job import Ids, next_seq

SPARE_DIRS = 8  # empty scratch directories kept made ahead
MAX_SPARE_DIRS = 256  # and at most this many emptied ones kept for their accounts' next jobs
KEPT_SCRATCH_IDLE = 60.0  # seconds without a start of its account after which a kept one goes
CLEAN_DELAY = 0.05  # seconds after an exit the cleaning waits: later than the exit report's publish


class ScratchDirs:
    """The scratch directories of one starter: spares, kept ones, and the cleaning rounds."""

    def __init__(self, execute: str):
        self.execute = execute
        self._to_clean: list[tuple[str, Ids | None]] = []  # (scratch, the ids to keep it for, or None)
        self._clean_scheduled = False
        # Empty scratch directories made ahead by the cleaning thread: a start takes one instead of
        # a mkdir on the loop, which waited on the rmdirs of the same parent directory.
        self.spare_dirs: list[str] = []
        # Scratch directories of finished jobs, emptied and reset, by the (uid, gid) owning them:
        # a job of that account takes one as it is (no mkdir, no chown, no rmdir after the last).
        self.reusable: dict[Ids, list[str]] = {}
        self._reusable_used: dict[Ids, float] = {}  # when a job of the account last started (monotonic)
        self.cleaning: set[asyncio.Future] = set()  # the cleaning thread's rounds under way
        self._shut_down = False
        os.makedirs(execute, mode=0o755, exist_ok=True)

    def path(self, seq: int) -> str:
        """The path of a new scratch directory (made by `take` or the cleaning thread)."""
        return os.path.join(self.execute, f"dir_{os.getpid()}_{seq}")

    def take(self, account: Account, new: str) -> str:
        """An empty scratch directory owned by ``account``: one its earlier job left (emptied), a
        spare made ahead, or ``new``, made now. Raises OSError."""
        ids = (account.uid, account.gid)
        self._reusable_used[ids] = time.monotonic()
        kept = self.reusable.get(ids)
        if kept:
            return kept.pop()
        try:
            scratch = self.spare_dirs.pop()
        except IndexError:
            os.mkdir(new, 0o700)
            scratch = new
        try:
            if account.switch:
                os.chown(scratch, account.uid, account.gid)
        except OSError:
            self.remove_now(scratch)
            raise
        return scratch

    @staticmethod
    def remove_now(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def job_ended(self, scratch: str | None, ids: Ids) -> None:
        """A job's exit: its directory (None: not the starter's) emptied and kept for ``ids`` by
        the next cleaning round, scheduled after the exit's report."""
        if scratch is not None:
            self._to_clean.append((scratch, ids))
        if not self._clean_scheduled:
            # Later than the report's publish (which starts on the next loop iteration).
            self._clean_scheduled = True
            asyncio.get_running_loop().call_later(CLEAN_DELAY, self._clean)

    def drop_idle(self, now: float) -> None:
        """Remove the kept scratch directories of accounts no job of which started for
        KEPT_SCRATCH_IDLE seconds: an idle startd's EXECUTE holds only the few spares."""
        idle = [ids for ids, used in self._reusable_used.items() if now - used > KEPT_SCRATCH_IDLE]
        paths = []
        for ids in idle:
            del self._reusable_used[ids]
            paths += self.reusable.pop(ids, [])
        if paths:
            self._cleaning_round(_rmtree_all, paths)

    async def shutdown(self) -> None:
        """Remove every directory the starter holds, once the cleaning rounds under way are done."""
        if self.cleaning:  # its spare directories are in the store, and removed below, once it is done
            await asyncio.wait(list(self.cleaning), timeout=5)
        self._shut_down = True
        paths = [path for path, _ in self._to_clean] + self.spare_dirs
        paths += [path for kept in self.reusable.values() for path in kept]
        self._to_clean, self.spare_dirs, self.reusable = [], [], {}
        _rmtree_all(paths)  # the loop may not run the scheduled cleaning any more

    def _clean(self) -> None:
        # Emptying and rmdir cost a few hundred microseconds on a busy disk: a worker thread does
        # them, off the loop that spawns and reaps the jobs (the system calls release the GIL).
        self._clean_scheduled = False
        batch, self._to_clean = self._to_clean, []
        if not batch:
            return
        room = MAX_SPARE_DIRS - sum(map(len, self.reusable.values()))
        paths = [(path, ids if i < room else None) for i, (path, ids) in enumerate(batch)]
        # Spares made for each directory removed rather than kept, and the store topped up to
        # SPARE_DIRS (for an account with none kept yet): at hundreds of jobs a second a fixed
        # eight ran out between two cleanings, and most starts made theirs on the loop.
        removed = sum(1 for _, ids in paths if ids is None)
        wanted = min(removed + SPARE_DIRS - len(self.spare_dirs), MAX_SPARE_DIRS - len(self.spare_dirs))
        make = [self.path(next_seq()) for _ in range(max(0, wanted))]
        self._cleaning_round(_recycle, paths, make).add_done_callback(self._spares_made)

    def _cleaning_round(self, work: Callable[..., Any], *args: Any) -> asyncio.Future:
        """``work(*args)`` on a worker thread, kept in ``cleaning`` until done (a shutdown waits
        for it)."""
        done = asyncio.get_running_loop().run_in_executor(None, work, *args)
        self.cleaning.add(done)
        done.add_done_callback(self.cleaning.discard)
        return done

    def _spares_made(self, done: asyncio.Future) -> None:
        made, kept = done.result() if not done.cancelled() and done.exception() is None else ([], [])
        if self._shut_down:  # made while the starter stopped: nothing will take them
            _rmtree_all(made + [path for _, path in kept])
            return
        self.spare_dirs.extend(made)
        now = time.monotonic()
        for ids, path in kept:
            self.reusable.setdefault(ids, []).append(path)
            self._reusable_used.setdefault(ids, now)  # (its account's may have expired meanwhile)


def _recycle(paths: list[tuple[str, Ids | None]], make: Sequence[str]) -> tuple[list[str], list[tuple[Ids, str]]]:
    """The cleaning thread's round: each scratch directory emptied and kept for its account's
    next job (`_emptied`), or removed (no ids, or it cannot be made as new); then the spares
    ``make`` made. Returns (spares made, [((uid, gid), directory kept)])."""
    kept = [(ids, path) for path, ids in paths if ids is not None and _emptied(path, *ids)]
    kept_paths = {path for _, path in kept}
    return _rmtree_all([path for path, _ in paths if path not in kept_paths], make), kept


def _emptied(path: str, uid: int, gid: int) -> bool:
    """Make a used scratch directory as a new one for the next job of ``uid``, its owner: empty,
    owned by ``uid``:``gid``, mode 0700, no ACL or extended attribute the last job set on it (a
    default ACL would give someone else the next job's files). Only the same account gets it: a
    process of the last job still alive (without cgroups one can outlive its job) could write
    into any directory of that account anyway. False if it is not that account's directory or
    cannot be made so."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            return False
        with os.scandir(path) as entries:
            for entry in entries:  # usually none
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        if st.st_gid != gid:  # (the job may give it another of its groups)
            os.chown(path, -1, gid, follow_symlinks=False)
        for name in os.listxattr(path, follow_symlinks=False):
            if not name.startswith("security."):  # (the system's labels are not the job's)
                os.removexattr(path, name, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
        with os.scandir(path) as entries:
            return next(entries, None) is None  # (nothing made meanwhile)
    except OSError:
        return False


def _rmtree_all(paths: list[str], make: Sequence[str] = ()) -> list[str]:
    """Remove the scratch directories ``paths``, then make the empty ones ``make`` for the next
    jobs (in this one thread: a mkdir and an rmdir of one parent directory wait on each other);
    returns those made."""
    for path in paths:
        try:
            os.rmdir(path)  # the common case: the job left its scratch directory empty
        except FileNotFoundError:
            pass
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
    made = []
    for path in make:
        try:
            os.mkdir(path, 0o700)
        except OSError:
            break  # the next start makes its own, and says why if it cannot
        made.append(path)
    return made
