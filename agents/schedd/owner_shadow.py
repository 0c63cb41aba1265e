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
The schedd's user-log writer (userlogs.py) queues the appends.
For file transfer, ``await shadows.expect(owner, token, direction, spec)`` connects the owner's
shadow to the broker if it is not (the first broker of the URL list that answers, failing over
as every daemon does; the URL with the daemon's credentials goes over the pipe, never into a file
or the environment) and answers the shadow's queue, where the starter opens the transfer with the
token. ``inline_inputs`` and ``inline_outputs`` read and write the small sandboxes of many jobs in
one request (agents/schedd/inline_sandboxes.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from gridbus.agents.startd.accounts import Account, RunAsPolicy, RunAsRefused, UserMap, _current
from gridbus.bus import BrokerURL
from gridbus.config import Config
from gridbus.transfer.spec import output_directories

log = logging.getLogger("gridbus.schedd.shadow")

IDLE_SECONDS = 300.0
OUTPUT_DIRS_KEPT = 1000  # directories an owner's outputs went to, remembered for the sweep
_CHILD_SOURCE = (Path(__file__).with_name("shadow_child.py")).read_text()


class ShadowRefused(Exception):
    """The owner's shadow could not do it (or there is no account to run it as): ``sentence``
    says why, in words for the job's owner; ``errno`` is the operating system's code, if any."""

    def __init__(self, sentence: str, errno: int = 0):
        super().__init__(sentence)
        self.sentence = sentence
        self.errno = errno


class ShadowDied(ShadowRefused):
    """The owner's shadow died on a request twice (killed, or crashed): nothing said the owner may
    not do it, and the request may have been done or not; the caller may send it again."""


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
        self.queue = ""  # its exclusive queue on the broker, once connected (file transfer)
        # Operations under way or waiting for the lock (a transfer's set-up is several requests):
        # a shadow in use is never stopped as idle, or a request waiting behind the check that
        # found it idle would find it stopping, and start another beside it.
        self.users = 0
        # Where this owner's outputs were written (ordered, bounded): a shadow killed mid-write
        # leaves temporary files there, which its successor removes.
        self.output_dirs: dict[str, None] = {}
        self.lost = 0  # the pid of a shadow that died under a request (reaped), until its successor sweeps

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        self.users += 1
        try:
            yield
        finally:
            self.users -= 1

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
        self.queue = ""
        log.info("started the shadow of %s (uid %d, pid %d)", self.owner, self.account.uid, self.proc.pid)

    async def request(self, req: dict[str, Any]) -> dict[str, Any]:
        with self.in_use():
            return await self._request(req)

    async def _request(self, req: dict[str, Any]) -> dict[str, Any]:
        async with self.lock:
            self.used = time.monotonic()
            for attempt in (1, 2):  # a shadow that died is started again, once per request
                if self.proc is None or self.proc.returncode is not None:
                    dead, self.lost = (self.proc.pid if self.proc is not None else self.lost), 0
                    try:
                        await self.start()
                    except OSError as exc:
                        raise ShadowRefused(
                            f"the shadow of {self.owner} could not start as uid {self.account.uid}: {exc}"
                        ) from None
                    if dead and self.output_dirs:
                        await self._sweep(dead)
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
                    raise ShadowDied(f"the shadow of {self.owner} died twice on one request")
        raise AssertionError("unreachable")

    def wrote_to(self, directories: Iterable[str]) -> None:
        for d in directories:
            self.output_dirs.pop(d, None)
            self.output_dirs[d] = None
        while len(self.output_dirs) > OUTPUT_DIRS_KEPT:
            del self.output_dirs[next(iter(self.output_dirs))]

    async def _sweep(self, dead: int) -> None:
        """The new shadow removes the temporary files its killed predecessor left (best effort)."""
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        req = {"op": "sweep", "pid": dead, "dirs": list(self.output_dirs), "paths": _our_paths()}
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            await self.proc.stdin.drain()
            answer = json.loads(await self.proc.stdout.readline() or b"{}")
        except (BrokenPipeError, ConnectionResetError, ValueError):
            return
        if answer.get("removed"):
            log.info("the shadow of %s removed %d file(s) its killed predecessor left", self.owner, answer["removed"])

    async def _reap(self) -> None:
        if self.proc is not None:
            self.lost = self.proc.pid
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


def _our_paths() -> list[str]:
    """Where the shadow finds gridbus/transfer (it runs ``python -I``, with no path of ours)."""
    return [p for p in sys.path if p and os.path.isabs(p)]


def _tls_material(url: str) -> dict[str, Any] | None:
    """For amqps: the CA, the client certificate and its key as PEM text, read by the schedd, for
    the shadow to use from memory (it may not read the schedd's files, and must not keep them)."""
    from gridbus import tls

    if not tls.is_tls(url):
        return None
    s = tls.settings(Config.load(daemon="schedd"))

    def text(name: str) -> str:
        path = s[name]
        if not path:
            return ""
        with open(path, encoding="ascii") as fh:
            return fh.read()

    return {"ca": text("TLS_CA_FILE"), "cert": text("TLS_CERT_FILE"), "key": text("TLS_KEY_FILE"),
            "verify": bool(s["TLS_VERIFY"])}


class OwnerShadows:
    """The shadows of all owners of one schedd."""

    def __init__(self, policy: RunAsPolicy | Callable[[str], Account], bus_url: str = ""):
        # The account an owner's shadow runs as (RunAsRefused when there is none); the schedd's
        # scheduler universe runs the owner's jobs under it too.
        self.account_for = policy.account_for if isinstance(policy, RunAsPolicy) else policy
        self._shadows: dict[str, _Shadow] = {}
        self.bus_url = bus_url  # the brokers the shadows connect to for file transfer (a list: failover)

    def _shadow(self, owner: str) -> _Shadow:
        sh = self._shadows.get(owner)
        if sh is None:
            try:
                account = self.account_for(owner)
            except RunAsRefused as exc:
                raise ShadowRefused(f"no account to act as {owner}: {exc.reason}") from None
            sh = self._shadows[owner] = _Shadow(owner, account)
        return sh

    async def _call(self, owner: str, req: dict[str, Any], doing: str, sh: _Shadow | None = None) -> dict[str, Any]:
        sh = sh or self._shadow(owner)
        answer = await sh.request(req)
        if not answer.get("ok"):
            # The account that tried, when it is not the owner's namesake (a personal pool run by
            # root acts for other broker users as its unprivileged account, nobody by default).
            who = owner if sh.account.name == owner else f"{owner} (as the Unix account {sh.account.name})"
            what = f"{who} cannot {doing} {req['path']}" if req.get("path") else f"the shadow of {who} cannot {doing}"
            raise ShadowRefused(f"{what}: {answer.get('error')}",
                                int(answer.get("errno") or 0))
        return answer

    async def read(self, owner: str, path: str, start: int, end: int, most: int) -> str:
        """Bytes start..end of ``path`` (negative: from the end; at most ``most``), read as ``owner``."""
        req = {"op": "read", "path": path, "start": start, "end": end, "max": most}
        return str((await self._call(owner, req, "read"))["data"])

    async def append(self, owner: str, path: str, text: str) -> None:
        """Append ``text`` to ``path`` (created if missing) as ``owner``."""
        await self._call(owner, {"op": "append", "path": path, "text": text}, "write")

    async def expect(self, owner: str, token: str, direction: str, spec: dict[str, Any]) -> str:
        """Let one transfer of a job in (``in``: the shadow sends the input; ``out``: it receives
        the output) and answer the shadow's queue, where the starter opens it with ``token``."""
        if not self.bus_url:
            raise ShadowRefused("the owner's shadow has no broker to transfer files over")
        sh = self._shadow(owner)
        with sh.in_use():  # the connect and the expect go to this one shadow, never stopped between
            # A shadow that died, or whose broker connection went, is started and connected again.
            for _attempt in (1, 2):
                if not sh.queue or sh.proc is None or sh.proc.returncode is not None:
                    # Every broker of the URL, in order: the shadow takes the first that answers,
                    # and after a lost connection starts from the one after it (failover).
                    urls = [a.url for a in BrokerURL(self.bus_url).alternatives]
                    answer = await self._call(owner, {"op": "connect", "url": urls[0], "urls": urls,
                                                      "paths": _our_paths(),
                                                      "name": f"gridbus shadow of {owner}",
                                                      "tls": _tls_material(self.bus_url)},
                                              "connect to the broker", sh)
                    sh.queue = str(answer["queue"])
                queue = sh.queue
                if direction == "out":
                    sh.wrote_to(output_directories(spec))
                answer = await sh.request({"op": "expect", "token": token, "direction": direction, "spec": spec})
                if answer.get("ok") and sh.queue == queue:  # (a restart in between would have lost it)
                    return queue
                if not answer.get("ok") and not answer.get("connect"):
                    raise ShadowRefused(f"the shadow of {owner} cannot expect a transfer: {answer.get('error')}")
                sh.queue = ""
        raise ShadowRefused(f"the shadow of {owner} lost its broker connection twice while a transfer was being set up")

    async def inline_inputs(self, owner: str, jobs: dict[str, dict[str, Any]], limit: int) -> dict[str, dict[str, Any]]:
        """Small sandboxes inline: the inputs of many of ``owner``'s jobs (id -> the transfer
        attributes of its ad) read as the owner in one request; per id ``{"files": [[name, mode,
        bytes | None]]}``, ``{"big": True}`` (more than ``limit`` bytes: streamed) or ``{"error",
        "errno", "path"}``. ShadowRefused when the shadow cannot answer at all."""
        req = {"op": "inline_in", "paths": _our_paths(), "limit": limit,
               "jobs": [{"id": k, "spec": v} for k, v in jobs.items()]}
        answers = (await self._call(owner, req, "read the inputs of its jobs"))["jobs"]
        for answer in answers.values():
            if "files" in answer:
                answer["files"] = [[n, m, None if d is None else base64.b64decode(d)] for n, m, d in answer["files"]]
        return answers

    async def inline_outputs(self, owner: str, jobs: dict[str, tuple[dict[str, Any], list[Any]]]) -> dict[str, dict[str, Any]]:
        """The outputs of many of ``owner``'s jobs (id -> (transfer attributes, files)) written as
        the owner where each ad says, in one request; per id ``{"bytes"}`` or ``{"error", "errno",
        "path"}``. ShadowRefused when the shadow cannot answer at all."""
        sh = self._shadow(owner)
        for ad, _files in jobs.values():
            sh.wrote_to(output_directories(ad))
        req = {"op": "inline_out", "paths": _our_paths(), "jobs": [
            {"id": k, "spec": ad, "files": [[n, m, None if d is None else base64.b64encode(d).decode("ascii")]
                                           for n, m, d in files]} for k, (ad, files) in jobs.items()]}
        return (await self._call(owner, req, "write the outputs of its jobs", sh))["jobs"]

    async def uid_of(self, owner: str) -> int:
        return int((await self._call(owner, {"op": "whoami"}, "be"))["uid"])

    async def retain(self, owners: Iterable[str]) -> None:
        """Stop the shadows of owners not in ``owners`` (those with no running jobs) and of any
        owner idle for IDLE_SECONDS, unless a file transfer of theirs is under way or expected
        (an input transfer runs before its job counts as running)."""
        keep = set(owners)
        now = time.monotonic()
        for owner, sh in list(self._shadows.items()):
            if owner not in keep or now - sh.used > IDLE_SECONDS:
                if sh.users or await self._busy(owner, sh):
                    continue
                # (Asked while the busy check was answered: in use again, or replaced meanwhile.)
                if sh.users or self._shadows.get(owner) is not sh:
                    continue
                del self._shadows[owner]
                await sh.stop()

    async def _busy(self, owner: str, sh: _Shadow) -> bool:
        if not sh.queue or sh.proc is None or sh.proc.returncode is not None:
            return False  # never connected to the broker: it transfers nothing
        try:
            # (On the shadow's lock directly: the check is not a use that keeps it.)
            answer = await sh._request({"op": "busy"})
            return bool(answer.get("ok")) and int(answer.get("count") or 0) > 0
        except ShadowRefused:
            return False

    async def stop_all(self) -> None:
        shadows, self._shadows = self._shadows, {}
        await asyncio.gather(*(sh.stop() for sh in shadows.values()), return_exceptions=True)

    def running(self) -> dict[str, int]:
        """Owner -> pid of each shadow alive now."""
        return {o: sh.proc.pid for o, sh in self._shadows.items() if sh.proc and sh.proc.returncode is None}


def for_schedd(config: Callable[[], Any], bus_url: str = "") -> OwnerShadows:
    """The shadows of a schedd's owners (its user logs, Fetch and file transfers go through them);
    the run-as policy is read from ``config()``, the schedd's configuration, at first use;
    ``bus_url`` is the broker the shadows connect to for file transfer (with its credentials)."""
    policy: list[RunAsPolicy] = []

    def account_for(owner: str) -> Account:
        if not policy:
            policy.append(policy_from_config(config()))
        me = _current()
        if policy[0].user_map.account_name(owner) == me.name:
            return me  # the owner is the schedd's own account (a personal pool, even as root)
        return policy[0].account_for(owner)

    return OwnerShadows(account_for, bus_url)
