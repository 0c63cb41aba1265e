"""Startd cron and configured attributes: what an admin adds to the slot ads.

``STARTD_ATTRS`` (and its older name ``STARTD_EXPRS``) names configuration macros whose values go
into every slot ad as ClassAd expressions: ``STARTD_ATTRS = HasMatlab`` with ``HasMatlab = true``.

``STARTD_CRON_JOBLIST`` names jobs the startd runs itself, as HTCondor's daemon ClassAd hooks:
``STARTD_CRON_<name>_EXECUTABLE`` (its path; argv[0] is the job's name), ``_ARGS``, ``_PERIOD``
(seconds, or with an ``s``, ``m`` or ``h``), ``_MODE`` (``Periodic``, the default: started every
period; ``WaitForExit``: started again a period after it exits; ``OneShot``: once at the start;
``OnDemand``: never, as HTCondor runs only benchmarks so), ``_PREFIX`` (put before each attribute
name it prints), ``_KILL`` (a run still going when the next is due is killed and the next started;
HTCondor's default, false, leaves it running and starts none until it ends), ``_ENV`` and ``_CWD``.

A job prints ClassAd lines (``NODE_IS_HEALTHY = false``). They become the job's ad when it exits,
or at each line starting with ``-`` (what a ``WaitForExit`` job prints between its reports); that ad
replaces the job's previous one and is merged into every slot ad (after the machine's attributes,
before the slot's own: a job cannot rename a slot or change its resources). A job that exits with
a status other than 0, is killed, cannot be started, or prints a line that is no ClassAd
attribute is reported in the StartLog. ``STARTD_CRON_AUTOPUBLISH`` (``Never``, HTCondor's default:
the next periodic update carries the change; ``Always``; ``If_Changed``) says when the slot ads
are sent to the collector at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shlex
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gridbus import classad
from gridbus.agent.awaiting import cancel_and_wait
from gridbus.config import Config, knob, truth

log = logging.getLogger("gridbus.startd")

knob("STARTD_ATTRS", "", "configuration macros whose values every slot ad carries (names, comma or space separated)")
knob("STARTD_EXPRS", "", "the older name of STARTD_ATTRS (both apply)")
knob("STARTD_CRON_JOBLIST", "", "the startd cron jobs (names); each is configured by STARTD_CRON_<name>_EXECUTABLE, "
     "_ARGS, _PERIOD, _MODE, _PREFIX, _KILL, _ENV, _CWD")
knob("STARTD_CRON_AUTOPUBLISH", "Never", "send the slot ads at once when a cron job reports: Never (the next "
     "update carries it), Always, If_Changed")

MODES = {"periodic": "Periodic", "waitforexit": "WaitForExit", "oneshot": "OneShot", "ondemand": "OnDemand"}
AUTOPUBLISH = {"never": "Never", "always": "Always", "if_changed": "If_Changed"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PERIOD = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$", re.I)
KILL_WAIT = 5.0  # seconds a killed job has to go after SIGTERM before SIGKILL


def names(text: str) -> list[str]:
    """An HTCondor list knob's names (comma and/or white space separated)."""
    return [n for n in re.split(r"[\s,]+", text or "") if n]


def period_seconds(text: str, what: str) -> float:
    m = _PERIOD.match(str(text))
    if not m:
        raise ValueError(f"{what} = {text!r}: not a period (seconds, or a number with s, m or h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2).lower()]


def value_of(raw: Any, what: str) -> Any:
    """A configured value as a ClassAd value: a literal as itself, other text as an expression."""
    if isinstance(raw, bool | int | float):
        return raw
    text = str(raw).strip()
    try:
        ad = classad.parseOne(f"V = {text}\n", classad.ParserType.Old)
    except classad.ClassAdException as exc:
        raise ValueError(f"{what} = {text!r} is not a ClassAd expression: {exc}") from None
    return ad.get("V")


def configured_attrs(cfg: Config) -> dict[str, Any]:
    """STARTD_ATTRS and STARTD_EXPRS: each named macro's value, by name (ValueError names a bad one)."""
    out: dict[str, Any] = {}
    for list_knob in ("STARTD_ATTRS", "STARTD_EXPRS"):
        for name in names(str(cfg.get(list_knob))):
            if not _NAME.match(name):
                raise ValueError(f"{list_knob}: {name!r} is not an attribute name")
            raw = cfg.get(name, None)
            if raw is None:
                raise ValueError(f"{list_knob} names {name}, which is not configured (set {name} = <expression>)")
            out[name] = value_of(raw, name)
    return out


@dataclass(frozen=True)
class CronJob:
    """One STARTD_CRON job, as its knobs configure it."""

    name: str
    executable: str
    args: tuple[str, ...] = ()
    period: float = 0.0
    mode: str = "Periodic"
    prefix: str = ""
    kill: bool = False
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""


def jobs_from_config(cfg: Config) -> tuple[CronJob, ...]:
    """The jobs STARTD_CRON_JOBLIST names (ValueError naming the knob that is wrong)."""
    jobs = []
    seen: set[str] = set()
    for name in names(str(cfg.get("STARTD_CRON_JOBLIST"))):
        if not _NAME.match(name) or name.upper() in seen:
            raise ValueError(f"STARTD_CRON_JOBLIST: {name!r} is not a job name, or is named twice")
        seen.add(name.upper())

        def k(suffix: str, default: Any = None, name: str = name) -> Any:
            return cfg.get(f"STARTD_CRON_{name}_{suffix}", default)

        executable = str(k("EXECUTABLE", "") or "")
        if not os.path.isabs(executable):
            raise ValueError(f"STARTD_CRON_{name}_EXECUTABLE must be an absolute path, not {executable!r}")
        mode = MODES.get(str(k("MODE", "Periodic")).strip().lower())
        if mode is None:
            raise ValueError(f"STARTD_CRON_{name}_MODE = {k('MODE')!r}: not one of {', '.join(MODES.values())}")
        period = 0.0
        if mode in ("Periodic", "WaitForExit"):
            if k("PERIOD") is None:
                raise ValueError(f"STARTD_CRON_{name}_PERIOD is needed in {mode} mode")
            period = period_seconds(k("PERIOD"), f"STARTD_CRON_{name}_PERIOD")
            if period < 1:
                raise ValueError(f"STARTD_CRON_{name}_PERIOD must be at least 1 second, not {k('PERIOD')!r}")
        prefix = str(k("PREFIX", "") or "")
        if prefix and not re.fullmatch(r"[A-Za-z0-9_]+", prefix):
            raise ValueError(f"STARTD_CRON_{name}_PREFIX = {prefix!r}: only letters, digits and _ are allowed")
        try:
            args = tuple(shlex.split(str(k("ARGS", "") or "")))
            env = tuple((e.partition("=")[0], e.partition("=")[2]) for e in shlex.split(str(k("ENV", "") or "")) if "=" in e)
        except ValueError as exc:
            raise ValueError(f"STARTD_CRON_{name}_ARGS or _ENV: {exc}") from None
        kill_knob = k("KILL")  # an empty value is no value: the job is not killed, as when unset
        kill = kill_knob is not None and str(kill_knob).strip() != "" and truth(kill_knob, f"STARTD_CRON_{name}_KILL")
        jobs.append(CronJob(name, executable, args, period, mode, prefix, kill,
                            env, str(k("CWD", "") or "")))
    return tuple(jobs)


def parse_line(line: str, prefix: str) -> tuple[str, Any]:
    """One output line, ``Attr = value``, as (prefix + Attr, value); ValueError if it is not one."""
    try:
        ad = classad.parseOne(line + "\n", classad.ParserType.Old)
    except classad.ClassAdException as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    keys = list(ad.keys())
    if len(keys) != 1:
        raise ValueError("not one 'Attr = value'")
    return prefix + keys[0], ad.get(keys[0])


@dataclass
class _State:
    process: asyncio.subprocess.Process | None = None
    run: asyncio.Task[None] | None = None  # the run under way (a task of its own, beside the loop's)
    started: float = 0.0
    reported: dict[str, Any] = field(default_factory=dict)  # its ad, as last completed


class StartdCron:
    """Runs the cron jobs and keeps their merged ad (``attributes``) for the slot ads."""

    def __init__(self, jobs: tuple[CronJob, ...], on_report: Callable[[bool], None]):
        """``on_report(changed)``: a job's ad was completed (``changed``: it differs from before)."""
        self.jobs = jobs
        self.on_report = on_report
        self.attributes: dict[str, Any] = {}  # kept in place: the slot ads hold it
        self._states = {j.name: _State() for j in jobs}
        self._tasks: list[asyncio.Task] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        for job in self.jobs:
            if job.mode == "OnDemand":
                log.info("STARTD_CRON job %s is OnDemand: HTCondor runs only benchmarks so; it is not run", job.name)
                continue
            self._tasks.append(asyncio.get_running_loop().create_task(self._loop(job), name=f"startd cron {job.name}"))

    async def stop(self) -> None:
        # The loops and the runs under way (a run is a task of its own, which a cancelled loop
        # leaves running), each cancelled until it ends: a run cancelled kills its job.
        runs = [state.run for state in self._states.values() if state.run is not None]
        await cancel_and_wait([*self._tasks, *runs], log)
        self._tasks.clear()
        for state in self._states.values():
            await self._kill(state)

    async def replace(self, jobs: tuple[CronJob, ...]) -> None:
        """A reconfig changed the jobs: stop the old ones, forget their ads, start the new."""
        await self.stop()
        self.jobs = jobs
        self._states = {j.name: _State() for j in jobs}
        self._merge()
        self.on_report(True)
        self.start()

    # ------------------------------------------------------------------ running
    async def _loop(self, job: CronJob) -> None:
        state = self._states[job.name]
        while True:
            begun = time.monotonic()
            run = state.run = asyncio.create_task(self._run_logged(job, state))
            if job.mode == "OneShot":
                await run
                return
            if job.mode == "WaitForExit":
                await run
                await asyncio.sleep(job.period)
                continue
            done, _ = await asyncio.wait({run}, timeout=job.period)
            if not done:
                if job.kill:
                    log.warning("STARTD_CRON job %s was still running after its period (%g s): killed, and started "
                                "again (STARTD_CRON_%s_KILL)", job.name, job.period, job.name)
                    await self._kill(state)
                    with contextlib.suppress(Exception):
                        await run
                    continue
                log.warning("STARTD_CRON job %s is still running after its period (%g s): not started again until "
                            "it exits (STARTD_CRON_%s_KILL = true kills it)", job.name, job.period, job.name)
                await run
            # Periodic: runs start a whole number of periods after the first one.
            elapsed = time.monotonic() - begun
            await asyncio.sleep(job.period - (elapsed % job.period))

    async def _run_logged(self, job: CronJob, state: _State) -> None:
        # A job's failure is the StartLog's to tell, never the end of its loop.
        try:
            await self._run(job, state)
        except Exception as exc:
            log.error("STARTD_CRON job %s: %s: %s", job.name, type(exc).__name__, exc)

    async def _run(self, job: CronJob, state: _State) -> None:
        try:
            state.process = proc = await asyncio.create_subprocess_exec(
                job.name, *job.args, executable=job.executable, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                cwd=job.cwd or None, env={**os.environ, **dict(job.env)} if job.env else None)
        except OSError as exc:
            log.error("STARTD_CRON job %s could not be started (%s): %s", job.name, job.executable, exc)
            return
        state.started = time.monotonic()
        assert proc.stdout is not None and proc.stderr is not None
        errors = asyncio.ensure_future(proc.stderr.read())
        pending: dict[str, Any] = {}
        got_any = False
        try:
            async for raw in proc.stdout:
                line = raw.decode(errors="replace").strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("-"):  # the ad so far is complete
                    self._report(job, state, pending)
                    pending, got_any = {}, False
                    continue
                try:
                    attr, value = parse_line(line, job.prefix)
                except ValueError as exc:
                    log.warning("STARTD_CRON job %s printed a line that is no ClassAd attribute (%s): %r",
                                job.name, exc, line[:200])
                    continue
                pending[attr] = value
                got_any = True
            code = await proc.wait()
        except asyncio.CancelledError:
            # Stopped (or replaced) while the job runs: it goes with its task, before the state
            # forgets it (the job has a session of its own: nothing else would end it).
            errors.cancel()
            await self._kill(state)
            raise
        finally:
            state.process = None
        stderr = (await errors).decode(errors="replace").strip()
        if got_any:
            self._report(job, state, pending)
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            log.warning("STARTD_CRON job %s (%s) %s%s", job.name, job.executable, how,
                        f": {stderr.splitlines()[-1][:300]}" if stderr else "")

    async def _kill(self, state: _State) -> None:
        proc = state.process
        if proc is None or proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, KILL_WAIT), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(proc.wait(), wait)
                return
            except TimeoutError:
                continue

    def _report(self, job: CronJob, state: _State, ad: dict[str, Any]) -> None:
        changed = ad != state.reported
        state.reported = dict(ad)
        self._merge()
        self.on_report(changed)

    def _merge(self) -> None:
        merged: dict[str, Any] = {}
        for job in self.jobs:  # in STARTD_CRON_JOBLIST's order: a later job's attribute wins
            merged.update(self._states[job.name].reported)
        self.attributes.clear()
        self.attributes.update(merged)


def autopublish(cfg_value: str) -> str:
    found = AUTOPUBLISH.get(str(cfg_value).strip().lower())
    if found is None:
        raise ValueError(f"STARTD_CRON_AUTOPUBLISH = {cfg_value!r}: not one of {', '.join(AUTOPUBLISH.values())}")
    return found


def publishes(policy: str, changed: bool) -> bool:
    """Whether a report sends the slot ads at once under STARTD_CRON_AUTOPUBLISH ``policy``."""
    return policy == "Always" or (policy == "If_Changed" and changed)

