"""Run one agent as a daemon process: logging, signals, graceful stop."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import logging.handlers
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from gridbus import allocator
from gridbus.agent.core import Agent
from gridbus.config import Config
from gridbus.errors import EXIT_REASON_ENV, NoRestart
from gridbus.topology import DAEMON_NO_RESTART

# The cyclic garbage collector's young generation is collected once this many more container
# objects were made than freed (CPython's default is 700). A collector replacing 200,000 slot ads
# makes a message's 500 new ads before it frees the old ones: at 700, each round of updates ran
# about 1,100 young and 100 middle collections, and promoted enough to run three full ones over
# its 1.2 million objects, 45% of its ingest time. At 10,000 the churn of a steady pool runs
# none; a growing heap is still collected, full collections stay as rare as CPython makes them.
GC_YOUNG_THRESHOLD = 10_000
# The middle generation is collected with the young one at every fourth young collection (CPython's
# default is every eleventh), so it holds what survived three young collections at most: about
# 30,000 objects, not 100,000. Each middle collection walks all of it at once, with nothing else of
# the daemon running meanwhile: while a 200,000-slot pool filled, every schedd turn over a second
# was one of them (0.08-0.10 s of cpu, ten times that in wall time on two cpus loaded 14-20), and
# every Query waited behind it. At 2, in the same run, no schedd turn reached a second.
GC_MIDDLE_THRESHOLD = 2
# A full collection is considered once this many middle-generation collections ran (CPython's
# default is 10, and it also waits until a quarter more objects reached the old generation than
# the last full one left): with GC_MIDDLE_THRESHOLD, once every 1,300 young collections or so. A
# full collection walks every object a daemon holds: a schedd of 40,000 jobs and 20,000 claims, a
# collector of 200,000 ads. While a 200,000-slot pool filled with CPython's default, each schedd
# ran one every two or three minutes, a turn of 1-1.7 s on two loaded cpus that every Query
# waited behind; a collector's took 9.7 s. The young collections still reclaim what dies young
# (nearly all of a daemon's cyclic garbage: a call's exception and its traceback).
GC_FULL_THRESHOLD = 330


def tune_gc() -> None:
    """Before a daemon's loop starts: the objects of its start-up (modules, configuration) are
    moved out of the collector's view for good (they live as long as the process), and the
    generations' thresholds are set to GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD and
    GC_FULL_THRESHOLD."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD, GC_FULL_THRESHOLD)


def setup_logging(
    name: str,
    log_dir: str | None,
    foreground: bool,
    level: str = "INFO",
    *,
    max_bytes: int = 10_000_000,
    backups: int = 2,
) -> None:
    """One rotated log file per daemon (like HTCondor's SchedLog), and stderr in the foreground.

    ``max_bytes``/``backups`` are the knobs MAX_DAEMON_LOG and MAX_NUM_DAEMON_LOG.
    """
    handlers: list[logging.Handler] = []
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    if log_dir:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        fh = logging.handlers.RotatingFileHandler(Path(log_dir) / name, maxBytes=max_bytes, backupCount=backups)
        fh.setFormatter(fmt)
        handlers.append(fh)
    if foreground or not handlers:
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(fmt)
        handlers.append(sh)
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=handlers, force=True)
    logging.getLogger("aio_pika").setLevel(logging.WARNING)
    logging.getLogger("aiormq").setLevel(logging.WARNING)


def base_parser(kind: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"gridbus-{kind}", description=f"the gridbus {kind} agent")
    p.add_argument("--name", help="daemon name (default: from configuration, else the host name)")
    p.add_argument("--url", help="broker URL (default: GRIDBUS_URL or the configuration)")
    p.add_argument("--log-dir", help="write the daemon log here (rotated)")
    p.add_argument("--foreground", action="store_true", help="also log to stderr")
    return p


def serve(
    kind: str,
    log_name: str,
    build: Callable[[Config, argparse.Namespace], Agent],
    argv: list[str] | None = None,
    *,
    parser: argparse.ArgumentParser | None = None,
    check: Callable[[Config], object] | None = None,
    loop_thread: bool = False,
) -> None:
    """A daemon's ``main``: parse its options, load its configuration, open its log, run it.

    Every daemon starts the same way, so one function does it: ``--config`` (if ``parser`` has
    it) names the file, a bad configuration (including what ``check`` raises) ends the process
    with a sentence, the log goes to ``--log-dir`` else the LOG knob, rotated as MAX_DAEMON_LOG
    and MAX_NUM_DAEMON_LOG say, and ``build(cfg, args)`` makes the agent once the loop runs
    (on a thread of its own with ``loop_thread``, see `run`).
    """
    args = (parser or base_parser(kind)).parse_args(argv)
    try:
        cfg = Config.load(getattr(args, "config", None), daemon=kind)
        log_dir = args.log_dir or str(cfg.path_of("LOG"))
        max_bytes, backups = int(cfg.get("MAX_DAEMON_LOG")), int(cfg.get("MAX_NUM_DAEMON_LOG"))
        if check is not None:
            check(cfg)
    except (ValueError, KeyError) as exc:  # ConfigError is a ValueError
        sys.exit(f"gridbus {kind}: bad configuration: {exc}")
    setup_logging(log_name, log_dir, args.foreground, max_bytes=max_bytes, backups=backups)
    try:
        run(lambda: build(cfg, args), loop_thread=loop_thread)
    except NoRestart as exc:
        stop_for_good(kind, str(exc))


def stop_for_good(kind: str, sentence: str) -> NoReturn:
    """End a daemon that cannot run until an operator acts: one sentence (no traceback) in its log,
    on stderr and in its master's exit reason file, and the status that tells the master not to
    start it again (it would stop the same way)."""
    logging.getLogger(f"gridbus.{kind}").error("%s", sentence)
    print(f"gridbus {kind}: {sentence}", file=sys.stderr)
    reason_file = os.environ.get(EXIT_REASON_ENV)
    if reason_file:
        try:
            Path(reason_file).write_text(sentence)
        except OSError as exc:  # the log and stderr still say it
            logging.getLogger(f"gridbus.{kind}").warning("could not write %s for the master: %s", reason_file, exc)
    sys.exit(DAEMON_NO_RESTART)


def run(make_agent: Callable[[], Agent], *, loop_thread: bool = False) -> None:
    """Run the agent until SIGTERM/SIGINT, then stop it gracefully (ads invalidated).

    SIGHUP makes it re-read its configuration (``Agent.reconfig``), as HTCondor's daemons do on
    condor_reconfig; the master sends it to its daemons on Reconfig.

    ``loop_thread``: the event loop runs on a thread of its own and the main thread only waits and
    hands it the signals. The startd's loop forks each job while it is in the job's cgroup, which
    the main thread may not do (its memory group is the whole process's: agents/startd/cgroups.py).
    """
    started: list[tuple[asyncio.AbstractEventLoop, asyncio.Event, Agent]] = []
    early_stop = threading.Event()  # a stop signal before the loop ran

    async def main() -> None:
        agent = make_agent()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if loop_thread:
            started.append((loop, stop, agent))
            if early_stop.is_set():
                stop.set()
        else:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            loop.add_signal_handler(signal.SIGHUP, lambda: _reconfig(agent))
        await agent.run(stop)

    tune_gc()
    allocator.tune()
    default_inherited_ignores()
    if not loop_thread:
        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            pass
        return

    failed: list[BaseException] = []

    def body() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the main thread, which ends the process with it
            failed.append(exc)

    def on_stop(signum: int, frame: object) -> None:
        early_stop.set()
        if started:
            loop, stop, _agent = started[0]
            loop.call_soon_threadsafe(stop.set)

    def on_hup(signum: int, frame: object) -> None:
        if started:
            loop, _stop, agent = started[0]
            loop.call_soon_threadsafe(_reconfig, agent)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    thread = threading.Thread(target=body, name="loop")
    thread.start()
    while thread.is_alive():
        thread.join(1.0)  # (a signal's handler runs on this thread between two waits)
    if failed:
        raise failed[0]


def default_inherited_ignores() -> None:
    """Put back to their defaults the signals this daemon was started with ignored (a shell's
    `cmd &` ignores SIGINT and SIGQUIT, nohup SIGHUP): a job or shadow started by
    subprocess.Popen would inherit them (Popen restores only SIGPIPE and SIGXFSZ, which Python
    itself ignores), where HTCondor's starter starts a job with every signal at its default.
    Called on the main thread, before the daemon installs its own handlers."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ):
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # (a signal Python may not set)
            pass


def _reconfig(agent: Agent) -> None:
    async def apply() -> None:
        changed = await agent.reconfig()
        logging.getLogger("gridbus.runner").info(
            "%s reconfigured on SIGHUP; changed: %s", agent.address, ", ".join(changed) or "nothing"
        )

    if agent.ready is None or not agent.ready.is_set():
        return  # not serving yet: it read the configuration moments ago
    agent.spawn(apply(), "reconfig")
