"""A shadow process per owner, so the schedd never touches a user's file as itself.

HTCondor's condor_shadow runs as the job's owner; here one long-lived shadow per owner does the
owner's file work (Fetch of Out/Err/UserLog, user-log appends; later the file transfer): the
operating system decides, as the owner, what may be read or written. A schedd that is root starts
each shadow under the owner's Unix account (USER_MAP, STARTER_UNPRIVILEGED_USER and
STARTER_ALLOW_ROOT_JOBS as for the starter, agents/startd/accounts.py); a schedd that is not root
cannot switch accounts (a personal pool: every owner is the schedd's own user) and runs the
shadow as itself.

A shadow speaks JSON lines over a pipe (shadow_child.py), is started on first use, started again
when it died (the request is sent once more), and stopped when ``retain`` is told its owner has no
running jobs, or after IDLE_SECONDS without a request.

The interface the schedd uses: ``await shadows.read(owner, path, start, end, most)`` and
``await shadows.append(owner, path, text)``; both raise :class:`ShadowRefused` with a sentence.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gridbus.agents.startd.accounts import Account, RunAsPolicy, RunAsRefused, UserMap, _current

log = logging.getLogger("gridbus.schedd.shadow")

IDLE_SECONDS = 300.0
_CHILD_SOURCE = (Path(__file__).with_name("shadow_child.py")).read_text()


class ShadowRefused(Exception):
    """The owner's shadow could not do it (or there is no account to run it as): ``sentence``
    says why, in words for the job's owner; ``errno`` is the operating system's code, if any."""

    def __init__(self, sentence: str, errno: int = 0):
        super().__init__(sentence)
        self.sentence = sentence
        self.errno = errno


def policy_from_config(cfg: Any) -> RunAsPolicy:
    """The run-as policy of the starter, read from the schedd's configuration (same knobs)."""
    import gridbus.agents.startd.settings  # noqa: F401 - registers USER_MAP and the STARTER_* knobs

    def get(name: str, default: Any) -> Any:
        try:
            return cfg.get(name)
        except Exception:
            return default

    return RunAsPolicy(
        allow_runas_owner=bool(get("STARTER_ALLOW_RUNAS_OWNER", True)),
        unprivileged_user=str(get("STARTER_UNPRIVILEGED_USER", "") or ""),
        allow_root_jobs=bool(get("STARTER_ALLOW_ROOT_JOBS", False)),
        user_map=UserMap.parse(get("USER_MAP", [])),
    )


def interpreter_for(account: Account) -> str:
    """A Python the owner can run: the schedd's own when the owner can reach it (it is the same
    user, or the path is open to all), else the system's. The child needs only the standard library."""
    candidates = [sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"]
    if not account.switch:
        return sys.executable
    for path in candidates:
        if path and _others_may_run(path):
            return path
    return sys.executable  # the start fails, and the refusal says so


def _others_may_run(path: str) -> bool:
    """Whether every directory on the way and the file itself are open to any user."""
    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & 0o001:
            return False
        d = os.path.dirname(real)
        while True:
            if not os.stat(d).st_mode & 0o001:
                return False
            if d == "/":
                return True
            d = os.path.dirname(d)
    except OSError:
        return False


class _Shadow:
    def __init__(self, owner: str, account: Account):
        self.owner = owner
        self.account = account
        self.proc: asyncio.subprocess.Process | None = None
        self.lock = asyncio.Lock()
        self.used = time.monotonic()
        self.starts = 0

    async def start(self) -> None:
        kwargs: dict[str, Any] = {}
        if self.account.switch:
            kwargs = {"user": self.account.uid, "group": self.account.gid,
                      "extra_groups": list(self.account.groups)}
        # No inherited environment: the schedd's holds the broker's credentials.
        env = {"PATH": "/usr/bin:/bin", "HOME": self.account.home or "/", "LANG": "C.UTF-8"}
        self.proc = await asyncio.create_subprocess_exec(
            interpreter_for(self.account), "-I", "-c", _CHILD_SOURCE,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env, cwd="/",
            limit=64 << 20, **kwargs,
        )
        self.starts += 1
        log.info("started the shadow of %s (uid %d, pid %d)", self.owner, self.account.uid, self.proc.pid)

    async def request(self, req: dict[str, Any]) -> dict[str, Any]:
        async with self.lock:
            self.used = time.monotonic()
            for attempt in (1, 2):  # a shadow that died is started again, once per request
                if self.proc is None or self.proc.returncode is not None:
                    try:
                        await self.start()
                    except OSError as exc:
                        raise ShadowRefused(
                            f"the shadow of {self.owner} could not start as uid {self.account.uid}: {exc}"
                        ) from None
                assert self.proc is not None and self.proc.stdin and self.proc.stdout
                try:
                    self.proc.stdin.write((json.dumps(req) + "\n").encode())
                    await self.proc.stdin.drain()
                    line = await self.proc.stdout.readline()
                except (BrokenPipeError, ConnectionResetError):
                    line = b""
                if line:
                    return json.loads(line)
                await self._reap()
                if attempt == 2:
                    raise ShadowRefused(f"the shadow of {self.owner} died twice on one request")
        raise AssertionError("unreachable")

    async def _reap(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            await self.proc.wait()
            self.proc = None

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin:
            self.proc.stdin.close()  # end of input: the child's loop ends
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            await self._reap()
        self.proc = None


class OwnerShadows:
    """The shadows of all owners of one schedd."""

    def __init__(self, policy: RunAsPolicy | Callable[[str], Account]):
        self._account_for = policy.account_for if isinstance(policy, RunAsPolicy) else policy
        self._shadows: dict[str, _Shadow] = {}

    def _shadow(self, owner: str) -> _Shadow:
        sh = self._shadows.get(owner)
        if sh is None:
            try:
                account = self._account_for(owner)
            except RunAsRefused as exc:
                raise ShadowRefused(f"no account to act as {owner}: {exc.reason}") from None
            sh = self._shadows[owner] = _Shadow(owner, account)
        return sh

    async def _call(self, owner: str, req: dict[str, Any], doing: str) -> dict[str, Any]:
        answer = await self._shadow(owner).request(req)
        if not answer.get("ok"):
            raise ShadowRefused(f"{owner} cannot {doing} {req.get('path')}: {answer.get('error')}",
                                int(answer.get("errno") or 0))
        return answer

    async def read(self, owner: str, path: str, start: int, end: int, most: int) -> str:
        """Bytes start..end of ``path`` (negative: from the end; at most ``most``), read as ``owner``."""
        req = {"op": "read", "path": path, "start": start, "end": end, "max": most}
        return str((await self._call(owner, req, "read"))["data"])

    async def append(self, owner: str, path: str, text: str) -> None:
        """Append ``text`` to ``path`` (created if missing) as ``owner``."""
        await self._call(owner, {"op": "append", "path": path, "text": text}, "write")

    async def uid_of(self, owner: str) -> int:
        return int((await self._call(owner, {"op": "whoami"}, "be"))["uid"])

    async def retain(self, owners: Iterable[str]) -> None:
        """Stop the shadows of owners not in ``owners`` (those with no running jobs) and of any
        owner idle for IDLE_SECONDS."""
        keep = set(owners)
        now = time.monotonic()
        for owner, sh in list(self._shadows.items()):
            if owner not in keep or now - sh.used > IDLE_SECONDS:
                if not sh.lock.locked():
                    del self._shadows[owner]
                    await sh.stop()

    async def stop_all(self) -> None:
        shadows, self._shadows = self._shadows, {}
        await asyncio.gather(*(sh.stop() for sh in shadows.values()), return_exceptions=True)

    def running(self) -> dict[str, int]:
        """Owner -> pid of each shadow alive now."""
        return {o: sh.proc.pid for o, sh in self._shadows.items() if sh.proc and sh.proc.returncode is None}


# HTCondor's HoldReasonCode UnableToInitUserLog: the user log cannot be opened or written.
HOLD_USER_LOG = 22


class LogSink:
    """User-log text on its way to the owners' shadows, in order; a log its owner cannot write
    calls ``on_error(owner, path, sentence)`` (the schedd holds the jobs that log there)."""

    def __init__(self, shadows: OwnerShadows, on_error: Callable[[str, str, str], None]):
        self.shadows = shadows
        self.on_error = on_error
        self._batches: list[list[tuple[str, str, str]]] = []
        self._task: asyncio.Task | None = None
        self.errors = 0

    def write(self, batch: list[tuple[str, str, str]]) -> None:
        if not batch:
            return
        self._batches.append(batch)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a commit outside the event loop: the next write or drain takes it
            return
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while self._batches:
            batch = self._batches.pop(0)
            for owner, path, text in batch:
                try:
                    await self.shadows.append(owner, path, text)
                except ShadowRefused as exc:
                    self.errors += 1
                    log.warning("user log %s: %s", path, exc.sentence)
                    try:
                        self.on_error(owner, path, exc.sentence)
                    except Exception:
                        log.exception("holding the jobs of user log %s failed", path)
                except Exception:
                    self.errors += 1
                    log.exception("writing user log %s as %s failed", path, owner)

    async def drain(self) -> None:
        if self._batches and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run())
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


def attach(schedd: Any) -> OwnerShadows:
    """Route the schedd's user-log writes through the owners' shadows (its Fetch asks
    ``schedd.owner_shadows``). The run-as policy is read from the schedd's configuration at first use."""
    policy: list[RunAsPolicy] = []

    def account_for(owner: str) -> Account:
        if not policy:
            policy.append(policy_from_config(getattr(schedd, "config", None)))
        me = _current()
        if policy[0].user_map.account_name(owner) == me.name:
            return me  # the owner is the schedd's own account (a personal pool, even as root)
        return policy[0].account_for(owner)

    shadows = OwnerShadows(account_for)
    schedd.owner_shadows = shadows
    schedd.events.sink = LogSink(shadows, lambda owner, path, sentence: hold_for_log(schedd, owner, path, sentence))
    return shadows


async def retain_loop(schedd: Any, every: float = 30.0) -> None:
    """Stop the shadows of owners without running jobs, now and then."""
    from gridbus.jobstatus import JobStatus

    running = int(JobStatus.RUNNING)
    while True:
        await asyncio.sleep(every)
        counts = schedd.queue.counts
        await schedd.owner_shadows.retain(o for o, c in counts.items() if len(c) > running and c[running] > 0)


async def logs_written(schedd: Any, timeout: float = 10.0) -> None:
    """Wait (a bounded time) until the user-log text recorded so far is written, as HTCondor's
    submit has written the submit events when it returns."""
    try:
        await asyncio.wait_for(schedd.events.sink.drain(), timeout)
    except TimeoutError:
        log.warning("user-log writes still pending after %.0f s", timeout)


async def close(schedd: Any) -> None:
    """At the schedd's stop: the user-log text still on its way, then the shadows."""
    try:
        await schedd.events.sink.drain()
    finally:
        await schedd.owner_shadows.stop_all()


def hold_for_log(schedd: Any, owner: str, path: str, sentence: str) -> None:
    """Hold the owner's jobs that are not held or done and whose user log is ``path``."""
    from gridbus.agents.schedd.jobevents import user_log_paths
    from gridbus.jobstatus import JobStatus

    done = {int(JobStatus.HELD), int(JobStatus.COMPLETED), int(JobStatus.REMOVED)}
    now = time.time()
    stops: list[Any] = []
    reason = f"Cannot write the user log: {sentence}"
    for cluster in list(schedd.queue.by_owner.get(owner, {}).values()):
        for p in list(cluster.procs.values()):
            if int(p.status) in done or path not in user_log_paths(schedd.queue.ad(p)):
                continue
            schedd._hold_job(p, reason, HOLD_USER_LOG, 0, now, stops)
    if stops:
        schedd._commit_and_stop(stops)
    else:
        schedd.commit_soon()
